// Python arithmetic, concatenation, membership and %-formatting on Values.
#include <cmath>
#include <cstdio>

#include "template/interpreter.h"
#include "template/py_format.h"

namespace vireo::tmpl {

namespace {

bool is_intlike(const Value& v) { return v.is_int() || v.is_bool(); }
int64_t to_i(const Value& v) { return v.is_bool() ? v.as_bool() : v.as_int(); }
double to_f(const Value& v) { return v.is_float() ? v.as_float() : static_cast<double>(to_i(v)); }

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (op == "+" && a.is_string()) fail("can only concatenate str (not \"" + type_name(b) + "\") to str");
  if (op == "+" && a.is_list()) fail("can only concatenate " + type_name(a) + " (not \"" + type_name(b) + "\") to " + type_name(a));
  fail("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

void float_divmod(double vx, double wx, double* floordiv, double* modulo) {
  if (wx == 0.0) fail("float division by zero");
  double mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod) {
    if ((wx < 0) != (mod < 0)) {
      mod += wx;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, wx);
  }
  double fd;
  if (div) {
    fd = std::floor(div);
    if (div - fd > 0.5) fd += 1.0;
  } else {
    fd = std::copysign(0.0, vx / wx);
  }
  *floordiv = fd;
  *modulo = mod;
}

Value repeat(const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    if (seq.str().size() * static_cast<uint64_t>(n) > Interpreter::kMaxOutput) fail("repeated string too large");
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value(out);
  }
  const auto& items = seq.list()->items;
  if (items.size() * static_cast<uint64_t>(n) > Interpreter::kMaxListSize) fail("repeated list too large");
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return make_list(std::move(out), seq.list()->is_tuple);
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(py_str(a) + py_str(b));
  bool nums = a.is_number() && b.is_number();
  bool ints = is_intlike(a) && is_intlike(b);
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (!__builtin_add_overflow(to_i(a), to_i(b), &r)) return Value(r);
      return Value(to_f(a) + to_f(b));
    }
    if (nums) return Value(to_f(a) + to_f(b));
    if (a.is_string() && b.is_string()) return Value(a.str() + b.str());
    if (a.is_list() && b.is_list() && a.list()->is_tuple == b.list()->is_tuple && !a.list()->is_generator &&
        !b.list()->is_generator) {
      std::vector<Value> out = a.list()->items;
      out.insert(out.end(), b.list()->items.begin(), b.list()->items.end());
      return make_list(std::move(out), a.list()->is_tuple);
    }
  } else if (op == "-") {
    if (ints) {
      int64_t r;
      if (!__builtin_sub_overflow(to_i(a), to_i(b), &r)) return Value(r);
      return Value(to_f(a) - to_f(b));
    }
    if (nums) return Value(to_f(a) - to_f(b));
  } else if (op == "*") {
    if (ints) {
      int64_t r;
      if (!__builtin_mul_overflow(to_i(a), to_i(b), &r)) return Value(r);
      return Value(to_f(a) * to_f(b));
    }
    if (nums) return Value(to_f(a) * to_f(b));
    auto seq = [](const Value& v) { return v.is_string() || (v.is_list() && !v.list()->is_generator); };
    if (seq(a) && is_intlike(b)) return repeat(a, to_i(b));
    if (seq(b) && is_intlike(a)) return repeat(b, to_i(a));
  } else if (op == "/") {
    if (nums) {
      if (to_f(b) == 0.0) fail("division by zero");
      return Value(to_f(a) / to_f(b));
    }
  } else if (op == "//" || op == "%") {
    if (ints) {
      int64_t x = to_i(a), y = to_i(b);
      if (y == 0) fail(op == "//" ? "integer division or modulo by zero" : "integer modulo by zero");
      if (x == INT64_MIN && y == -1) return op == "//" ? Value(-static_cast<double>(x)) : Value(int64_t{0});
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        m += y;
        q -= 1;
      }
      return op == "//" ? Value(q) : Value(m);
    }
    if (nums) {
      double fd, md;
      float_divmod(to_f(a), to_f(b), &fd, &md);
      return op == "//" ? Value(fd) : Value(md);
    }
    if (op == "%" && a.is_string()) {
      std::vector<Value> args;
      // A non-tuple right operand is one argument; a list or dict also counts as a mapping, and
      // Python then tolerates it going unused.
      if (b.is_list() && b.list()->is_tuple) args = b.list()->items;
      else args.push_back(b);
      return Value(percent_format(a.str(), args, b.is_dict() || (b.is_list() && !b.list()->is_tuple)));
    }
  } else if (op == "**") {
    if (ints && to_i(b) >= 0) {
      int64_t base = to_i(a), e = to_i(b), r = 1;
      bool overflow = false;
      while (e > 0 && !overflow) {
        if (e & 1) overflow |= __builtin_mul_overflow(r, base, &r);
        e >>= 1;
        if (e > 0) overflow |= __builtin_mul_overflow(base, base, &base);
      }
      if (!overflow) return Value(r);
      return Value(std::pow(to_f(a), to_f(b)));
    }
    if (nums) {
      if (to_f(a) == 0.0 && to_f(b) < 0) fail("0.0 cannot be raised to a negative power");
      return Value(std::pow(to_f(a), to_f(b)));
    }
  }
  unsupported(op, a, b);
}

bool contains(const Value& container, const Value& item) {
  if (container.is_undefined()) return false;
  if (container.is_string()) {
    if (item.is_undefined()) fail_undefined(item);
    if (!item.is_string()) fail("'in <string>' requires string as left operand, not " + type_name(item));
    return container.str().find(item.str()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& v : container.list()->items)
      if (py_equal(v, item)) return true;
    return false;
  }
  if (container.is_dict() && !container.dict()->is_namespace) return container.dict()->find(item) != nullptr;
  fail("argument of type '" + type_name(container) + "' is not iterable");
}

// printf-style formatting: "%s-%05.2f" % (a, b).
std::string percent_format(const std::string& fmt, const std::vector<Value>& args, bool mapping_arg) {
  std::string out;
  size_t ai = 0;
  auto next_arg = [&]() -> const Value& {
    if (ai >= args.size()) fail("not enough arguments for format string");
    return args[ai++];
  };
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) fail("incomplete format");
    if (fmt[i] == '%') {
      out += '%';
      continue;
    }
    std::string spec = "%";
    while (i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos) spec += fmt[i++];
    while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) spec += fmt[i++];
    if (i < fmt.size() && fmt[i] == '.') {
      spec += fmt[i++];
      while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) spec += fmt[i++];
    }
    if (i >= fmt.size()) fail("incomplete format");
    char conv = fmt[i];
    const Value& v = next_arg();
    char buf[512];
    if (conv == 's' || conv == 'r' || conv == 'a') {
      std::string s = conv == 's' ? py_str(v) : py_repr(v);
      std::snprintf(buf, sizeof(buf), (spec + "s").c_str(), s.c_str());
      out += s.size() >= sizeof(buf) - 1 ? s : std::string(buf);
    } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o' || conv == 'c') {
      if (!v.is_number()) fail("%" + std::string(1, conv) + " format: a real number is required, not " + type_name(v));
      long long n = v.is_float() ? static_cast<long long>(v.as_float()) : static_cast<long long>(v.is_bool() ? v.as_bool() : v.as_int());
      if (conv == 'c') {
        utf8_append(out, static_cast<char32_t>(n));
        continue;
      }
      std::snprintf(buf, sizeof(buf), (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), n);
      out += buf;
    } else if (std::string("eEfFgG").find(conv) != std::string::npos) {
      if (!v.is_number()) fail("must be real number, not " + type_name(v));
      double d = v.is_float() ? v.as_float() : static_cast<double>(v.is_bool() ? v.as_bool() : v.as_int());
      std::snprintf(buf, sizeof(buf), (spec + conv).c_str(), d);
      out += buf;
    } else {
      fail(std::string("unsupported format character '") + conv + "'");
    }
  }
  if (ai < args.size() && !mapping_arg) fail("not all arguments converted during string formatting");
  return out;
}

}  // namespace vireo::tmpl
