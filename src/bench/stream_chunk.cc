#include "bench/stream_chunk.h"

#include <nlohmann/json.hpp>

namespace vireo::bench {

namespace {

// A validating scanner over one JSON text (RFC 8259, as nlohmann::json accepts it: UTF-8 checked,
// surrogate pairs checked, no trailing garbage). Every method returns false on anything it does not
// accept; the caller then defers to nlohmann.
class Scanner {
 public:
  explicit Scanner(std::string_view s) : p_(s.data()), e_(s.data() + s.size()) {}

  void ws() {
    while (p_ < e_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  bool at_end() {
    ws();
    return p_ == e_;
  }
  bool peek(char c) {
    ws();
    return p_ < e_ && *p_ == c;
  }
  bool peek_number() {
    ws();
    return p_ < e_ && (*p_ == '-' || (*p_ >= '0' && *p_ <= '9'));
  }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++p_;
    return true;
  }

  // A string; decoded into *out when out != nullptr. `escaped` says whether it held a backslash.
  bool string(std::string* out, bool* escaped = nullptr) {
    if (!eat('"')) return false;
    if (out) out->clear();
    if (escaped) *escaped = false;
    const char* run = p_;  // start of the pending unescaped run
    while (true) {
      if (p_ >= e_) return false;
      unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        if (out) out->append(run, static_cast<size_t>(p_ - run));
        ++p_;
        return true;
      }
      if (c < 0x20) return false;
      if (c < 0x80 && c != '\\') {
        ++p_;
        continue;
      }
      if (c >= 0x80) {
        if (!utf8()) return false;
        continue;
      }
      // Backslash.
      if (escaped) *escaped = true;
      if (out) out->append(run, static_cast<size_t>(p_ - run));
      ++p_;
      if (p_ >= e_) return false;
      char k = *p_++;
      char lit = 0;
      switch (k) {
        case '"': lit = '"'; break;
        case '\\': lit = '\\'; break;
        case '/': lit = '/'; break;
        case 'b': lit = '\b'; break;
        case 'f': lit = '\f'; break;
        case 'n': lit = '\n'; break;
        case 'r': lit = '\r'; break;
        case 't': lit = '\t'; break;
        case 'u': {
          unsigned cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned lo = 0;
            if (e_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
            p_ += 2;
            if (!hex4(lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          if (out) put_utf8(*out, cp);
          break;
        }
        default:
          return false;
      }
      if (lit && out) out->push_back(lit);
      run = p_;
    }
  }

  // A number; *is_int (no fraction or exponent) and *small (an int of at most 9 digits, in *v).
  bool number(bool* is_int, bool* small, int* v) {
    ws();
    bool neg = false;
    if (p_ < e_ && *p_ == '-') {
      neg = true;
      ++p_;
    }
    if (p_ >= e_) return false;
    const char* digits = p_;
    if (*p_ == '0') {
      ++p_;
    } else if (*p_ >= '1' && *p_ <= '9') {
      while (p_ < e_ && *p_ >= '0' && *p_ <= '9') ++p_;
    } else {
      return false;
    }
    size_t ndig = static_cast<size_t>(p_ - digits);
    bool integer = true;
    if (p_ < e_ && *p_ == '.') {
      integer = false;
      ++p_;
      if (p_ >= e_ || *p_ < '0' || *p_ > '9') return false;
      while (p_ < e_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ < e_ && (*p_ == 'e' || *p_ == 'E')) {
      integer = false;
      ++p_;
      if (p_ < e_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ >= e_ || *p_ < '0' || *p_ > '9') return false;
      while (p_ < e_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (is_int) *is_int = integer;
    if (small) *small = integer && ndig <= 9;
    if (v && integer && ndig <= 9) {
      int x = 0;
      for (const char* q = digits; q < digits + ndig; ++q) x = x * 10 + (*q - '0');
      *v = neg ? -x : x;
    }
    return true;
  }

  // Any value, validated and skipped.
  bool skip(int depth = 0) {
    if (depth > 64) return false;  // deep nesting: leave it to nlohmann
    ws();
    if (p_ >= e_) return false;
    switch (*p_) {
      case '"':
        return string(nullptr);
      case '{': {
        ++p_;
        if (eat('}')) return true;
        while (true) {
          if (!string(nullptr) || !eat(':') || !skip(depth + 1)) return false;
          if (eat(',')) continue;
          return eat('}');
        }
      }
      case '[': {
        ++p_;
        if (eat(']')) return true;
        while (true) {
          if (!skip(depth + 1)) return false;
          if (eat(',')) continue;
          return eat(']');
        }
      }
      case 't':
        return literal("true");
      case 'f':
        return literal("false");
      case 'n':
        return literal("null");
      default:
        return number(nullptr, nullptr, nullptr);
    }
  }

  // An object: on_member(key) is called with the scanner at the value and must consume it.
  // Keys with escapes are refused (they could spell a key we look for).
  template <typename F>
  bool object(F&& on_member) {
    if (!eat('{')) return false;
    if (eat('}')) return true;
    while (true) {
      ws();
      if (p_ >= e_ || *p_ != '"') return false;
      const char* ks = p_ + 1;
      bool esc = false;
      if (!string(nullptr, &esc) || esc) return false;
      std::string_view key(ks, static_cast<size_t>(p_ - 1 - ks));
      if (!eat(':') || !on_member(key)) return false;
      if (eat(',')) continue;
      return eat('}');
    }
  }

 private:
  bool literal(std::string_view w) {
    if (static_cast<size_t>(e_ - p_) < w.size() || std::string_view(p_, w.size()) != w) return false;
    p_ += w.size();
    return true;
  }
  bool hex4(unsigned& cp) {
    if (e_ - p_ < 4) return false;
    cp = 0;
    for (int i = 0; i < 4; ++i) {
      char h = *p_++;
      int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
            : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
      if (d < 0) return false;
      cp = cp * 16 + static_cast<unsigned>(d);
    }
    return true;
  }
  static bool in(unsigned char c, unsigned lo, unsigned hi) { return c >= lo && c <= hi; }
  // One well-formed UTF-8 sequence (RFC 3629, Table 3-7 of Unicode), advancing past it.
  bool utf8() {
    auto b = [&](int i) { return static_cast<unsigned char>(p_[i]); };
    unsigned char c = b(0);
    ptrdiff_t left = e_ - p_;
    int n;
    bool ok;
    if (in(c, 0xC2, 0xDF)) {
      n = 2;
      ok = left >= 2 && in(b(1), 0x80, 0xBF);
    } else if (c == 0xE0) {
      n = 3;
      ok = left >= 3 && in(b(1), 0xA0, 0xBF) && in(b(2), 0x80, 0xBF);
    } else if (in(c, 0xE1, 0xEC) || in(c, 0xEE, 0xEF)) {
      n = 3;
      ok = left >= 3 && in(b(1), 0x80, 0xBF) && in(b(2), 0x80, 0xBF);
    } else if (c == 0xED) {
      n = 3;
      ok = left >= 3 && in(b(1), 0x80, 0x9F) && in(b(2), 0x80, 0xBF);
    } else if (c == 0xF0) {
      n = 4;
      ok = left >= 4 && in(b(1), 0x90, 0xBF) && in(b(2), 0x80, 0xBF) && in(b(3), 0x80, 0xBF);
    } else if (in(c, 0xF1, 0xF3)) {
      n = 4;
      ok = left >= 4 && in(b(1), 0x80, 0xBF) && in(b(2), 0x80, 0xBF) && in(b(3), 0x80, 0xBF);
    } else if (c == 0xF4) {
      n = 4;
      ok = left >= 4 && in(b(1), 0x80, 0x8F) && in(b(2), 0x80, 0xBF) && in(b(3), 0x80, 0xBF);
    } else {
      return false;
    }
    if (!ok) return false;
    p_ += n;
    return true;
  }
  static void put_utf8(std::string& s, unsigned cp) {
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  const char* p_;
  const char* e_;
};

}  // namespace

bool parse_stream_chunk_fast(std::string_view payload, Backend backend, StreamChunk& out) {
  out.kind = StreamChunk::Kind::kData;
  out.error.clear();
  out.has_tokens = false;
  out.has_choices = false;
  out.has_text = false;
  out.text.clear();
  Scanner s(payload);
  if (!s.peek('{')) return false;
  // Later duplicates win, as in nlohmann::json (its objects are maps assigned in order).
  bool ok = s.object([&](std::string_view key) {
    if (key == "error") return false;  // rare: the reference path words it
    if (key == "usage") {
      out.has_tokens = false;
      if (!s.peek('{')) return s.skip();
      return s.object([&](std::string_view k) {
        if (k != "completion_tokens") return s.skip();
        out.has_tokens = false;
        if (!s.peek_number()) return s.skip();
        bool is_int = false, small = false;
        int v = 0;
        if (!s.number(&is_int, &small, &v)) return false;
        if (is_int && !small) return false;  // a big integer: let nlohmann say what get<int> gives
        out.has_tokens = is_int;
        out.tokens = v;
        return true;
      });
    }
    if (key == "choices") {
      out.has_choices = false;
      out.has_text = false;
      out.text.clear();
      if (!s.peek('[')) return s.skip();
      s.eat('[');
      if (s.eat(']')) return true;
      out.has_choices = true;
      bool first_ok;
      if (!s.peek('{')) {
        first_ok = s.skip();
      } else if (backend == Backend::kCompletions) {
        first_ok = s.object([&](std::string_view k) {
          if (k != "text") return s.skip();
          out.has_text = false;
          if (!s.peek('"')) return s.skip();
          out.has_text = true;
          return s.string(&out.text);
        });
      } else {
        first_ok = s.object([&](std::string_view k) {
          if (k != "delta") return s.skip();
          out.has_text = false;
          if (!s.peek('{')) return s.skip();
          bool content = false, reasoning = false;
          bool r = s.object([&](std::string_view dk) {
            if (dk == "content") {
              content = s.peek('"');
              return content ? s.string(&out.content_) : s.skip();
            }
            if (dk == "reasoning_content") {
              reasoning = s.peek('"');
              return reasoning ? s.string(&out.reasoning_) : s.skip();
            }
            return s.skip();
          });
          if (!r) return false;
          if (content) out.text.assign(out.content_);
          else if (reasoning) out.text.assign(out.reasoning_);
          else out.text.clear();
          out.has_text = content || reasoning;
          return true;
        });
      }
      if (!first_ok) return false;
      while (s.eat(',')) {
        if (!s.skip()) return false;
      }
      return s.eat(']');
    }
    return s.skip();
  });
  if (!ok || !s.at_end()) return false;
  if (!out.has_text) out.text.clear();
  return true;
}

void parse_stream_chunk_json(std::string_view payload, Backend backend, StreamChunk& out) {
  out.kind = StreamChunk::Kind::kData;
  out.error.clear();
  out.has_tokens = false;
  out.has_choices = false;
  out.has_text = false;
  out.text.clear();
  nlohmann::json j = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    out.kind = StreamChunk::Kind::kMalformed;
    return;
  }
  if (j.contains("error")) {
    const auto& e = j["error"];
    out.kind = StreamChunk::Kind::kError;
    out.error = e.is_object() && e.contains("message") ? e["message"].dump() : e.dump();
    return;
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const auto& u = j["usage"];
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
      out.has_tokens = true;
      out.tokens = u["completion_tokens"].get<int>();
    }
  }
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return;
  out.has_choices = true;
  const auto& c = j["choices"][0];
  if (backend == Backend::kCompletions) {
    if (c.is_object() && c.contains("text") && c["text"].is_string()) {
      out.has_text = true;
      out.text = c["text"].get<std::string>();
    }
  } else if (c.is_object() && c.contains("delta") && c["delta"].is_object()) {
    const auto& d = c["delta"];
    if (d.contains("content") && d["content"].is_string()) {
      out.has_text = true;
      out.text = d["content"].get<std::string>();
    } else if (d.contains("reasoning_content") && d["reasoning_content"].is_string()) {
      out.has_text = true;
      out.text = d["reasoning_content"].get<std::string>();
    }
  }
}

}  // namespace vireo::bench
