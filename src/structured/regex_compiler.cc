#include "structured/regex_compiler.h"

#include <cctype>
#include <vector>

namespace vireo::structured {
namespace {

constexpr int kMaxRepeat = 1000;
// Groups recurse in the parser (3 frames a level): without a cap, a pattern of 100,000 '(' from a
// request overflows the stack. 250 is the default nest limit of Rust's regex crate.
constexpr int kMaxGroupDepth = 250;
using Seq = std::vector<Symbol>;

void set_range(ByteSet& s, int lo, int hi) {
  for (int c = lo; c <= hi; ++c) s[c >> 6] |= uint64_t{1} << (c & 63);
}

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// A character class: ASCII bytes, single non-ASCII characters, and whether it also takes every
// non-ASCII character (negated classes, \D \W \S, `.`).
struct CharClass {
  ByteSet ascii{};
  std::vector<std::string> multibyte;
  bool any_multibyte = false;
};

class RegexParser {
 public:
  RegexParser(GrammarBuilder& b, std::string_view p, bool json_string) : b_(b), p_(p) {
    allowed_ = {~uint64_t{0}, ~uint64_t{0}, 0, 0};  // ASCII only; multi-byte characters go through utf8_any
    if (json_string) {
      allowed_[0] &= ~uint64_t{0xFFFFFFFF};  // control characters
      allowed_['"' >> 6] &= ~(uint64_t{1} << ('"' & 63));
      allowed_['\\' >> 6] &= ~(uint64_t{1} << ('\\' & 63));
    }
  }

  int32_t run() {
    if (peek('^')) ++i_;
    const int32_t r = parse_alt();
    if (i_ < p_.size()) fail(p_[i_] == ')' ? "unbalanced ')'" : "unexpected character");
    return r;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw RegexError("regex: " + why + " at offset " + std::to_string(i_) + " of '" + std::string(p_) + "'");
  }
  bool peek(char c) const { return i_ < p_.size() && p_[i_] == c; }
  bool at_end_anchor() const { return peek('$') && (i_ + 1 == p_.size() || p_[i_ + 1] == ')' || p_[i_ + 1] == '|'); }

  int32_t parse_alt() {
    const int32_t rule = b_.new_rule("regex_alt");
    b_.add_alt(rule, parse_concat());
    while (peek('|')) {
      ++i_;
      b_.add_alt(rule, parse_concat());
    }
    return rule;
  }

  Seq parse_concat() {
    Seq seq;
    while (i_ < p_.size() && !peek('|') && !peek(')')) {
      if (at_end_anchor()) {
        if (i_ + 1 != p_.size()) fail("'$' is supported only at the end");
        ++i_;
        break;
      }
      Seq atom = parse_atom();
      apply_quantifiers(atom);
      seq.insert(seq.end(), atom.begin(), atom.end());
    }
    return seq;
  }

  int read_number() {
    int n = 0, digits = 0;
    while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') {
      n = n * 10 + (p_[i_++] - '0');
      if (n > kMaxRepeat) fail("repeat count above " + std::to_string(kMaxRepeat));
      ++digits;
    }
    if (!digits) fail("expected a number");
    return n;
  }

  int32_t as_rule(const Seq& atom) {
    const int32_t r = b_.new_rule("regex_atom");
    b_.add_alt(r, atom);
    return r;
  }

  void apply_quantifiers(Seq& atom) {
    while (i_ < p_.size()) {
      int lo = 0, hi = -1;  // hi -1: unbounded
      const char q = p_[i_];
      if (q == '*') {
        ++i_;
      } else if (q == '+') {
        ++i_;
        lo = 1;
      } else if (q == '?') {
        ++i_;
        hi = 1;
      } else if (q == '{' && i_ + 1 < p_.size() && p_[i_ + 1] >= '0' && p_[i_ + 1] <= '9') {
        ++i_;
        lo = hi = read_number();
        if (peek(',')) {
          ++i_;
          hi = peek('}') ? -1 : read_number();
        }
        if (!peek('}')) fail("expected '}'");
        ++i_;
        if (hi >= 0 && hi < lo) fail("{n,m} with m < n");
      } else {
        return;
      }
      if (peek('?')) ++i_;  // lazy: the same language
      else if (peek('+')) fail("possessive quantifiers are not supported");
      atom = repeat(atom, lo, hi);
    }
  }

  Seq repeat(const Seq& atom, int lo, int hi) {
    const Symbol a = GrammarBuilder::ref(as_rule(atom));
    Seq out(lo, a);
    if (hi < 0) {  // star: s ::= "" | a s (a tail call, so the stack stays flat)
      const int32_t s = b_.new_rule("regex_star");
      b_.add_alt(s, {});
      b_.add_alt(s, {a, GrammarBuilder::ref(s)});
      out.push_back(GrammarBuilder::ref(s));
      return out;
    }
    // Up to hi - lo more: o_k ::= "" | a o_{k+1}.
    int32_t next = -1;
    for (int k = hi - lo; k > 0; --k) {
      const int32_t o = b_.new_rule("regex_opt");
      b_.add_alt(o, {});
      if (next < 0) b_.add_alt(o, {a});
      else b_.add_alt(o, {a, GrammarBuilder::ref(next)});
      next = o;
    }
    if (next >= 0) out.push_back(GrammarBuilder::ref(next));
    return out;
  }

  uint32_t read_codepoint() {  // one UTF-8 character of the pattern
    const unsigned char c = static_cast<unsigned char>(p_[i_]);
    const int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (i_ + len > p_.size()) fail("broken UTF-8");
    uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(p_[i_ + k]) & 0x3F);
    i_ += len;
    return cp;
  }

  uint32_t read_hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k, ++i_) {
      if (i_ >= p_.size() || !std::isxdigit(static_cast<unsigned char>(p_[i_]))) fail("expected a hex digit");
      const char h = p_[i_];
      v = v * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    return v;
  }

  // After a backslash: a class (\d ...) or one character.
  CharClass parse_escape() {
    if (i_ >= p_.size()) fail("trailing backslash");
    const char e = p_[i_++];
    CharClass c;
    switch (e) {
      case 'd': case 'w': case 's': return named_class(e);
      case 'D': case 'W': case 'S': {
        const CharClass pos = named_class(static_cast<char>(std::tolower(static_cast<unsigned char>(e))));
        for (int w = 0; w < 2; ++w) c.ascii[w] = ~pos.ascii[w];
        c.any_multibyte = true;
        return c;
      }
      case 'n': set_range(c.ascii, '\n', '\n'); return c;
      case 't': set_range(c.ascii, '\t', '\t'); return c;
      case 'r': set_range(c.ascii, '\r', '\r'); return c;
      case 'f': set_range(c.ascii, '\f', '\f'); return c;
      case 'v': set_range(c.ascii, '\v', '\v'); return c;
      case 'x': return single(read_hex(2));
      case 'u': return single(read_hex(4));
      default: break;
    }
    if (std::isalnum(static_cast<unsigned char>(e))) fail(std::string("escape \\") + e + " is not supported");
    --i_;
    return single(read_codepoint());
  }
  static CharClass named_class(char e) {  // \d \w \s
    CharClass c;
    if (e == 'd') {
      set_range(c.ascii, '0', '9');
    } else if (e == 'w') {
      set_range(c.ascii, 'a', 'z');
      set_range(c.ascii, 'A', 'Z');
      set_range(c.ascii, '0', '9');
      set_range(c.ascii, '_', '_');
    } else {
      for (char sp : {' ', '\t', '\n', '\r', '\f', '\v'}) set_range(c.ascii, sp, sp);
    }
    return c;
  }

  CharClass single(uint32_t cp) {
    CharClass c;
    if (cp < 0x80) set_range(c.ascii, static_cast<int>(cp), static_cast<int>(cp));
    else c.multibyte.push_back(utf8(cp));
    return c;
  }

  CharClass parse_class() {  // after '['
    bool negated = false;
    if (peek('^')) {
      negated = true;
      ++i_;
    }
    CharClass c;
    bool first = true;
    while (i_ < p_.size() && (first || !peek(']'))) {
      first = false;
      CharClass item;
      uint32_t lo_cp = 0;
      bool is_char = true;
      if (peek('\\')) {
        ++i_;
        item = parse_escape();
        // A range may start at an escaped character (\x41-\x5A), not at a class (\d-z).
        is_char = !item.any_multibyte && item.multibyte.size() + count(item.ascii) == 1;
        if (is_char) lo_cp = item.multibyte.empty() ? first_bit(item.ascii) : 0x80;
      } else {
        lo_cp = read_codepoint();
        item = single(lo_cp);
      }
      if (peek('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi_cp = 0;
        if (peek('\\')) {
          ++i_;
          CharClass h = parse_escape();
          if (count(h.ascii) != 1 || !h.multibyte.empty()) fail("bad class range");
          hi_cp = first_bit(h.ascii);
        } else {
          hi_cp = read_codepoint();
        }
        if (!is_char || lo_cp >= 0x80 || hi_cp >= 0x80) fail("only ASCII ranges are supported in classes");
        if (hi_cp < lo_cp) fail("class range out of order");
        set_range(item.ascii, static_cast<int>(lo_cp), static_cast<int>(hi_cp));
      }
      for (int w = 0; w < 4; ++w) c.ascii[w] |= item.ascii[w];
      c.multibyte.insert(c.multibyte.end(), item.multibyte.begin(), item.multibyte.end());
      c.any_multibyte |= item.any_multibyte;
    }
    if (!peek(']')) fail("unterminated class");
    ++i_;
    if (negated) {
      if (!c.multibyte.empty() || c.any_multibyte) fail("negated classes with non-ASCII members are not supported");
      for (int w = 0; w < 2; ++w) c.ascii[w] = ~c.ascii[w];
      c.any_multibyte = true;
    }
    return c;
  }

  static int count(const ByteSet& s) {
    int n = 0;
    for (uint64_t w : s) n += __builtin_popcountll(w);
    return n;
  }
  static uint32_t first_bit(const ByteSet& s) {
    for (int w = 0; w < 4; ++w)
      if (s[w]) return static_cast<uint32_t>(w * 64 + __builtin_ctzll(s[w]));
    return 0;
  }

  Seq class_seq(const CharClass& c) {
    ByteSet ascii = c.ascii;
    for (int w = 0; w < 4; ++w) ascii[w] &= allowed_[w];
    const bool plain = c.multibyte.empty() && !c.any_multibyte;
    if (plain) {
      if (!count(ascii)) fail("a character class that matches nothing here");
      return {b_.bytes(ascii)};
    }
    const int32_t r = b_.new_rule("regex_class");
    if (count(ascii)) b_.add_alt(r, {b_.bytes(ascii)});
    for (const std::string& m : c.multibyte) {
      Seq s;
      b_.append_literal(s, m);
      b_.add_alt(r, s);
    }
    if (c.any_multibyte) add_multibyte_alts(r);
    return {GrammarBuilder::ref(r)};
  }

  // Every well-formed multi-byte UTF-8 character.
  void add_multibyte_alts(int32_t r) {
    const Symbol cont = b_.range(0x80, 0xBF);
    b_.add_alt(r, {b_.range(0xC2, 0xDF), cont});
    b_.add_alt(r, {b_.byte(0xE0), b_.range(0xA0, 0xBF), cont});
    ByteSet e{};
    set_range(e, 0xE1, 0xEC);
    set_range(e, 0xEE, 0xEF);
    b_.add_alt(r, {b_.bytes(e), cont, cont});
    b_.add_alt(r, {b_.byte(0xED), b_.range(0x80, 0x9F), cont});
    b_.add_alt(r, {b_.byte(0xF0), b_.range(0x90, 0xBF), cont, cont});
    b_.add_alt(r, {b_.range(0xF1, 0xF3), cont, cont, cont});
    b_.add_alt(r, {b_.byte(0xF4), b_.range(0x80, 0x8F), cont, cont});
  }

  Seq parse_atom() {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (peek('?')) {
        ++i_;
        if (peek(':')) {
          ++i_;
        } else if ((peek('P') && i_ + 1 < p_.size() && p_[i_ + 1] == '<') || (peek('<') && i_ + 1 < p_.size() &&
                                                                            p_[i_ + 1] != '=' && p_[i_ + 1] != '!')) {
          const size_t close = p_.find('>', i_);
          if (close == std::string_view::npos) fail("unterminated group name");
          i_ = close + 1;  // a named group is a plain group here
        } else {
          fail("lookaround and inline flags are not supported");
        }
      }
      if (++group_depth_ > kMaxGroupDepth) fail("groups nested deeper than " + std::to_string(kMaxGroupDepth));
      const int32_t r = parse_alt();
      --group_depth_;
      if (!peek(')')) fail("missing ')'");
      ++i_;
      return {GrammarBuilder::ref(r)};
    }
    if (c == '[') {
      ++i_;
      return class_seq(parse_class());
    }
    if (c == '.') {
      ++i_;
      CharClass dot;
      set_range(dot.ascii, 0, 0x7F);
      dot.ascii[0] &= ~(uint64_t{1} << '\n');
      dot.any_multibyte = true;
      return class_seq(dot);
    }
    if (c == '\\') {
      ++i_;
      if (i_ < p_.size() && (p_[i_] == 'b' || p_[i_] == 'B' || p_[i_] == 'A' || p_[i_] == 'Z' || p_[i_] == 'z'))
        fail("anchors and word boundaries are not supported");
      if (i_ < p_.size() && p_[i_] >= '1' && p_[i_] <= '9') fail("backreferences are not supported");
      return class_seq(parse_escape());
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') fail("nothing to repeat");
    if (c == '^') fail("'^' is supported only at the start");
    return class_seq(single(read_codepoint()));
  }

  GrammarBuilder& b_;
  std::string_view p_;
  size_t i_ = 0;
  int group_depth_ = 0;  // groups open at i_
  ByteSet allowed_{};
};

}  // namespace

int32_t add_regex_rule(GrammarBuilder& b, std::string_view pattern, bool json_string) {
  return RegexParser(b, pattern, json_string).run();
}

}  // namespace vireo::structured
