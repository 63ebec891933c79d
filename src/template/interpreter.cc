#include "template/interpreter.h"

#include "template/py_format.h"

namespace vireo::tmpl {

Interpreter::CallDepthGuard::CallDepthGuard(Interpreter& i) : in(i) {
  if (++in.call_depth_ > kMaxCallDepth) {
    --in.call_depth_;
    fail("maximum macro recursion depth exceeded");
  }
}

Scope* Interpreter::find_scope(const std::string& name) const {
  for (Scope* s = scope_.get(); s; s = s->parent.get())
    if (s->vars.count(name)) return s;
  return nullptr;
}

Value Interpreter::lookup(const std::string& name) const {
  for (Scope* s = scope_.get(); s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  return Value::undefined("'" + name + "' is undefined");
}

void Interpreter::assign_target(const Target& t, const Value& v) {
  if (!t.attr.empty()) {
    Value ns = lookup(t.names[0]);
    if (!ns.is_dict() || !ns.dict()->is_namespace) fail("cannot assign attribute on non-namespace object");
    ns.dict()->set(Value(t.attr), v);
    return;
  }
  if (!t.unpack) {
    assign(t.names[0], v);
    return;
  }
  std::vector<Value> items = iterate(v);
  if (items.size() != t.names.size())
    fail(items.size() < t.names.size() ? "not enough values to unpack (expected " + std::to_string(t.names.size()) + ", got " + std::to_string(items.size()) + ")"
                                       : "too many values to unpack (expected " + std::to_string(t.names.size()) + ")");
  for (size_t i = 0; i < items.size(); ++i) assign(t.names[i], items[i]);
}

static std::string obj_desc(const Value& obj) {
  if (obj.is_none()) return "'None'";
  return "'" + type_name(obj) + " object'";
}

Value Interpreter::getattr(const Value& obj, const std::string& name) const {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict() && obj.dict()->is_namespace) {
    if (const Value* v = obj.dict()->find_str(name)) return *v;
    return Value::undefined(obj_desc(obj) + " has no attribute '" + name + "'");
  }
  Value m = get_method(obj, name);
  if (!m.is_undefined()) return m;
  if (obj.is_dict()) {
    if (const Value* v = obj.dict()->find_str(name)) return *v;
  }
  return Value::undefined(obj_desc(obj) + " has no attribute '" + name + "'");
}

static bool index_of(const Value& key, int64_t size, int64_t* out) {
  int64_t i;
  if (key.is_int()) i = key.as_int();
  else if (key.is_bool()) i = key.as_bool();
  else return false;
  if (i < 0) i += size;
  if (i < 0 || i >= size) return false;
  *out = i;
  return true;
}

Value Interpreter::getitem(const Value& obj, const Value& key) const {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict()) {
    if (obj.dict()->is_namespace) return key.is_string() ? getattr(obj, key.str()) : Value::undefined();
    if (const Value* v = obj.dict()->find(key)) return *v;
  } else if (obj.is_list() && !obj.list()->is_generator && !obj.list()->view_name) {
    int64_t i;
    const auto& items = obj.list()->items;
    if (index_of(key, static_cast<int64_t>(items.size()), &i)) return items[i];
  } else if (obj.is_string()) {
    if (key.is_int() || key.is_bool()) {
      std::u32string u = utf8_decode(obj.str());
      int64_t i;
      if (index_of(key, static_cast<int64_t>(u.size()), &i)) return Value(utf8_encode(u.substr(i, 1)));
    }
  }
  if (key.is_string()) {
    Value m = get_method(obj, key.str());
    if (!m.is_undefined()) return m;
    return Value::undefined(obj_desc(obj) + " has no attribute '" + key.str() + "'");
  }
  return Value::undefined(obj_desc(obj) + " has no element " + py_repr(key));
}

// Python's slice index adjustment (PySlice_AdjustIndices).
static std::vector<int64_t> slice_indices(int64_t len, const Value& start, const Value& stop, const Value& step) {
  auto as_int = [](const Value& v, const char* what) -> int64_t {
    if (v.is_int()) return v.as_int();
    if (v.is_bool()) return v.as_bool();
    fail(std::string("slice ") + what + " must be an integer or None");
  };
  int64_t st = (step.is_none() || step.is_undefined()) ? 1 : as_int(step, "step");
  if (st == 0) fail("slice step cannot be zero");
  int64_t lo, hi;
  if (st > 0) {
    lo = (start.is_none() || start.is_undefined()) ? 0 : as_int(start, "start");
    hi = (stop.is_none() || stop.is_undefined()) ? len : as_int(stop, "stop");
    if (lo < 0) lo = std::max<int64_t>(0, lo + len);
    if (hi < 0) hi = std::max<int64_t>(0, hi + len);
    lo = std::min(lo, len);
    hi = std::min(hi, len);
  } else {
    lo = (start.is_none() || start.is_undefined()) ? len - 1 : as_int(start, "start");
    hi = (stop.is_none() || stop.is_undefined()) ? -1 : as_int(stop, "stop");
    if (!(start.is_none() || start.is_undefined())) {
      if (lo < 0) lo = std::max<int64_t>(-1, lo + len);
      lo = std::min(lo, len - 1);
    }
    if (!(stop.is_none() || stop.is_undefined())) {
      if (hi < 0) hi = std::max<int64_t>(-1, hi + len);
      hi = std::min(hi, len - 1);
    }
  }
  std::vector<int64_t> idx;
  if (st > 0)
    for (int64_t i = lo; i < hi; i += st) idx.push_back(i);
  else
    for (int64_t i = lo; i > hi; i += st) idx.push_back(i);
  return idx;
}

Value Interpreter::slice(const Value& obj, const Value& start, const Value& stop, const Value& step) const {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_list() && !obj.list()->is_generator && !obj.list()->view_name) {
    const auto& items = obj.list()->items;
    std::vector<Value> out;
    for (int64_t i : slice_indices(static_cast<int64_t>(items.size()), start, stop, step)) out.push_back(items[i]);
    return make_list(std::move(out), obj.list()->is_tuple);
  }
  if (obj.is_string()) {
    std::u32string u = utf8_decode(obj.str());
    std::u32string out;
    for (int64_t i : slice_indices(static_cast<int64_t>(u.size()), start, stop, step)) out += u[i];
    return Value(utf8_encode(out));
  }
  return Value::undefined(obj_desc(obj) + " is not subscriptable");
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) fail_undefined(fn);
  if (!fn.is_func()) fail("'" + type_name(fn) + "' object is not callable");
  step();
  return fn.func()->fn(*this, args);
}

std::vector<Value> Interpreter::iterate(const Value& v) const {
  std::vector<Value> out;
  if (v.is_undefined()) return out;
  if (v.is_list()) return v.list()->items;
  if (v.is_dict() && !v.dict()->is_namespace) {
    for (const auto& kv : v.dict()->items) out.push_back(kv.first);
    return out;
  }
  if (v.is_string()) {
    for (char32_t c : utf8_decode(v.str())) out.push_back(Value(utf8_encode(std::u32string(1, c))));
    return out;
  }
  fail("'" + type_name(v) + "' object is not iterable");
}

Flow Interpreter::render(const Body& body, std::string& out) {
  for (const auto& s : body) {
    Flow f = s->exec(*this, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

void Interpreter::check_output(const std::string& out) const {
  if (out.size() > max_output) fail("rendered output exceeds " + std::to_string(max_output) + " bytes");
}

void Interpreter::step() {
  if (++steps_ > max_steps) fail("template exceeded " + std::to_string(max_steps) + " steps (loop iterations, calls, filters)");
}

}  // namespace vireo::tmpl
