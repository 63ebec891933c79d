// Global functions visible to every template: jinja2's range/dict/namespace plus transformers'
// raise_exception and strftime_now.
#include <ctime>

#include "core/error.h"
#include "template/interpreter.h"

namespace vireo::tmpl {

namespace {

int64_t int_arg(const Value& v) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  fail("'" + type_name(v) + "' object cannot be interpreted as an integer");
}

Value range_fn(Interpreter&, CallArgs& a) {
  if (a.pos.empty() || a.pos.size() > 3) fail("range expected 1 to 3 arguments");
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = int_arg(a.pos[0]);
  } else {
    start = int_arg(a.pos[0]);
    stop = int_arg(a.pos[1]);
    if (a.pos.size() == 3) step = int_arg(a.pos[2]);
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  // Length computed in double to avoid overflow on hostile bounds.
  double n = std::max(0.0, std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step)));
  if (n > static_cast<double>(Interpreter::kMaxRange))
    fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" + std::to_string(Interpreter::kMaxRange) + ").");
  std::vector<Value> out;
  for (int64_t i = 0, x = start; i < static_cast<int64_t>(n); ++i, x += step) out.push_back(Value(x));
  return make_list(std::move(out));
}

void fill_dict(Interpreter& in, DictObj& d, CallArgs& a, const char* what) {
  if (a.pos.size() > 1) fail(std::string(what) + " expected at most 1 positional argument");
  if (!a.pos.empty()) {
    const Value& src = a.pos[0];
    if (src.is_dict()) {
      for (const auto& kv : src.dict()->items) d.set(kv.first, kv.second);
    } else {
      for (const Value& item : in.iterate(src)) {
        std::vector<Value> kv = in.iterate(item);
        if (kv.size() != 2) fail(std::string(what) + ": sequence elements must have length 2");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : a.kw) d.set(Value(k), v);
}

}  // namespace

void install_globals(Scope& s) {
  s.vars["range"] = make_func("range", range_fn);
  s.vars["dict"] = make_func("dict", [](Interpreter& in, CallArgs& a) {
    Value d = make_dict();
    fill_dict(in, *d.dict(), a, "dict");
    return d;
  });
  s.vars["namespace"] = make_func("namespace", [](Interpreter& in, CallArgs& a) {
    Value d = make_dict();
    d.dict()->is_namespace = true;
    fill_dict(in, *d.dict(), a, "namespace");
    return d;
  });
  s.vars["raise_exception"] = make_func("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
    std::string msg = a.pos.empty() ? std::string() : py_str(a.pos[0]);
    throw vireo::Error("chat template raised an exception: " + msg);
  });
  s.vars["strftime_now"] = make_func("strftime_now", [](Interpreter&, CallArgs& a) -> Value {
    if (a.pos.empty() || !a.pos[0].is_string()) fail("strftime_now expects a format string");
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[512];
    size_t n = std::strftime(buf, sizeof(buf), a.pos[0].str().c_str(), &tm);
    return Value(std::string(buf, n));
  });
}

}  // namespace vireo::tmpl
