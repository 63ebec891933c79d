#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <vector>

#include "core/error.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace vireo {

std::string unicode_normalize(const std::string& s, bool compose, bool compat) {
  bool ascii = true;
  for (unsigned char c : s) ascii &= c < 0x80;
  if (ascii) return s;  // ASCII is invariant under all four forms
  int opts = UTF8PROC_STABLE | (compose ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE) | (compat ? UTF8PROC_COMPAT : 0);
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                    static_cast<utf8proc_ssize_t>(s.size()), &out, static_cast<utf8proc_option_t>(opts));
  if (n < 0) return s;  // invalid input cannot happen (text is repaired first); keep it unchanged
  std::string r(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  free(out);
  return r;
}

namespace {

struct UnicodeNorm : Normalizer {
  bool compose, compat;
  UnicodeNorm(bool c, bool k) : compose(c), compat(k) {}
  void normalize(std::string& s) const override { s = unicode_normalize(s, compose, compat); }
};

struct Lowercase : Normalizer {
  void normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) utf8::append(out, static_cast<uint32_t>(utf8proc_tolower(utf8::next(s, i))));
    s = std::move(out);
  }
};

std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t f = s.find(from, pos);
    if (f == std::string::npos) break;
    out.append(s, pos, f - pos);
    out += to;
    pos = f + from.size();
  }
  out.append(s, pos, std::string::npos);
  return out;
}

struct Replace : Normalizer {
  std::string from, to;
  std::unique_ptr<Regex> re;
  void normalize(std::string& s) const override {
    if (!re) {
      if (s.find(from) != std::string::npos) s = replace_all(s, from, to);
      return;
    }
    std::string out;
    size_t pos = 0;
    for (auto [b, e] : re->find_all(s)) {
      out.append(s, pos, b - pos);
      out += to;
      pos = e;
    }
    out.append(s, pos, std::string::npos);
    s = std::move(out);
  }
};

struct Prepend : Normalizer {
  std::string prefix;
  void normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, prefix);
  }
};

struct Strip : Normalizer {
  bool left, right;
  void normalize(std::string& s) const override {
    size_t b = 0, e = s.size();
    if (left) {
      while (b < e) {
        size_t i = b;
        if (!utf8::is_whitespace(utf8::next(s, i))) break;
        b = i;
      }
    }
    if (right) {
      while (e > b) {
        size_t st = e - 1;
        while (st > b && (static_cast<unsigned char>(s[st]) & 0xC0) == 0x80) --st;
        size_t i = st;
        if (!utf8::is_whitespace(utf8::next(s, i))) break;
        e = st;
      }
    }
    s = s.substr(b, e - b);
  }
};

struct SequenceNorm : Normalizer {
  std::vector<std::unique_ptr<Normalizer>> items;
  void normalize(std::string& s) const override {
    for (auto& n : items) n->normalize(s);
  }
};

}  // namespace

void read_pattern(const nlohmann::json& p, const std::string& what, std::string& literal,
                         std::unique_ptr<Regex>& re) {
  if (p.contains("String")) {
    literal = p.at("String").get<std::string>();
  } else if (p.contains("Regex")) {
    re = std::make_unique<Regex>(p.at("Regex").get<std::string>(), what);
  } else {
    throw Error(what + ": pattern needs \"String\" or \"Regex\"");
  }
}

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j, const std::string& what) {
  if (j.is_null()) return nullptr;
  std::string type = j.at("type").get<std::string>();
  if (type == "NFC") return std::make_unique<UnicodeNorm>(true, false);
  if (type == "NFD") return std::make_unique<UnicodeNorm>(false, false);
  if (type == "NFKC") return std::make_unique<UnicodeNorm>(true, true);
  if (type == "NFKD") return std::make_unique<UnicodeNorm>(false, true);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Replace") {
    auto r = std::make_unique<Replace>();
    read_pattern(j.at("pattern"), what, r->from, r->re);
    r->to = j.at("content").get<std::string>();
    return r;
  }
  if (type == "Prepend") {
    auto r = std::make_unique<Prepend>();
    r->prefix = j.at("prepend").get<std::string>();
    return r;
  }
  if (type == "Strip") {
    auto r = std::make_unique<Strip>();
    r->left = j.value("strip_left", false);
    r->right = j.value("strip_right", false);
    return r;
  }
  if (type == "Sequence") {
    auto r = std::make_unique<SequenceNorm>();
    for (auto& n : j.at("normalizers"))
      if (auto p = make_normalizer(n, what)) r->items.push_back(std::move(p));
    return r;
  }
  throw Error(what + ": unsupported normalizer type '" + type + "'");
}

}  // namespace vireo
