// Expression evaluation (the eval() of each ast.h expression node).
#include "template/interpreter.h"

namespace vireo::tmpl {

// Keeps a hostile template (s = s ~ s in a loop) from growing values without bound.
static Value checked(Value v) {
  if (v.is_string() && v.str().size() > Interpreter::kMaxOutput) fail("string value too large");
  if (v.is_list() && v.list()->items.size() > Interpreter::kMaxListSize) fail("list value too large");
  return v;
}

Value ConstExpr::eval(Interpreter&) const { return value; }

Value NameExpr::eval(Interpreter& in) const { return in.lookup(name); }

Value GetAttrExpr::eval(Interpreter& in) const { return in.getattr(obj->eval(in), attr); }

Value GetItemExpr::eval(Interpreter& in) const {
  Value o = obj->eval(in);
  return in.getitem(o, key->eval(in));
}

Value SliceExpr::eval(Interpreter& in) const {
  Value o = obj->eval(in);
  Value none{None{}};
  return in.slice(o, start ? start->eval(in) : none, stop ? stop->eval(in) : none, step ? step->eval(in) : none);
}

static CallArgs eval_args(Interpreter& in, const std::vector<ExprPtr>& args, const KwArgs& kwargs) {
  CallArgs a;
  for (const auto& e : args) a.pos.push_back(e->eval(in));
  for (const auto& [k, e] : kwargs) a.kw.emplace_back(k, e->eval(in));
  return a;
}

Value CallExpr::eval(Interpreter& in) const {
  Value f = callee->eval(in);
  CallArgs a = eval_args(in, args, kwargs);
  return checked(in.call(f, a));
}

Value CallExpr::eval_with_caller(Interpreter& in, Value caller) const {
  Value f = callee->eval(in);
  CallArgs a = eval_args(in, args, kwargs);
  a.kw.emplace_back("caller", std::move(caller));
  return in.call(f, a);
}

Value FilterExpr::apply(Interpreter& in, Value v) const {
  CallArgs a = eval_args(in, args, kwargs);
  return checked(apply_filter(in, name, std::move(v), a));
}

Value FilterExpr::eval(Interpreter& in) const { return apply(in, operand->eval(in)); }

Value TestExpr::eval(Interpreter& in) const {
  Value v = operand->eval(in);
  CallArgs a = eval_args(in, args, {});
  bool r = apply_test(in, name, v, a);
  return Value(negated ? !r : r);
}

Value UnaryExpr::eval(Interpreter& in) const {
  Value v = operand->eval(in);
  if (op == "not") return Value(!truthy(v));
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_bool()) v = Value(static_cast<int64_t>(v.as_bool()));
  if (op == "-") {
    if (v.is_int()) return Value(-v.as_int());
    if (v.is_float()) return Value(-v.as_float());
  } else {
    if (v.is_int() || v.is_float()) return v;
  }
  fail("bad operand type for unary " + op + ": '" + type_name(v) + "'");
}

Value BinaryExpr::eval(Interpreter& in) const {
  Value l = left->eval(in);
  if (op == "and") return truthy(l) ? right->eval(in) : l;
  if (op == "or") return truthy(l) ? l : right->eval(in);
  Value r = right->eval(in);
  return checked(binary_op(op, l, r));
}

static bool compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return py_equal(a, b);
  if (op == "!=") return !py_equal(a, b);
  if (op == "<") return py_less(a, b);
  if (op == ">") return py_less(b, a);
  if (op == "<=") return py_less(a, b) || py_equal(a, b);
  if (op == ">=") return py_less(b, a) || py_equal(a, b);
  if (op == "in") return contains(b, a);
  return !contains(b, a);  // notin
}

Value CompareExpr::eval(Interpreter& in) const {
  Value l = first->eval(in);
  for (const auto& [op, e] : rest) {
    Value r = e->eval(in);
    if (!compare(op, l, r)) return Value(false);
    l = std::move(r);
  }
  return Value(true);
}

Value CondExpr::eval(Interpreter& in) const {
  if (truthy(test->eval(in))) return then->eval(in);
  if (otherwise) return otherwise->eval(in);
  return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
}

Value ListExpr::eval(Interpreter& in) const {
  std::vector<Value> v;
  v.reserve(items.size());
  for (const auto& e : items) v.push_back(e->eval(in));
  return make_list(std::move(v), tuple);
}

Value DictExpr::eval(Interpreter& in) const {
  Value d = make_dict();
  for (const auto& [k, e] : items) {
    Value key = k->eval(in);
    if (key.is_list() && !key.list()->is_tuple) fail("unhashable type: 'list'");
    if (key.is_dict()) fail("unhashable type: 'dict'");
    d.dict()->set(std::move(key), e->eval(in));
  }
  return d;
}

}  // namespace vireo::tmpl
