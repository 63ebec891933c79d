#include "template/value.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "template/py_format.h"

namespace vireo::tmpl {

void fail(const std::string& msg) { throw vireo::Error("chat template: " + msg); }

void fail_undefined(const Value& v) {
  const std::string& hint = v.is_undefined() ? v.undefined_hint() : std::string();
  fail(hint.empty() ? std::string("undefined value used") : hint);
}

const Value* DictObj::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (py_equal(k, key)) return &v;
  return nullptr;
}

Value* DictObj::find(const Value& key) {
  for (auto& [k, v] : items)
    if (py_equal(k, key)) return &v;
  return nullptr;
}

const Value* DictObj::find_str(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

void DictObj::set(Value key, Value value) {
  if (Value* slot = find(key)) {
    *slot = std::move(value);
    return;
  }
  items.emplace_back(std::move(key), std::move(value));
}

const Value* CallArgs::kwarg(const std::string& name) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

const Value* CallArgs::get(size_t i, const std::string& name) const {
  if (i < pos.size()) return &pos[i];
  return kwarg(name);
}

Value make_list(std::vector<Value> items, bool is_tuple) {
  auto l = std::make_shared<ListObj>();
  l->items = std::move(items);
  l->is_tuple = is_tuple;
  return Value(l);
}

Value make_generator(std::vector<Value> items) {
  Value v = make_list(std::move(items));
  v.list()->is_generator = true;
  return v;
}

Value make_dict() { return Value(std::make_shared<DictObj>()); }

Value make_func(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn) {
  auto f = std::make_shared<FuncObj>();
  f->name = std::move(name);
  f->fn = std::move(fn);
  return Value(f);
}

std::string type_name(const Value& v) {
  switch (v.v.index()) {
    case 0: return "Undefined";
    case 1: return "NoneType";
    case 2: return "bool";
    case 3: return "int";
    case 4: return "float";
    case 5: return "str";
    case 6: return v.list()->is_generator ? "generator" : v.list()->view_name ? v.list()->view_name : v.list()->is_tuple ? "tuple" : "list";
    case 7: return v.dict()->is_namespace ? "Namespace" : "dict";
    default: return "function";
  }
}

bool truthy(const Value& v) {
  switch (v.v.index()) {
    case 0:
    case 1: return false;
    case 2: return v.as_bool();
    case 3: return v.as_int() != 0;
    case 4: return v.as_float() != 0.0;
    case 5: return !v.str().empty();
    case 6: return v.list()->is_generator || !v.list()->items.empty();
    case 7: return v.dict()->is_namespace || !v.dict()->items.empty();
    default: return true;
  }
}

static double num(const Value& v) {
  if (v.is_bool()) return v.as_bool() ? 1 : 0;
  if (v.is_int()) return static_cast<double>(v.as_int());
  return v.as_float();
}

bool py_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (!a.is_float() && !b.is_float()) {
      int64_t x = a.is_bool() ? a.as_bool() : a.as_int();
      int64_t y = b.is_bool() ? b.as_bool() : b.as_int();
      return x == y;
    }
    return num(a) == num(b);
  }
  if (a.v.index() != b.v.index()) return false;
  switch (a.v.index()) {
    case 0: return true;  // Undefined == Undefined
    case 1: return true;
    case 5: return a.str() == b.str();
    case 6: {
      const auto& x = a.list()->items;
      const auto& y = b.list()->items;
      if (a.list() == b.list()) return true;
      if (a.list()->is_generator || b.list()->is_generator) return false;
      if (a.list()->is_tuple != b.list()->is_tuple || x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!py_equal(x[i], y[i])) return false;
      return true;
    }
    case 7: {
      if (a.dict() == b.dict()) return true;
      if (a.dict()->is_namespace || b.dict()->is_namespace) return false;
      const auto& x = a.dict()->items;
      if (x.size() != b.dict()->items.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* o = b.dict()->find(k);
        if (!o || !py_equal(v, *o)) return false;
      }
      return true;
    }
    default: return a.func() == b.func();
  }
}

bool py_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return num(a) < num(b);
    int64_t x = a.is_bool() ? a.as_bool() : a.as_int();
    int64_t y = b.is_bool() ? b.as_bool() : b.as_int();
    return x < y;
  }
  if (a.is_undefined() || b.is_undefined()) fail_undefined(a.is_undefined() ? a : b);
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order == code point order
  if (a.is_list() && b.is_list() && a.list()->is_tuple == b.list()->is_tuple && !a.list()->is_generator &&
      !b.list()->is_generator) {
    const auto& x = a.list()->items;
    const auto& y = b.list()->items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (py_equal(x[i], y[i])) continue;
      return py_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  fail("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

static std::string int_str(int64_t i) { return std::to_string(i); }

std::string py_repr(const Value& v) {
  switch (v.v.index()) {
    case 0: return "Undefined";
    case 5: return str_repr(v.str());
    default: return py_str(v);
  }
}

std::string py_str(const Value& v) {
  switch (v.v.index()) {
    case 0: return "";
    case 1: return "None";
    case 2: return v.as_bool() ? "True" : "False";
    case 3: return int_str(v.as_int());
    case 4: return float_repr(v.as_float());
    case 5: return v.str();
    case 6: {
      const auto& l = *v.list();
      if (l.is_generator) return "<generator object>";
      if (l.view_name) {
        ListObj plain = l;
        plain.view_name = nullptr;
        return std::string(l.view_name) + "(" + py_str(Value(std::make_shared<ListObj>(std::move(plain)))) + ")";
      }
      std::string out = l.is_tuple ? "(" : "[";
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += ", ";
        out += py_repr(l.items[i]);
      }
      if (l.is_tuple && l.items.size() == 1) out += ",";
      out += l.is_tuple ? ")" : "]";
      return out;
    }
    case 7: {
      const auto& d = *v.dict();
      std::string out = d.is_namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, x] : d.items) {
        if (!first) out += ", ";
        first = false;
        out += py_repr(k) + ": " + py_repr(x);
      }
      out += d.is_namespace ? "}>" : "}";
      return out;
    }
    default: return "<built-in function " + v.func()->name + ">";
  }
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value(None{});
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return make_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = std::make_shared<DictObj>();
      for (auto it = j.begin(); it != j.end(); ++it) d->items.emplace_back(Value(it.key()), from_json(it.value()));
      return Value(d);
    }
    default: return Value(None{});
  }
}

static std::string json_key(const Value& k, const JsonDumpOptions& o) {
  if (k.is_string()) return json_quote(k.str(), o.ensure_ascii);
  if (k.is_bool()) return k.as_bool() ? "\"true\"" : "\"false\"";
  if (k.is_none()) return "\"null\"";
  if (k.is_int()) return "\"" + int_str(k.as_int()) + "\"";
  if (k.is_float()) return "\"" + float_repr(k.as_float()) + "\"";
  fail("keys must be str, int, float, bool or None, not " + type_name(k));
}

static void dump(const Value& v, const JsonDumpOptions& o, int depth, std::string& out) {
  if (depth > 512) fail("tojson: nesting too deep");
  bool pretty = o.indent >= 0 || o.indent_is_str;
  auto newline = [&](int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += o.indent_is_str ? o.indent_str : std::string(o.indent, ' ');
  };
  switch (v.v.index()) {
    case 1: out += "null"; return;
    case 2: out += v.as_bool() ? "true" : "false"; return;
    case 3: out += int_str(v.as_int()); return;
    case 4: {
      double d = v.as_float();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d < 0 ? "-Infinity" : "Infinity";
      else out += float_repr(d);
      return;
    }
    case 5: out += json_quote(v.str(), o.ensure_ascii); return;
    case 6: {
      if (v.list()->is_generator || v.list()->view_name) break;
      const auto& items = v.list()->items;
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += o.item_sep;
        if (pretty) newline(depth + 1);
        dump(items[i], o, depth + 1, out);
      }
      if (pretty) newline(depth);
      out += ']';
      return;
    }
    case 7: {
      if (v.dict()->is_namespace) break;
      std::vector<const std::pair<Value, Value>*> items;
      for (const auto& kv : v.dict()->items) items.push_back(&kv);
      if (items.empty()) {
        out += "{}";
        return;
      }
      if (o.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return py_less(a->first, b->first); });
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += o.item_sep;
        if (pretty) newline(depth + 1);
        out += json_key(items[i]->first, o);
        out += o.key_sep;
        dump(items[i]->second, o, depth + 1, out);
      }
      if (pretty) newline(depth);
      out += '}';
      return;
    }
    default: break;
  }
  fail("Object of type " + type_name(v) + " is not JSON serializable");
}

std::string json_dumps(const Value& v, const JsonDumpOptions& opts) {
  JsonDumpOptions o = opts;
  if (!o.separators_given && (o.indent >= 0 || o.indent_is_str)) o.item_sep = ",";
  std::string out;
  dump(v, o, 0, out);
  return out;
}

}  // namespace vireo::tmpl
