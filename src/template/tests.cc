// jinja2's built-in tests (`x is defined`, `x is divisibleby 3`, ...).
#include <cmath>
#include <unordered_map>

#include "template/interpreter.h"
#include "template/parser.h"
#include "template/py_string.h"

namespace vireo::tmpl {

namespace {

using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);

const Value& arg0(CallArgs& a, const char* test) {
  if (a.pos.empty()) fail(std::string("test '") + test + "' needs an argument");
  return a.pos[0];
}

bool sameas(const Value& x, const Value& y) {
  if (x.v.index() != y.v.index()) return false;
  if (x.is_list()) return x.list() == y.list();
  if (x.is_dict()) return x.dict() == y.dict();
  if (x.is_func()) return x.func() == y.func();
  return py_equal(x, y);
}

double as_num(const Value& v, const char* test) {
  if (v.is_int()) return static_cast<double>(v.as_int());
  if (v.is_bool()) return v.as_bool();
  if (v.is_float()) return v.as_float();
  if (v.is_undefined()) fail_undefined(v);
  fail(std::string("test '") + test + "' needs a number, got " + type_name(v));
}

#define TEST(name) bool t_##name([[maybe_unused]] Interpreter& in, const Value& v, [[maybe_unused]] CallArgs& a)

TEST(defined) { return !v.is_undefined(); }
TEST(undefined) { return v.is_undefined(); }
TEST(none) { return v.is_none(); }
TEST(boolean) { return v.is_bool(); }
TEST(false) { return v.is_bool() && !v.as_bool(); }
TEST(true) { return v.is_bool() && v.as_bool(); }
TEST(integer) { return v.is_int(); }
TEST(float) { return v.is_float(); }
TEST(number) { return v.is_number(); }
TEST(string) { return v.is_string(); }
TEST(mapping) { return v.is_dict() && !v.dict()->is_namespace; }
TEST(iterable) { return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.dict()->is_namespace); }
TEST(sequence) { return v.is_string() || (v.is_list() && !v.list()->is_generator) || (v.is_dict() && !v.dict()->is_namespace); }
TEST(callable) { return v.is_func(); }
TEST(sameas) { return sameas(v, arg0(a, "sameas")); }
TEST(escaped) { return false; }
TEST(lower) { return v.is_string() ? py_is(v.str(), "islower") : py_is(py_str(v), "islower"); }
TEST(upper) { return v.is_string() ? py_is(v.str(), "isupper") : py_is(py_str(v), "isupper"); }
TEST(odd) {
  if (v.is_int() || v.is_bool()) return (v.is_int() ? v.as_int() : v.as_bool()) % 2 != 0;
  return std::fmod(as_num(v, "odd"), 2.0) != 0;
}
TEST(even) {
  if (v.is_int() || v.is_bool()) return (v.is_int() ? v.as_int() : v.as_bool()) % 2 == 0;
  return std::fmod(as_num(v, "even"), 2.0) == 0;
}
TEST(divisibleby) {
  Value r = binary_op("%", v, arg0(a, "divisibleby"));
  return py_equal(r, Value(int64_t{0}));
}
TEST(eq) { return py_equal(v, arg0(a, "eq")); }
TEST(ne) { return !py_equal(v, arg0(a, "ne")); }
TEST(lt) { return py_less(v, arg0(a, "lt")); }
TEST(le) { return py_less(v, arg0(a, "le")) || py_equal(v, a.pos[0]); }
TEST(gt) { return py_less(arg0(a, "gt"), v); }
TEST(ge) { return py_less(arg0(a, "ge"), v) || py_equal(v, a.pos[0]); }
TEST(in) { return contains(arg0(a, "in"), v); }
TEST(filter) { return v.is_string() && has_filter(v.str()); }
TEST(test) { return v.is_string() && has_test(v.str()); }

const std::unordered_map<std::string, TestFn>& registry() {
  static const std::unordered_map<std::string, TestFn> r = {
      {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none}, {"boolean", t_boolean},
      {"false", t_false}, {"true", t_true}, {"integer", t_integer}, {"float", t_float}, {"number", t_number},
      {"string", t_string}, {"mapping", t_mapping}, {"iterable", t_iterable}, {"sequence", t_sequence},
      {"callable", t_callable}, {"sameas", t_sameas}, {"escaped", t_escaped}, {"lower", t_lower},
      {"upper", t_upper}, {"odd", t_odd}, {"even", t_even}, {"divisibleby", t_divisibleby},
      {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq}, {"ne", t_ne}, {"!=", t_ne}, {"lt", t_lt},
      {"lessthan", t_lt}, {"<", t_lt}, {"le", t_le}, {"<=", t_le}, {"gt", t_gt}, {"greaterthan", t_gt},
      {">", t_gt}, {"ge", t_ge}, {">=", t_ge}, {"in", t_in}, {"filter", t_filter}, {"test", t_test},
  };
  return r;
}

}  // namespace

bool has_test(const std::string& name) { return registry().count(name) > 0; }

bool apply_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& args) {
  auto it = registry().find(name);
  if (it == registry().end()) fail("no test named '" + name + "'");
  return it->second(in, v, args);
}

}  // namespace vireo::tmpl
