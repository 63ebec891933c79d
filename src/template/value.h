// Runtime values of the Jinja interpreter, with Python semantics (what jinja2 gives templates).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace vireo::tmpl {

struct Value;
struct ListObj;
struct DictObj;
struct FuncObj;
class Interpreter;

// Jinja's default Undefined: renders empty, is falsy, iterates empty; most other uses raise.
struct Undefined {
  std::string hint;  // for error messages: "'x' is undefined"
};
struct None {};

using ListPtr = std::shared_ptr<ListObj>;
using DictPtr = std::shared_ptr<DictObj>;
using FuncPtr = std::shared_ptr<FuncObj>;

struct Value {
  std::variant<Undefined, None, bool, int64_t, double, std::string, ListPtr, DictPtr, FuncPtr> v;

  Value() = default;
  Value(None n) : v(n) {}
  Value(bool b) : v(b) {}
  Value(int64_t i) : v(i) {}
  Value(int i) : v(static_cast<int64_t>(i)) {}
  Value(double d) : v(d) {}
  Value(std::string s) : v(std::move(s)) {}
  Value(const char* s) : v(std::string(s)) {}
  Value(ListPtr l) : v(std::move(l)) {}
  Value(DictPtr d) : v(std::move(d)) {}
  Value(FuncPtr f) : v(std::move(f)) {}
  static Value undefined(std::string hint = {}) {
    Value r;
    r.v = Undefined{std::move(hint)};
    return r;
  }

  bool is_undefined() const { return std::holds_alternative<Undefined>(v); }
  bool is_none() const { return std::holds_alternative<None>(v); }
  bool is_bool() const { return std::holds_alternative<bool>(v); }
  bool is_int() const { return std::holds_alternative<int64_t>(v); }  // not bool
  bool is_float() const { return std::holds_alternative<double>(v); }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return std::holds_alternative<std::string>(v); }
  bool is_list() const { return std::holds_alternative<ListPtr>(v); }
  bool is_dict() const { return std::holds_alternative<DictPtr>(v); }
  bool is_func() const { return std::holds_alternative<FuncPtr>(v); }

  bool as_bool() const { return std::get<bool>(v); }
  int64_t as_int() const { return std::get<int64_t>(v); }
  double as_float() const { return std::get<double>(v); }
  const std::string& str() const { return std::get<std::string>(v); }
  const ListPtr& list() const { return std::get<ListPtr>(v); }
  const DictPtr& dict() const { return std::get<DictPtr>(v); }
  const FuncPtr& func() const { return std::get<FuncPtr>(v); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v).hint; }
};

struct ListObj {
  std::vector<Value> items;
  bool is_tuple = false;
  // Result of a lazy jinja2 filter (map, select, reject, unique, reverse, items...): always truthy,
  // has no len(), renders as "<generator object>", cannot be indexed.
  bool is_generator = false;
  // dict.items()/keys()/values() views: render as "dict_items([...])", cannot be indexed or dumped.
  const char* view_name = nullptr;
};

// Insertion-ordered like a Python dict. A namespace() object is a dict whose attributes can be set.
struct DictObj {
  std::vector<std::pair<Value, Value>> items;
  bool is_namespace = false;
  const Value* find(const Value& key) const;
  Value* find(const Value& key);
  const Value* find_str(const std::string& key) const;
  void set(Value key, Value value);
};

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  const Value* kwarg(const std::string& name) const;
  // Python-style binding: the i-th positional or the named keyword, else nullptr.
  const Value* get(size_t i, const std::string& name) const;
};

struct FuncObj {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> fn;
};

Value make_list(std::vector<Value> items = {}, bool is_tuple = false);
Value make_generator(std::vector<Value> items);
Value make_dict();
Value make_func(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn);

// Python type name for error messages: 'str', 'int', 'NoneType', ...
std::string type_name(const Value& v);

bool truthy(const Value& v);
bool py_equal(const Value& a, const Value& b);
// Python ordering (<); throws vireo::Error for unorderable types.
bool py_less(const Value& a, const Value& b);
// str(v) as Python would print it; undefined renders empty.
std::string py_str(const Value& v);
std::string py_repr(const Value& v);

Value from_json(const nlohmann::ordered_json& j);
// json.dumps(v, ensure_ascii, indent, separators, sort_keys) as transformers' tojson filter.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  int indent = -1;  // -1: None
  std::string indent_str;  // used when indent was given as a string
  bool indent_is_str = false;
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool separators_given = false;
  bool sort_keys = false;
};
std::string json_dumps(const Value& v, const JsonDumpOptions& opts);

// Throws vireo::Error("chat template: ...").
[[noreturn]] void fail(const std::string& msg);
// Raise jinja2's UndefinedError for a use of `v` that needs a value.
[[noreturn]] void fail_undefined(const Value& v);

}  // namespace vireo::tmpl
