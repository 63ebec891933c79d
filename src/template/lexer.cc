#include "template/lexer.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "template/py_format.h"

namespace vireo::tmpl {

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (static_cast<unsigned char>(c) >= 0x80);
}
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

[[noreturn]] void syntax_error(int line, const std::string& msg) {
  throw vireo::Error("chat template: line " + std::to_string(line) + ": " + msg);
}

// Newlines normalized to \n and one trailing newline dropped, as jinja2's lexer does.
std::string normalize(const std::string& in) {
  std::string s;
  s.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\r') {
      s += '\n';
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      s += in[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// Python's unicode-escape decoding of a string literal body.
std::string unescape(const std::string& body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out += c;
      continue;
    }
    char e = body[++i];
    auto hex = [&](int n) -> bool {
      uint32_t v = 0;
      for (int k = 1; k <= n; ++k) {
        if (i + k >= body.size()) return false;
        char h = body[i + k];
        int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
        if (d < 0) return false;
        v = v * 16 + d;
      }
      utf8_append(out, v);
      i += n;
      return true;
    };
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\n': break;  // line continuation
      case 'x': if (!hex(2)) syntax_error(line, "truncated \\xXX escape"); break;
      case 'u': if (!hex(4)) syntax_error(line, "truncated \\uXXXX escape"); break;
      case 'U': if (!hex(8)) syntax_error(line, "truncated \\UXXXXXXXX escape"); break;
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = e - '0';
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
            v = v * 8 + (body[++i] - '0');
          utf8_append(out, v);
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(std::move(src)) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      size_t p = find_tag(pos_);
      if (p == std::string::npos) {
        emit_data(s_.substr(pos_));
        pos_ = s_.size();
        break;
      }
      std::string data = s_.substr(pos_, p - pos_);
      char kind = s_[p + 1];
      char sign = (p + 2 < s_.size() && (s_[p + 2] == '-' || s_[p + 2] == '+')) ? s_[p + 2] : 0;
      data = strip_before_tag(data, sign, kind != '{');
      emit_data(data);
      advance_to(p);
      size_t body = p + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        lex_comment(body);
      } else if (kind == '%' && try_raw(body)) {
        // raw block emitted as data
      } else {
        advance_to(body);
        lex_tag(kind == '%');
      }
    }
    out_.push_back({Tok::Eof, "", line_});
    return std::move(out_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < s_.size(); ++i)
      if (s_[i] == '{' && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    return std::string::npos;
  }

  void advance_to(size_t p) {
    for (size_t i = pos_; i < p; ++i)
      if (s_[i] == '\n') ++line_;
    pos_ = p;
  }

  // '-' strips all whitespace before the tag; otherwise lstrip_blocks removes the indentation of a
  // block or comment tag that starts its line.
  std::string strip_before_tag(const std::string& text, char sign, bool lstrip) const {
    if (sign == '-') {
      size_t e = text.size();
      while (e > 0 && is_ws(text[e - 1])) --e;
      return text.substr(0, e);
    }
    if (sign == '+' || !lstrip) return text;
    size_t nl = text.rfind('\n');
    size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if (l_pos == 0 && !line_starting_) return text;
    if (l_pos >= text.size()) return text;
    for (size_t i = l_pos; i < text.size(); ++i)
      if (!is_ws(text[i])) return text;
    return text.substr(0, l_pos);
  }

  void emit_data(const std::string& d) {
    if (!d.empty()) out_.push_back({Tok::Data, d, line_});
  }

  // After a tag end: `-` eats following whitespace, plain block/comment ends eat one newline.
  void finish_tag(size_t after, char sign, bool trim_newline) {
    size_t e = after;
    if (sign == '-') {
      while (e < s_.size() && is_ws(s_[e])) ++e;
    } else if (sign != '+' && trim_newline && e < s_.size() && s_[e] == '\n') {
      ++e;
    }
    line_starting_ = e > 0 && s_[e - 1] == '\n';
    advance_to(e);
  }

  void lex_comment(size_t body) {
    size_t e = s_.find("#}", body);
    if (e == std::string::npos) syntax_error(line_, "missing end of comment tag");
    char sign = (e > body && (s_[e - 1] == '-' || s_[e - 1] == '+')) ? s_[e - 1] : 0;
    finish_tag(e + 2, sign, true);
  }

  // `{% raw %}...{% endraw %}`: the body is data, untouched except for whitespace control.
  bool try_raw(size_t body) {
    size_t i = body;
    while (i < s_.size() && is_ws(s_[i])) ++i;
    if (s_.compare(i, 3, "raw") != 0 || (i + 3 < s_.size() && is_name_char(s_[i + 3]))) return false;
    i += 3;
    while (i < s_.size() && is_ws(s_[i])) ++i;
    bool minus = false;
    if (i < s_.size() && s_[i] == '-') {
      minus = true;
      ++i;
    }
    if (s_.compare(i, 2, "%}") != 0) return false;
    i += 2;
    if (minus)
      while (i < s_.size() && is_ws(s_[i])) ++i;
    line_starting_ = s_[i - 1] == '\n';
    advance_to(i);
    // find {%[-+]? endraw [-+]?%}
    for (size_t p = i; (p = s_.find("{%", p)) != std::string::npos; p += 2) {
      size_t q = p + 2;
      char sign = (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) ? s_[q] : 0;
      if (sign) ++q;
      while (q < s_.size() && is_ws(s_[q])) ++q;
      if (s_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < s_.size() && is_ws(s_[q])) ++q;
      char esign = 0;
      if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) esign = s_[q++];
      if (s_.compare(q, 2, "%}") != 0) continue;
      emit_data(strip_before_tag(s_.substr(i, p - i), sign, true));
      advance_to(p);
      finish_tag(q + 2, esign, true);
      return true;
    }
    syntax_error(line_, "missing end of raw directive");
  }

  void lex_tag(bool block) {
    out_.push_back({block ? Tok::BlockBegin : Tok::VarBegin, "", line_});
    int depth = 0;
    size_t i = pos_;
    while (true) {
      while (i < s_.size() && is_ws(s_[i])) {
        if (s_[i] == '\n') ++line_;
        ++i;
      }
      if (i >= s_.size()) syntax_error(line_, block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'");
      if (depth == 0) {
        const char* end = block ? "%}" : "}}";
        char sign = 0;
        size_t e = i;
        if ((s_[i] == '-' || (block && s_[i] == '+')) && s_.compare(i + 1, 2, end) == 0) {
          sign = s_[i];
          e = i + 1;
        }
        if (s_.compare(e, 2, end) == 0) {
          out_.push_back({block ? Tok::BlockEnd : Tok::VarEnd, "", line_});
          pos_ = i;
          finish_tag(e + 2, sign, block);
          return;
        }
      }
      i = lex_expr_token(i, depth);
    }
  }

  size_t lex_expr_token(size_t i, int& depth) {
    char c = s_[i];
    Token t{Tok::Op, "", line_};
    if (c == '\'' || c == '"') {
      size_t j = i + 1;
      while (j < s_.size() && s_[j] != c) j += (s_[j] == '\\') ? 2 : 1;
      if (j >= s_.size()) syntax_error(line_, std::string("unexpected char '") + c + "' (unterminated string)");
      std::string body = s_.substr(i + 1, j - i - 1);
      t.type = Tok::String;
      t.text = unescape(body, line_);
      for (char b : body)
        if (b == '\n') ++line_;
      out_.push_back(t);
      return j + 1;
    }
    if (is_digit(c)) return lex_number(i);
    if (is_name_start(c)) {
      size_t j = i;
      while (j < s_.size() && is_name_char(s_[j])) ++j;
      t.type = Tok::Name;
      t.text = s_.substr(i, j - i);
      out_.push_back(t);
      return j;
    }
    static const char* two[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : two) {
      if (s_.compare(i, 2, op) == 0) {
        t.text = op;
        out_.push_back(t);
        return i + 2;
      }
    }
    if (std::strchr("+-*/%~<>=.,:|()[]{};", c)) {
      if (c == '(' || c == '[' || c == '{') ++depth;
      if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
      t.text = std::string(1, c);
      out_.push_back(t);
      return i + 1;
    }
    syntax_error(line_, std::string("unexpected char '") + c + "'");
  }

  size_t lex_number(size_t i) {
    Token t{Tok::Int, "", line_};
    auto digits = [&](size_t j, auto pred) {
      while (j < s_.size() && (pred(s_[j]) || (s_[j] == '_' && j + 1 < s_.size() && pred(s_[j + 1])))) ++j;
      return j;
    };
    auto dec = [](char ch) { return is_digit(ch); };
    if (s_[i] == '0' && i + 1 < s_.size() && std::strchr("xXoObB", s_[i + 1])) {
      char k = s_[i + 1] | 0x20;
      int base = k == 'x' ? 16 : k == 'o' ? 8 : 2;
      auto pred = [base](char ch) {
        if (base == 16) return is_digit(ch) || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f');
        return ch >= '0' && ch < '0' + base;
      };
      size_t j = digits(i + 2, pred);
      std::string d;
      for (size_t k2 = i + 2; k2 < j; ++k2)
        if (s_[k2] != '_') d += s_[k2];
      if (d.empty()) syntax_error(line_, "invalid number literal");
      t.ival = static_cast<int64_t>(std::stoull(d, nullptr, base));
      out_.push_back(t);
      return j;
    }
    size_t j = digits(i, dec);
    bool is_float = false;
    if (j + 1 < s_.size() && s_[j] == '.' && is_digit(s_[j + 1])) {
      j = digits(j + 1, dec);
      is_float = true;
    }
    if (j < s_.size() && (s_[j] == 'e' || s_[j] == 'E')) {
      size_t k = j + 1;
      if (k < s_.size() && (s_[k] == '+' || s_[k] == '-')) ++k;
      if (k < s_.size() && is_digit(s_[k])) {
        j = digits(k, dec);
        is_float = true;
      }
    }
    std::string d;
    for (size_t k = i; k < j; ++k)
      if (s_[k] != '_') d += s_[k];
    if (is_float) {
      t.type = Tok::Float;
      t.fval = std::strtod(d.c_str(), nullptr);
    } else {
      errno = 0;
      t.ival = std::strtoll(d.c_str(), nullptr, 10);
      if (errno == ERANGE) syntax_error(line_, "integer literal too large");
    }
    t.text = d;
    out_.push_back(t);
    return j;
  }

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(normalize(source)).run(); }

const char* tok_describe(Tok t) {
  switch (t) {
    case Tok::Data: return "template data";
    case Tok::VarBegin: return "'{{'";
    case Tok::VarEnd: return "end of print statement";
    case Tok::BlockBegin: return "'{%'";
    case Tok::BlockEnd: return "end of statement block";
    case Tok::Name: return "name";
    case Tok::String: return "string";
    case Tok::Int: return "integer";
    case Tok::Float: return "float";
    case Tok::Op: return "operator";
    default: return "end of template";
  }
}

}  // namespace vireo::tmpl
