// Statement execution (the exec() of each ast.h statement node).
#include "template/interpreter.h"

namespace vireo::tmpl {

Flow TextStmt::exec(Interpreter& in, std::string& out) const {
  out += text;
  in.check_output(out);
  return Flow::Normal;
}

Flow OutputStmt::exec(Interpreter& in, std::string& out) const {
  out += py_str(expr->eval(in));
  in.check_output(out);
  return Flow::Normal;
}

Flow IfStmt::exec(Interpreter& in, std::string& out) const {
  for (const auto& [cond, body] : branches)
    if (truthy(cond->eval(in))) return in.render(body, out);
  return in.render(otherwise, out);
}

static Value make_loop(Interpreter& in, const std::vector<Value>& items, size_t i, std::shared_ptr<Value> last_changed) {
  auto d = std::make_shared<DictObj>();
  int64_t n = static_cast<int64_t>(items.size());
  int64_t k = static_cast<int64_t>(i);
  d->set(Value("index"), Value(k + 1));
  d->set(Value("index0"), Value(k));
  d->set(Value("revindex"), Value(n - k));
  d->set(Value("revindex0"), Value(n - k - 1));
  d->set(Value("first"), Value(k == 0));
  d->set(Value("last"), Value(k == n - 1));
  d->set(Value("length"), Value(n));
  d->set(Value("depth"), Value(1));
  d->set(Value("depth0"), Value(0));
  d->set(Value("previtem"), k > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
  d->set(Value("nextitem"), k + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
  d->set(Value("cycle"), make_func("cycle", [k](Interpreter&, CallArgs& a) -> Value {
           if (a.pos.empty()) fail("no items for cycling given");
           return a.pos[static_cast<size_t>(k) % a.pos.size()];
         }));
  d->set(Value("changed"), make_func("changed", [last_changed](Interpreter&, CallArgs& a) -> Value {
           Value cur = make_list(a.pos);
           if (!last_changed->is_undefined() && py_equal(*last_changed, cur)) return Value(false);
           *last_changed = cur;
           return Value(true);
         }));
  return Value(d);
}

Flow ForStmt::exec(Interpreter& in, std::string& out) const {
  std::vector<Value> items = in.iterate(iter->eval(in));
  if (filter) {
    std::vector<Value> kept;
    for (const Value& v : items) {
      in.step();
      bool keep = in.with_scope(nullptr, [&] {
        in.assign_target(target, v);
        return truthy(filter->eval(in));
      });
      if (keep) kept.push_back(v);
    }
    items = std::move(kept);
  }
  if (items.empty()) return in.render(otherwise, out);
  auto last_changed = std::make_shared<Value>();
  for (size_t i = 0; i < items.size(); ++i) {
    in.step();
    Flow f = in.with_scope(nullptr, [&] {
      in.assign("loop", make_loop(in, items, i, last_changed));
      in.assign_target(target, items[i]);
      return in.render(body, out);
    });
    if (f == Flow::Break) break;
  }
  return Flow::Normal;
}

Flow SetStmt::exec(Interpreter& in, std::string&) const {
  in.assign_target(target, value->eval(in));
  return Flow::Normal;
}

Flow SetBlockStmt::exec(Interpreter& in, std::string&) const {
  std::string text;
  in.render(body, text);
  Value v(text);
  for (const auto& f : filters) v = f->apply(in, v);
  in.assign_target(target, v);
  return Flow::Normal;
}

Value MacroStmt::make(Interpreter& in) const {
  std::shared_ptr<Scope> closure = in.scope();
  const MacroStmt* self = this;
  return make_func(name, [self, closure](Interpreter& it, CallArgs& a) -> Value {
    Interpreter::CallDepthGuard guard(it);
    return it.with_scope(closure, [&] {
      std::vector<Value> varargs;
      for (size_t i = 0; i < a.pos.size(); ++i) {
        if (i < self->params.size()) it.assign(self->params[i].first, a.pos[i]);
        else varargs.push_back(a.pos[i]);
      }
      Value kwargs = make_dict();
      for (const auto& [k, v] : a.kw) {
        bool is_param = false;
        for (size_t i = 0; i < self->params.size(); ++i) {
          if (self->params[i].first != k) continue;
          if (i < a.pos.size()) fail("macro '" + self->name + "' got multiple values for argument '" + k + "'");
          it.assign(k, v);
          is_param = true;
        }
        if (k == "caller") it.assign("caller", v);
        else if (!is_param) kwargs.dict()->set(Value(k), v);
      }
      for (size_t i = a.pos.size(); i < self->params.size(); ++i) {
        const auto& [pname, def] = self->params[i];
        if (a.kwarg(pname)) continue;
        it.assign(pname, def ? def->eval(it) : Value::undefined("parameter '" + pname + "' was not provided"));
      }
      it.assign("varargs", make_list(std::move(varargs), true));
      it.assign("kwargs", kwargs);
      std::string text;
      it.render(self->body, text);
      return Value(text);
    });
  });
}

Flow MacroStmt::exec(Interpreter& in, std::string&) const {
  in.assign(name, make(in));
  return Flow::Normal;
}

Flow CallBlockStmt::exec(Interpreter& in, std::string& out) const {
  out += py_str(call->eval_with_caller(in, caller->make(in)));
  in.check_output(out);
  return Flow::Normal;
}

Flow FilterBlockStmt::exec(Interpreter& in, std::string& out) const {
  std::string text;
  in.render(body, text);
  Value v(text);
  for (const auto& f : filters) v = f->apply(in, v);
  out += py_str(v);
  in.check_output(out);
  return Flow::Normal;
}

Flow WithStmt::exec(Interpreter& in, std::string& out) const {
  return in.with_scope(nullptr, [&] {
    for (const auto& [t, e] : assigns) in.assign_target(t, e->eval(in));
    return in.render(body, out);
  });
}

Flow BodyStmt::exec(Interpreter& in, std::string& out) const { return in.render(body, out); }

Flow LoopControlStmt::exec(Interpreter&, std::string&) const { return is_break ? Flow::Break : Flow::Continue; }

}  // namespace vireo::tmpl
