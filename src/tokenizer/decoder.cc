#include "tokenizer/decoder.h"

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace vireo {

namespace {

struct ByteLevelDec : Decoder {
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string joined;
    for (auto& t : tokens) joined += t;
    std::string s = utf8::lossy(ByteLevelMap::get().decode(joined));
    tokens.assign(1, std::move(s));
  }
};

struct ReplaceDec : Decoder {
  std::string from, to;
  std::unique_ptr<Regex> re;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::string out;
      size_t pos = 0;
      if (re) {
        for (auto [b, e] : re->find_all(t)) {
          out.append(t, pos, b - pos);
          out += to;
          pos = e;
        }
      } else if (!from.empty()) {
        for (size_t f = t.find(from); f != std::string::npos; f = t.find(from, pos)) {
          out.append(t, pos, f - pos);
          out += to;
          pos = f + from.size();
        }
      }
      out.append(t, pos, std::string::npos);
      t = std::move(out);
    }
  }
};

int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

struct ByteFallbackDec : Decoder {
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto flush = [&] {
      if (bytes.empty()) return;
      if (utf8::is_valid(bytes)) {
        out.push_back(bytes);
      } else {
        for (size_t k = 0; k < bytes.size(); ++k) out.emplace_back(utf8::kReplacement);  // one per byte
      }
      bytes.clear();
    };
    for (auto& t : tokens) {
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && hex_val(t[3]) >= 0 && hex_val(t[4]) >= 0) {
        bytes.push_back(static_cast<char>(hex_val(t[3]) * 16 + hex_val(t[4])));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
};

struct FuseDec : Decoder {
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string joined;
    for (auto& t : tokens) joined += t;
    tokens.assign(1, std::move(joined));
  }
};

struct StripDec : Decoder {
  std::string content;  // one character
  size_t start = 0, stop = 0;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      size_t b = 0, e = t.size();
      for (size_t k = 0; k < start && b < e && t.compare(b, content.size(), content) == 0; ++k) b += content.size();
      for (size_t k = 0; k < stop && e >= b + content.size() && t.compare(e - content.size(), content.size(), content) == 0;
           ++k)
        e -= content.size();
      t = t.substr(b, e - b);
    }
  }
};

struct MetaspaceDec : Decoder {
  std::string replacement;
  bool strip_first = true;  // prepend_scheme != never
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      size_t pos = 0;
      for (size_t f = t.find(replacement); f != std::string::npos; f = t.find(replacement, pos)) {
        out.append(t, pos, f - pos);
        out += ' ';
        pos = f + replacement.size();
      }
      out.append(t, pos, std::string::npos);
      if (i == 0 && strip_first && !out.empty() && out[0] == ' ') out.erase(0, 1);
      tokens[i] = std::move(out);
    }
  }
};

struct SequenceDec : Decoder {
  std::vector<std::unique_ptr<Decoder>> items;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& d : items) d->decode_chain(tokens);
  }
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j, const std::string& what) {
  if (j.is_null()) return nullptr;
  std::string type = j.at("type").get<std::string>();
  if (type == "ByteLevel") return std::make_unique<ByteLevelDec>();
  if (type == "Replace") {
    auto r = std::make_unique<ReplaceDec>();
    read_pattern(j.at("pattern"), what, r->from, r->re);
    r->to = j.at("content").get<std::string>();
    return r;
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDec>();
  if (type == "Fuse") return std::make_unique<FuseDec>();
  if (type == "Strip") {
    auto r = std::make_unique<StripDec>();
    r->content = j.at("content").get<std::string>();
    r->start = j.value("start", 0);
    r->stop = j.value("stop", 0);
    return r;
  }
  if (type == "Metaspace") {
    auto r = std::make_unique<MetaspaceDec>();
    r->replacement = j.value("replacement", "\xE2\x96\x81");
    std::string scheme = j.value("prepend_scheme", "");
    r->strip_first = scheme.empty() ? j.value("add_prefix_space", true) : scheme != "never";
    return r;
  }
  if (type == "Sequence") {
    auto r = std::make_unique<SequenceDec>();
    for (auto& d : j.at("decoders"))
      if (auto x = make_decoder(d, what)) r->items.push_back(std::move(x));
    return r;
  }
  throw Error(what + ": unsupported decoder type '" + type + "'");
}

}  // namespace vireo
