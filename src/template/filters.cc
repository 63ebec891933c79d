// jinja2's built-in filters (plus transformers' tojson), with jinja2's argument names and defaults.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "template/interpreter.h"
#include "template/parser.h"
#include "template/py_format.h"
#include "template/py_string.h"

namespace vireo::tmpl {

namespace {

const Value* arg(CallArgs& a, size_t i, const char* name) { return a.get(i, name); }

bool arg_bool(CallArgs& a, size_t i, const char* name, bool dflt) {
  const Value* v = arg(a, i, name);
  return v ? truthy(*v) : dflt;
}

int64_t arg_int(CallArgs& a, size_t i, const char* name, int64_t dflt) {
  const Value* v = arg(a, i, name);
  if (!v || v->is_none()) return dflt;
  if (v->is_int()) return v->as_int();
  if (v->is_bool()) return v->as_bool();
  if (v->is_float()) return static_cast<int64_t>(v->as_float());
  fail("filter argument '" + std::string(name) + "' must be an integer");
}

std::string arg_str(CallArgs& a, size_t i, const char* name, const std::string& dflt) {
  const Value* v = arg(a, i, name);
  return v && !v->is_none() ? py_str(*v) : dflt;
}

int64_t length(const Value& v) {
  if (v.is_undefined()) return 0;
  if (v.is_string()) return static_cast<int64_t>(utf8_length(v.str()));
  if (v.is_list() && !v.list()->is_generator) return static_cast<int64_t>(v.list()->items.size());
  if (v.is_dict() && !v.dict()->is_namespace) return static_cast<int64_t>(v.dict()->items.size());
  fail("object of type '" + type_name(v) + "' has no len()");
}

// jinja2's make_attrgetter: "a.b.0" walks item lookups; `lower` lowercases strings for sorting.
Value attr_path(Interpreter& in, const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    cur = in.getitem(cur, digits ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(py_lower(v.str()));
  return v;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

bool parse_py_int(std::string s, int base, int64_t* out) {
  s = py_strip(s, std::nullopt, true, true);
  std::string t;
  for (char c : s)
    if (c != '_') t += c;
  if (t.empty()) return false;
  size_t i = 0;
  bool neg = false;
  if (t[0] == '+' || t[0] == '-') {
    neg = t[0] == '-';
    i = 1;
  }
  if (t.size() > i + 1 && t[i] == '0') {
    char p = t[i + 1] | 0x20;
    int pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (pb && (base == 0 || base == pb)) {
      base = pb;
      i += 2;
    }
  }
  if (base == 0) base = 10;
  if (i >= t.size()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str() + i, &end, base);
  if (*end != '\0' || errno == ERANGE || t[i] == '-' || t[i] == '+' || std::isspace(static_cast<unsigned char>(t[i]))) return false;
  *out = neg ? -v : v;
  return true;
}

bool parse_py_float(const std::string& s, double* out) {
  std::string t = py_strip(s, std::nullopt, true, true);
  std::string u;
  for (char c : t)
    if (c != '_') u += c;
  if (u.empty()) return false;
  std::string low = py_lower(u);
  if (low == "inf" || low == "+inf" || low == "infinity" || low == "+infinity") { *out = INFINITY; return true; }
  if (low == "-inf" || low == "-infinity") { *out = -INFINITY; return true; }
  if (low == "nan" || low == "+nan" || low == "-nan") { *out = NAN; return true; }
  for (char c : u)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) return false;
  char* end = nullptr;
  *out = std::strtod(u.c_str(), &end);
  return *end == '\0';
}

Value do_round(const Value& v, int64_t precision, const std::string& method) {
  if (!v.is_number()) fail("round: must be real number, not " + type_name(v));
  double d = v.is_float() ? v.as_float() : static_cast<double>(v.is_bool() ? v.as_bool() : v.as_int());
  if (method == "common") {
    if (!v.is_float()) return Value(static_cast<int64_t>(d));  // round(int, n) stays an int
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::clamp<int64_t>(precision, 0, 300)), d);
    return Value(std::strtod(buf, nullptr));
  }
  double f = std::pow(10.0, static_cast<double>(precision));
  if (method == "ceil") return Value(std::ceil(d * f) / f);
  if (method == "floor") return Value(std::floor(d * f) / f);
  fail("method must be common, ceil or floor");
}

std::string do_indent(std::string s, const Value* width, bool first, bool blank) {
  std::string ind = width && width->is_string() ? width->str() : std::string(width ? static_cast<size_t>(std::max<int64_t>(0, width->is_int() ? width->as_int() : 4)) : 4, ' ');
  s += "\n";
  std::vector<std::string> lines = py_splitlines(s);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : ind + lines[i]);
  }
  if (first) rv = ind + rv;
  return rv;
}

Value do_tojson(const Value& v, CallArgs& a) {
  JsonDumpOptions o;
  o.ensure_ascii = arg_bool(a, 0, "ensure_ascii", false);
  if (const Value* ind = arg(a, 1, "indent"); ind && !ind->is_none()) {
    if (ind->is_string()) {
      o.indent_is_str = true;
      o.indent_str = ind->str();
    } else {
      o.indent = static_cast<int>(std::max<int64_t>(0, arg_int(a, 1, "indent", 0)));
    }
  }
  if (const Value* sep = arg(a, 2, "separators"); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->list()->items.size() != 2) fail("tojson: separators must be a pair of strings");
    o.item_sep = py_str(sep->list()->items[0]);
    o.key_sep = py_str(sep->list()->items[1]);
    o.separators_given = true;
  }
  o.sort_keys = arg_bool(a, 3, "sort_keys", false);
  return Value(json_dumps(v, o));
}

std::vector<Value> select_items(Interpreter& in, const Value& seq, CallArgs& a, bool by_attr, bool keep) {
  std::vector<Value> out;
  size_t first_test_arg = by_attr ? 1 : 0;
  std::string attr = by_attr ? arg_str(a, 0, "attr", "") : "";
  std::string test = a.pos.size() > first_test_arg ? py_str(a.pos[first_test_arg]) : "";
  CallArgs targs;
  for (size_t i = first_test_arg + 1; i < a.pos.size(); ++i) targs.pos.push_back(a.pos[i]);
  for (const Value& item : in.iterate(seq)) {
    Value v = by_attr ? attr_path(in, item, attr) : item;
    bool r = test.empty() ? truthy(v) : apply_test(in, test, v, targs);
    if (r == keep) out.push_back(item);
  }
  return out;
}

using FilterFn = Value (*)(Interpreter&, Value&, CallArgs&);

#define FILTER(name) Value f_##name(Interpreter& in, Value& v, CallArgs& a)

FILTER(abs) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_bool()) return Value(static_cast<int64_t>(v.as_bool()));
  if (v.is_int()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  fail("bad operand type for abs(): '" + type_name(v) + "'");
}
FILTER(attr) {
  std::string name = arg_str(a, 0, "name", "");
  if (v.is_dict() && v.dict()->is_namespace) return in.getattr(v, name);
  if (v.is_undefined()) fail_undefined(v);
  return get_method(v, name);
}
FILTER(batch) {
  int64_t n = arg_int(a, 0, "linecount", 1);
  if (n <= 0) fail("batch: linecount must be positive");
  const Value* fill = arg(a, 1, "fill_with");
  std::vector<Value> out, cur;
  for (const Value& x : in.iterate(v)) {
    cur.push_back(x);
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(make_list(std::move(cur)));
      cur = {};
    }
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none())
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*fill);
    out.push_back(make_list(std::move(cur)));
  }
  return make_generator(std::move(out));
}
FILTER(capitalize) { return Value(py_capitalize(py_str(v))); }
FILTER(center) {
  CallArgs ca;
  ca.pos.push_back(Value(arg_int(a, 0, "width", 80)));
  Value m = get_method(Value(py_str(v)), "center");
  return in.call(m, ca);
}
FILTER(length) { return Value(length(v)); }
FILTER(default) {
  const Value* d = arg(a, 0, "default_value");
  bool boolean = arg_bool(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !truthy(v))) return d ? *d : Value("");
  return v;
}
FILTER(dictsort) {
  if (!v.is_dict()) fail("dictsort: can only sort a mapping");
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  std::string by = arg_str(a, 1, "by", "key");
  bool rev = arg_bool(a, 2, "reverse", false);
  int pos = by == "key" ? 0 : by == "value" ? 1 : -1;
  if (pos < 0) fail("You can only sort by either \"key\" or \"value\"");
  std::vector<std::pair<Value, Value>> items = v.dict()->items;
  std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
    Value kx = sort_key(pos == 0 ? x.first : x.second, cs), ky = sort_key(pos == 0 ? y.first : y.second, cs);
    return rev ? py_less(ky, kx) : py_less(kx, ky);
  });
  std::vector<Value> out;
  for (auto& [k, x] : items) out.push_back(make_list({k, x}, true));
  return make_list(std::move(out));
}
FILTER(escape) { return Value(html_escape(py_str(v))); }
FILTER(first) {
  std::vector<Value> items = in.iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}
FILTER(last) {
  if (v.is_list() && v.list()->is_generator) fail("'generator' object is not reversible");
  std::vector<Value> items = in.iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}
FILTER(float) {
  double d;
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_float()) return v;
  if (v.is_int()) return Value(static_cast<double>(v.as_int()));
  if (v.is_bool()) return Value(v.as_bool() ? 1.0 : 0.0);
  if (v.is_string() && parse_py_float(v.str(), &d)) return Value(d);
  const Value* dflt = arg(a, 0, "default");
  return dflt ? *dflt : Value(0.0);
}
FILTER(format) {
  std::string fmt = py_str(v);
  if (!a.kw.empty()) fail("format filter with keyword arguments is not supported");
  return Value(percent_format(fmt, a.pos));
}
FILTER(indent) {
  return Value(do_indent(py_str(v), arg(a, 0, "width"), arg_bool(a, 1, "first", false), arg_bool(a, 2, "blank", false)));
}
FILTER(int) {
  if (v.is_undefined()) fail_undefined(v);
  int64_t base = arg_int(a, 1, "base", 10);
  int64_t r;
  if (v.is_int()) return v;
  if (v.is_bool()) return Value(static_cast<int64_t>(v.as_bool()));
  if (v.is_float() && std::isfinite(v.as_float())) return Value(static_cast<int64_t>(v.as_float()));
  if (v.is_string()) {
    if (parse_py_int(v.str(), static_cast<int>(base), &r)) return Value(r);
    double d;
    if (parse_py_float(v.str(), &d) && std::isfinite(d)) return Value(static_cast<int64_t>(d));
  }
  const Value* dflt = arg(a, 0, "default");
  return dflt ? *dflt : Value(int64_t{0});
}
FILTER(items) {
  if (v.is_undefined()) return make_list();
  if (!v.is_dict() || v.dict()->is_namespace) fail("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict()->items) out.push_back(make_list({k, x}, true));
  return make_generator(std::move(out));
}
FILTER(join) {
  std::string sep = arg_str(a, 0, "d", "");
  const Value* attr = arg(a, 1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& x : in.iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += py_str(attr && !attr->is_none() ? attr_path(in, x, py_str(*attr)) : x);
  }
  return Value(out);
}
FILTER(list) { return make_list(in.iterate(v)); }
FILTER(lower) { return Value(py_lower(py_str(v))); }
FILTER(upper) { return Value(py_upper(py_str(v))); }
FILTER(title) {
  // jinja2's do_title: capitalize each chunk split at whitespace and -([{<.
  std::u32string u = utf8_decode(py_str(v));
  std::string out;
  bool start = true;
  for (char32_t c : u) {
    bool sep = py_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    std::string ch = utf8_encode(std::u32string(1, c));
    out += sep ? ch : start ? py_upper(ch) : py_lower(ch);
    start = sep;
  }
  return Value(out);
}
FILTER(map) {
  std::vector<Value> out;
  const Value* attr = a.kwarg("attribute");
  if (attr) {
    const Value* dflt = a.kwarg("default");
    for (const Value& x : in.iterate(v)) {
      Value r = attr_path(in, x, py_str(*attr));
      out.push_back(r.is_undefined() && dflt ? *dflt : r);
    }
    return make_generator(std::move(out));
  }
  if (a.pos.empty()) fail("map requires a filter argument");
  std::string name = py_str(a.pos[0]);
  if (!has_filter(name)) fail("no filter named '" + name + "'");
  CallArgs fa;
  fa.pos.assign(a.pos.begin() + 1, a.pos.end());
  fa.kw = a.kw;
  for (const Value& x : in.iterate(v)) {
    CallArgs c = fa;
    out.push_back(apply_filter(in, name, x, c));
  }
  return make_generator(std::move(out));
}
Value minmax(Interpreter& in, Value& v, CallArgs& a, bool want_max) {
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  const Value* attr = arg(a, 1, "attribute");
  std::vector<Value> items = in.iterate(v);
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  auto key = [&](const Value& x) { return sort_key(attr && !attr->is_none() ? attr_path(in, x, py_str(*attr)) : x, cs); };
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    bool better = want_max ? py_less(key(items[best]), key(items[i])) : py_less(key(items[i]), key(items[best]));
    if (better) best = i;
  }
  return items[best];
}
FILTER(max) { return minmax(in, v, a, true); }
FILTER(min) { return minmax(in, v, a, false); }
FILTER(select) { return make_generator(select_items(in, v, a, false, true)); }
FILTER(reject) { return make_generator(select_items(in, v, a, false, false)); }
FILTER(selectattr) { return make_generator(select_items(in, v, a, true, true)); }
FILTER(rejectattr) { return make_generator(select_items(in, v, a, true, false)); }
FILTER(replace) {
  const Value* cnt = arg(a, 2, "count");
  return Value(py_replace(py_str(v), arg_str(a, 0, "old", ""), arg_str(a, 1, "new", ""),
                          cnt && !cnt->is_none() ? arg_int(a, 2, "count", -1) : -1));
}
FILTER(reverse) {
  if (v.is_string()) {
    std::u32string u = utf8_decode(v.str());
    std::reverse(u.begin(), u.end());
    return Value(utf8_encode(u));
  }
  std::vector<Value> items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  // reversed(list) is a lazy iterator; a generator input is materialized into a list first.
  return (v.is_list() && !v.list()->is_generator) ? make_generator(std::move(items)) : make_list(std::move(items));
}
FILTER(round) { return do_round(v, arg_int(a, 0, "precision", 0), arg_str(a, 1, "method", "common")); }
FILTER(safe) { return Value(py_str(v)); }
FILTER(sort) {
  bool rev = arg_bool(a, 0, "reverse", false);
  bool cs = arg_bool(a, 1, "case_sensitive", false);
  const Value* attr = arg(a, 2, "attribute");
  std::vector<Value> items = in.iterate(v);
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& x : items) keyed.emplace_back(sort_key(attr && !attr->is_none() ? attr_path(in, x, py_str(*attr)) : x, cs), x);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return rev ? py_less(y.first, x.first) : py_less(x.first, y.first);
  });
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(kv.second);
  return make_list(std::move(out));
}
FILTER(string) { return Value(py_str(v)); }
FILTER(sum) {
  const Value* attr = arg(a, 0, "attribute");
  const Value* start = arg(a, 1, "start");
  Value total = start ? *start : Value(int64_t{0});
  for (const Value& x : in.iterate(v)) total = binary_op("+", total, attr && !attr->is_none() ? attr_path(in, x, py_str(*attr)) : x);
  return total;
}
FILTER(tojson) { return do_tojson(v, a); }
FILTER(trim) {
  const Value* chars = arg(a, 0, "chars");
  return Value(py_strip(py_str(v), chars && !chars->is_none() ? std::optional<std::string>(py_str(*chars)) : std::nullopt, true, true));
}
FILTER(truncate) {
  int64_t len = arg_int(a, 0, "length", 255);
  if (!v.is_string()) {  // jinja2 takes len() of anything and returns short values untouched
    if (length(v) <= len + arg_int(a, 3, "leeway", 5)) return v;
    fail("truncate: object of type '" + type_name(v) + "' is not a string");
  }
  std::string s = py_str(v);
  bool killwords = arg_bool(a, 1, "killwords", false);
  std::string end = arg_str(a, 2, "end", "...");
  int64_t leeway = arg_int(a, 3, "leeway", 5);
  std::u32string u = utf8_decode(s);
  int64_t n_end = static_cast<int64_t>(utf8_length(end));
  if (len < n_end) fail("expected length >= " + std::to_string(n_end) + ", got " + std::to_string(len));
  if (static_cast<int64_t>(u.size()) <= len + leeway) return Value(s);
  std::string head = utf8_encode(u.substr(0, len - n_end));
  if (killwords) return Value(head + end);
  size_t sp = head.rfind(' ');
  return Value((sp == std::string::npos ? head : head.substr(0, sp)) + end);
}
FILTER(unique) {
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  const Value* attr = arg(a, 1, "attribute");
  std::vector<Value> out, seen;
  for (const Value& x : in.iterate(v)) {
    Value k = sort_key(attr && !attr->is_none() ? attr_path(in, x, py_str(*attr)) : x, cs);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equal(s, k); })) continue;
    seen.push_back(k);
    out.push_back(x);
  }
  return make_generator(std::move(out));
}
FILTER(wordcount) {
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(py_str(v))) {
    bool w = (c < 0x80 && (std::isalnum(static_cast<int>(c)) || c == '_')) || (c >= 0x80 && !py_isspace(c) && !(c >= 0x2000 && c <= 0x206f) && !(c >= 0x3000 && c <= 0x303f));
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

const std::unordered_map<std::string, FilterFn>& registry() {
  static const std::unordered_map<std::string, FilterFn> r = {
      {"abs", f_abs}, {"attr", f_attr}, {"batch", f_batch}, {"capitalize", f_capitalize}, {"center", f_center},
      {"count", f_length}, {"length", f_length}, {"d", f_default}, {"default", f_default},
      {"dictsort", f_dictsort}, {"e", f_escape}, {"escape", f_escape}, {"forceescape", f_escape},
      {"first", f_first}, {"last", f_last}, {"float", f_float}, {"format", f_format}, {"indent", f_indent},
      {"int", f_int}, {"items", f_items}, {"join", f_join}, {"list", f_list}, {"lower", f_lower},
      {"upper", f_upper}, {"title", f_title}, {"map", f_map}, {"max", f_max}, {"min", f_min},
      {"select", f_select}, {"reject", f_reject}, {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr},
      {"replace", f_replace}, {"reverse", f_reverse}, {"round", f_round}, {"safe", f_safe}, {"sort", f_sort},
      {"string", f_string}, {"sum", f_sum}, {"tojson", f_tojson}, {"trim", f_trim}, {"truncate", f_truncate},
      {"unique", f_unique}, {"wordcount", f_wordcount},
  };
  return r;
}

}  // namespace

bool has_filter(const std::string& name) { return registry().count(name) > 0; }

Value apply_filter(Interpreter& in, const std::string& name, Value v, CallArgs& args) {
  auto it = registry().find(name);
  if (it == registry().end()) fail("no filter named '" + name + "'");
  in.step();
  return it->second(in, v, args);
}

}  // namespace vireo::tmpl
