#include "template/py_string.h"

#include <algorithm>

#include "template/py_format.h"
#include "template/value.h"

namespace vireo::tmpl {

namespace {

char32_t up(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
  if (c == 0xff) return 0x178;
  if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) return c - 32;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  return c;
}
char32_t low(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xc0 && c <= 0xde && c != 0xd7)) return c + 32;
  if (c == 0x178) return 0xff;
  if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  return c;
}
bool is_upper(char32_t c) { return low(c) != c; }
bool is_lower(char32_t c) { return up(c) != c || c == 0xdf; }
bool is_cased(char32_t c) { return is_upper(c) || is_lower(c); }
bool is_alpha(char32_t c) {
  return is_cased(c) || (c >= 0xaa && c != 0xd7 && c != 0xf7 && c > 0xbf) ;
}
bool is_digit(char32_t c) { return c >= '0' && c <= '9'; }

}  // namespace

std::string py_upper(const std::string& s) {
  std::u32string u = utf8_decode(s);
  for (auto& c : u) c = up(c);
  return utf8_encode(u);
}

std::string py_lower(const std::string& s) {
  std::u32string u = utf8_decode(s);
  for (auto& c : u) c = low(c);
  return utf8_encode(u);
}

std::string py_title(const std::string& s) {
  std::u32string u = utf8_decode(s);
  bool prev_cased = false;
  for (auto& c : u) {
    if (is_cased(c)) {
      c = prev_cased ? low(c) : up(c);
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return utf8_encode(u);
}

std::string py_capitalize(const std::string& s) {
  std::u32string u = utf8_decode(s);
  for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? up(u[i]) : low(u[i]);
  return utf8_encode(u);
}

std::string py_strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right) {
  std::u32string u = utf8_decode(s);
  std::u32string set = chars ? utf8_decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : py_isspace(c); };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip_it(u[b])) ++b;
  if (right)
    while (e > b && strip_it(u[e - 1])) --e;
  return utf8_encode(u.substr(b, e - b));
}

std::vector<std::string> py_split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t f = s.find(*sep, pos);
      if (f == std::string::npos) break;
      out.push_back(s.substr(pos, f - pos));
      pos = f + sep->size();
    }
    out.push_back(s.substr(pos));
    return out;
  }
  std::u32string u = utf8_decode(s);
  size_t i = 0;
  while (true) {
    while (i < u.size() && py_isspace(u[i])) ++i;
    if (i >= u.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t e = u.size();
      while (e > i && py_isspace(u[e - 1])) --e;
      out.push_back(utf8_encode(u.substr(i, e - i)));
      break;
    }
    size_t j = i;
    while (j < u.size() && !py_isspace(u[j])) ++j;
    out.push_back(utf8_encode(u.substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> py_rsplit(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (maxsplit < 0) return py_split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    size_t end = s.size();
    while (static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t f = s.rfind(*sep, end - sep->size());
      if (f == std::string::npos) break;
      out.push_back(s.substr(f + sep->size(), end - f - sep->size()));
      end = f;
    }
    out.push_back(s.substr(0, end));
  } else {
    std::u32string u = utf8_decode(s);
    size_t e = u.size();
    while (true) {
      while (e > 0 && py_isspace(u[e - 1])) --e;
      if (e == 0) break;
      if (static_cast<int64_t>(out.size()) >= maxsplit) {
        size_t b = 0;
        while (b < e && py_isspace(u[b])) ++b;
        out.push_back(utf8_encode(u.substr(b, e - b)));
        break;
      }
      size_t b = e;
      while (b > 0 && !py_isspace(u[b - 1])) --b;
      out.push_back(utf8_encode(u.substr(b, e - b)));
      e = b;
    }
  }
  return std::vector<std::string>(out.rbegin(), out.rend());
}

std::vector<std::string> py_splitlines(const std::string& s) {
  std::u32string u = utf8_decode(s);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < u.size();) {
    size_t n = py_line_break_len(u, i);
    if (n) {
      out.push_back(utf8_encode(u.substr(start, i - start)));
      i += n;
      start = i;
    } else {
      ++i;
    }
  }
  if (start < u.size()) out.push_back(utf8_encode(u.substr(start)));
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& rep, int64_t count) {
  std::string out;
  uint64_t n_max = old.empty() ? utf8_length(s) + 1 : s.size() / old.size();
  if (count >= 0) n_max = std::min<uint64_t>(n_max, static_cast<uint64_t>(count));
  if (rep.size() > old.size() && s.size() + n_max * (rep.size() - old.size()) > (32ull << 20))
    fail("replace: result too large");
  if (old.empty()) {
    // Python inserts `rep` between every code point (and at both ends).
    std::u32string u = utf8_decode(s);
    int64_t n = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || n < count) {
        out += rep;
        ++n;
      }
      if (i < u.size()) utf8_append(out, u[i]);
    }
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t f = s.find(old, pos);
    if (f == std::string::npos) break;
    out += s.substr(pos, f - pos) + rep;
    pos = f + old.size();
    ++n;
  }
  return out + s.substr(pos);
}

int64_t py_find(const std::string& s, const std::string& sub, bool reverse) {
  size_t f = reverse ? s.rfind(sub) : s.find(sub);
  if (f == std::string::npos) return -1;
  return static_cast<int64_t>(utf8_length(s.substr(0, f)));
}

int64_t py_count(const std::string& s, const std::string& sub) {
  if (sub.empty()) return static_cast<int64_t>(utf8_length(s)) + 1;
  int64_t n = 0;
  for (size_t pos = 0; (pos = s.find(sub, pos)) != std::string::npos; pos += sub.size()) ++n;
  return n;
}

bool py_is(const std::string& s, const char* what) {
  std::u32string u = utf8_decode(s);
  std::string w = what;
  if (u.empty()) return false;
  if (w == "isupper" || w == "islower") {
    bool any = false;
    for (char32_t c : u) {
      if (w == "isupper" ? is_lower(c) : is_upper(c)) return false;
      any |= is_cased(c);
    }
    return any;
  }
  for (char32_t c : u) {
    bool ok = w == "isdigit" || w == "isdecimal" || w == "isnumeric" ? is_digit(c)
              : w == "isalpha"                                       ? is_alpha(c)
              : w == "isalnum"                                       ? is_alpha(c) || is_digit(c)
                                                                     : py_isspace(c);
    if (!ok) return false;
  }
  return true;
}

}  // namespace vireo::tmpl
