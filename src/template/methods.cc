// Python methods reachable from templates: str, dict and list methods, as jinja2's immutable
// sandbox allows them (mutating list/dict methods raise a SecurityError-like error when called).
#include <algorithm>
#include <set>

#include "template/interpreter.h"
#include "template/py_format.h"
#include "template/py_string.h"

namespace vireo::tmpl {

namespace {

using Fn = std::function<Value(Interpreter&, CallArgs&)>;

std::optional<std::string> opt_str(const Value* v, const char* fname) {
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) fail(std::string(fname) + " arg must be None or str");
  return v->str();
}

int64_t opt_int(const Value* v, int64_t dflt) {
  if (!v || v->is_none()) return dflt;
  if (v->is_int()) return v->as_int();
  if (v->is_bool()) return v->as_bool();
  fail("'" + type_name(*v) + "' object cannot be interpreted as an integer");
}

const std::string& need_str(const Value* v, const char* fname) {
  if (!v) fail(std::string(fname) + "() missing required argument");
  if (!v->is_string()) fail(std::string(fname) + "() argument must be str, not " + type_name(*v));
  return v->str();
}

Value str_list(const std::vector<std::string>& parts) {
  std::vector<Value> out;
  for (const auto& p : parts) out.push_back(Value(p));
  return make_list(std::move(out));
}

std::string pad(const std::string& s, int64_t width, const std::string& fill, int align) {
  int64_t n = static_cast<int64_t>(utf8_length(s));
  if (width <= n) return s;
  int64_t total = width - n, left = align < 0 ? 0 : align > 0 ? total : total / 2 + (total & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return out;
}

// str.format with auto/explicit positional fields and named fields; specs support fill, align,
// width, precision and the s/d/f/e/g/x types.
std::string str_format(const std::string& fmt, CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}' ) {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t e = fmt.find('}', i);
    if (e == std::string::npos) fail("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, e - i - 1);
    i = e;
    std::string spec;
    size_t colon = field.find(':');
    if (colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    bool conv_repr = false;
    if (field.size() >= 2 && field[field.size() - 2] == '!') {
      conv_repr = field.back() == 'r';
      field.resize(field.size() - 2);
    }
    const Value* v;
    if (field.empty()) {
      if (auto_idx >= a.pos.size()) fail("Replacement index " + std::to_string(auto_idx) + " out of range");
      v = &a.pos[auto_idx++];
    } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
      size_t k = std::stoul(field);
      if (k >= a.pos.size()) fail("Replacement index " + field + " out of range");
      v = &a.pos[k];
    } else {
      v = a.kwarg(field);
      if (!v) fail("KeyError: '" + field + "'");
    }
    if (spec.empty()) {
      out += conv_repr ? py_repr(*v) : py_str(*v);
      continue;
    }
    // [[fill]align][0][width][.precision][type]
    std::string fill = " ";
    int align = v->is_number() ? 1 : -1;
    size_t p = 0;
    std::u32string us = utf8_decode(spec);
    auto align_of = [](char32_t ch) { return ch == '<' ? -1 : ch == '>' ? 1 : ch == '^' ? 0 : 2; };
    if (us.size() >= 2 && align_of(us[1]) != 2) {
      fill = utf8_encode(us.substr(0, 1));
      align = align_of(us[1]);
      p = 2;
    } else if (!us.empty() && align_of(us[0]) != 2) {
      align = align_of(us[0]);
      p = 1;
    }
    std::string rest = utf8_encode(us.substr(p));
    size_t q = 0;
    if (q < rest.size() && rest[q] == '0') {
      fill = "0";
      align = 1;
      ++q;
    }
    int64_t width = 0;
    while (q < rest.size() && std::isdigit(static_cast<unsigned char>(rest[q]))) width = width * 10 + (rest[q++] - '0');
    int prec = -1;
    if (q < rest.size() && rest[q] == '.') {
      prec = 0;
      ++q;
      while (q < rest.size() && std::isdigit(static_cast<unsigned char>(rest[q]))) prec = prec * 10 + (rest[q++] - '0');
    }
    char type = q < rest.size() ? rest[q] : 0;
    std::string body;
    if (type == 'f' || type == 'e' || type == 'g' || type == 'F' || type == 'E' || type == 'G' || type == '%') {
      std::string pf = "%." + std::to_string(prec < 0 ? 6 : prec) + (type == '%' ? 'f' : type);
      std::vector<Value> args{type == '%' ? Value(binary_op("*", *v, Value(100.0))) : *v};
      body = percent_format(pf, args) + (type == '%' ? "%" : "");
    } else if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b') {
      if (type == 'b') {
        int64_t n = v->is_bool() ? v->as_bool() : v->as_int();
        if (n == 0) body = "0";
        for (uint64_t u = n < 0 ? -n : n; u; u >>= 1) body.insert(body.begin(), char('0' + (u & 1)));
        if (n < 0) body = "-" + body;
      } else {
        body = percent_format(std::string("%") + type, {*v});
      }
    } else {
      body = py_str(*v);
      if (prec >= 0) body = utf8_encode(utf8_decode(body).substr(0, prec));
      if (prec >= 0 && v->is_float() && !type) body = percent_format("%." + std::to_string(prec) + "g", {*v});
    }
    out += pad(body, width, fill, align);
  }
  return out;
}

Value string_method(const std::string& s, const std::string& name) {
  auto m = [&](Fn fn) { return make_func(name, std::move(fn)); };
  if (name == "startswith" || name == "endswith") {
    bool starts = name == "startswith";
    return m([s, starts](Interpreter&, CallArgs& a) -> Value {
      if (a.pos.empty()) fail("startswith/endswith() takes at least 1 argument");
      std::vector<std::string> cands;
      if (a.pos[0].is_list() && a.pos[0].list()->is_tuple) {
        for (const auto& v : a.pos[0].list()->items) cands.push_back(need_str(&v, "startswith"));
      } else {
        cands.push_back(need_str(&a.pos[0], starts ? "startswith" : "endswith"));
      }
      for (const auto& c : cands) {
        if (c.size() > s.size()) continue;
        if (starts ? s.compare(0, c.size(), c) == 0 : s.compare(s.size() - c.size(), c.size(), c) == 0) return Value(true);
      }
      return Value(false);
    });
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool l = name != "rstrip", r = name != "lstrip";
    return m([s, l, r](Interpreter&, CallArgs& a) { return Value(py_strip(s, opt_str(a.get(0, "chars"), "strip"), l, r)); });
  }
  if (name == "split" || name == "rsplit") {
    bool rev = name == "rsplit";
    return m([s, rev](Interpreter&, CallArgs& a) {
      auto sep = opt_str(a.get(0, "sep"), "split");
      int64_t maxsplit = opt_int(a.get(1, "maxsplit"), -1);
      return str_list(rev ? py_rsplit(s, sep, maxsplit) : py_split(s, sep, maxsplit));
    });
  }
  if (name == "splitlines") return m([s](Interpreter&, CallArgs&) { return str_list(py_splitlines(s)); });
  if (name == "replace")
    return m([s](Interpreter&, CallArgs& a) {
      return Value(py_replace(s, need_str(a.get(0, "old"), "replace"), need_str(a.get(1, "new"), "replace"),
                              opt_int(a.get(2, "count"), -1)));
    });
  if (name == "upper") return m([s](Interpreter&, CallArgs&) { return Value(py_upper(s)); });
  if (name == "lower" || name == "casefold") return m([s](Interpreter&, CallArgs&) { return Value(py_lower(s)); });
  if (name == "title") return m([s](Interpreter&, CallArgs&) { return Value(py_title(s)); });
  if (name == "capitalize") return m([s](Interpreter&, CallArgs&) { return Value(py_capitalize(s)); });
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    bool rev = name[0] == 'r', raise = name.find("index") != std::string::npos;
    return m([s, rev, raise](Interpreter&, CallArgs& a) {
      int64_t r = py_find(s, need_str(a.get(0, "sub"), "find"), rev);
      if (r < 0 && raise) fail("substring not found");
      return Value(r);
    });
  }
  if (name == "count") return m([s](Interpreter&, CallArgs& a) { return Value(py_count(s, need_str(a.get(0, "x"), "count"))); });
  if (name == "format") return m([s](Interpreter&, CallArgs& a) { return Value(str_format(s, a)); });
  if (name == "join")
    return m([s](Interpreter& in, CallArgs& a) {
      if (a.pos.empty()) fail("join() takes exactly one argument");
      std::string out;
      bool first = true;
      for (const Value& v : in.iterate(a.pos[0])) {
        if (!v.is_string()) fail("sequence item: expected str instance, " + type_name(v) + " found");
        if (!first) out += s;
        first = false;
        out += v.str();
      }
      return Value(out);
    });
  static const std::set<std::string> preds = {"isdigit", "isalpha", "isalnum", "isspace", "isupper",
                                              "islower", "isdecimal", "isnumeric"};
  if (preds.count(name)) return m([s, name](Interpreter&, CallArgs&) { return Value(py_is(s, name.c_str())); });
  if (name == "zfill")
    return m([s](Interpreter&, CallArgs& a) {
      int64_t w = opt_int(a.get(0, "width"), 0);
      std::string body = s, sign;
      if (!body.empty() && (body[0] == '-' || body[0] == '+')) {
        sign = body.substr(0, 1);
        body = body.substr(1);
      }
      return Value(sign + pad(body, w - static_cast<int64_t>(sign.size()), "0", 1));
    });
  if (name == "center" || name == "ljust" || name == "rjust") {
    int align = name == "center" ? 0 : name == "ljust" ? -1 : 1;
    return m([s, align](Interpreter&, CallArgs& a) {
      const Value* f = a.get(1, "fillchar");
      std::string fill = f ? need_str(f, "fill") : " ";
      int64_t w = opt_int(a.get(0, "width"), 0);
      if (align == 0) {  // Python's center puts the extra pad on the left when width is odd
        int64_t n = static_cast<int64_t>(utf8_length(s));
        if (w <= n) return Value(s);
        int64_t marg = w - n, left = marg / 2 + (marg & w & 1);
        std::string out;
        for (int64_t i = 0; i < left; ++i) out += fill;
        out += s;
        for (int64_t i = 0; i < marg - left; ++i) out += fill;
        return Value(out);
      }
      return Value(pad(s, w, fill, align));
    });
  }
  if (name == "partition" || name == "rpartition") {
    bool rev = name[0] == 'r';
    return m([s, rev](Interpreter&, CallArgs& a) {
      const std::string& sep = need_str(a.get(0, "sep"), "partition");
      size_t f = rev ? s.rfind(sep) : s.find(sep);
      if (f == std::string::npos)
        return rev ? make_list({Value(""), Value(""), Value(s)}, true) : make_list({Value(s), Value(""), Value("")}, true);
      return make_list({Value(s.substr(0, f)), Value(sep), Value(s.substr(f + sep.size()))}, true);
    });
  }
  return Value::undefined();
}

Value unsafe(const std::string& type, const std::string& name) {
  return make_func(name, [type, name](Interpreter&, CallArgs&) -> Value {
    fail("access to attribute '" + name + "' of '" + type + "' object is unsafe.");
  });
}

Value dict_method(const DictPtr& d, const std::string& name) {
  auto m = [&](Fn fn) { return make_func(name, std::move(fn)); };
  if (name == "items")
    return m([d](Interpreter&, CallArgs&) {
      std::vector<Value> out;
      for (const auto& [k, v] : d->items) out.push_back(make_list({k, v}, true));
      Value r = make_list(std::move(out));
      r.list()->view_name = "dict_items";
      return r;
    });
  if (name == "keys" || name == "values") {
    bool keys = name == "keys";
    return m([d, keys](Interpreter&, CallArgs&) {
      std::vector<Value> out;
      for (const auto& [k, v] : d->items) out.push_back(keys ? k : v);
      Value r = make_list(std::move(out));
      r.list()->view_name = keys ? "dict_keys" : "dict_values";
      return r;
    });
  }
  if (name == "get")
    return m([d](Interpreter&, CallArgs& a) {
      if (a.pos.empty()) fail("get expected at least 1 argument, got 0");
      if (const Value* v = d->find(a.pos[0])) return *v;
      return a.pos.size() > 1 ? a.pos[1] : Value(None{});
    });
  if (name == "copy")
    return m([d](Interpreter&, CallArgs&) {
      auto c = std::make_shared<DictObj>(*d);
      c->is_namespace = false;
      return Value(c);
    });
  static const std::set<std::string> mut = {"pop", "popitem", "setdefault", "update", "clear"};
  if (mut.count(name)) return unsafe("dict", name);
  return Value::undefined();
}

Value list_method(const ListPtr& l, const std::string& name) {
  auto m = [&](Fn fn) { return make_func(name, std::move(fn)); };
  if (name == "index" || name == "count") {
    bool idx = name == "index";
    return m([l, idx](Interpreter&, CallArgs& a) -> Value {
      if (a.pos.empty()) fail("index/count takes exactly one argument");
      int64_t n = 0;
      for (size_t i = 0; i < l->items.size(); ++i) {
        if (!py_equal(l->items[i], a.pos[0])) continue;
        if (idx) return Value(static_cast<int64_t>(i));
        ++n;
      }
      if (idx) fail(py_repr(a.pos[0]) + " is not in list");
      return Value(n);
    });
  }
  if (name == "copy") return m([l](Interpreter&, CallArgs&) { return make_list(l->items, l->is_tuple); });
  static const std::set<std::string> mut = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};
  if (mut.count(name) && !l->is_tuple) return unsafe("list", name);
  return Value::undefined();
}

}  // namespace

Value get_method(const Value& obj, const std::string& name) {
  if (obj.is_string()) return string_method(obj.str(), name);
  if (obj.is_dict() && !obj.dict()->is_namespace) return dict_method(obj.dict(), name);
  if (obj.is_list()) return list_method(obj.list(), name);
  return Value::undefined();
}

}  // namespace vireo::tmpl
