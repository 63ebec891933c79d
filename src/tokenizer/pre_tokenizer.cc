#include "tokenizer/pre_tokenizer.h"

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"

namespace vireo {

namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Span {
  size_t b, e;
  bool match;
};

// tokenizers' split_off_delimiter: turn (range, is_match) spans into the pieces to keep.
std::vector<Span> apply_behavior(std::vector<Span> m, Behavior behavior) {
  std::vector<Span> out;
  switch (behavior) {
    case Behavior::kIsolated:
      return m;
    case Behavior::kRemoved:
      for (auto& s : m)
        if (!s.match) out.push_back(s);
      return out;
    case Behavior::kMergedWithPrevious: {
      bool prev_match = false;
      for (auto& s : m) {
        if (s.match && !prev_match && !out.empty()) {
          out.back().e = s.e;
        } else {
          out.push_back({s.b, s.e, false});
        }
        prev_match = s.match;
      }
      return out;
    }
    case Behavior::kMergedWithNext: {
      bool prev_match = false;
      for (auto it = m.rbegin(); it != m.rend(); ++it) {
        if (it->match && !prev_match && !out.empty()) {
          out.back().b = it->b;
        } else {
          out.push_back({it->b, it->e, false});
        }
        prev_match = it->match;
      }
      return {out.rbegin(), out.rend()};
    }
    case Behavior::kContiguous: {
      bool prev_match = false;
      for (auto& s : m) {
        if (s.match == prev_match && !out.empty()) {
          out.back().e = s.e;
        } else {
          out.push_back({s.b, s.e, false});
        }
        prev_match = s.match;
      }
      return out;
    }
  }
  return out;
}

// Match spans of a literal or regex, with the gaps between them, covering all of `text`.
std::vector<Span> find_spans(const std::string& text, const std::string& literal, const Regex* re) {
  std::vector<Span> out;
  if (text.empty()) return {{0, 0, false}};
  size_t prev = 0;
  auto add = [&](size_t b, size_t e) {
    if (prev != b) out.push_back({prev, b, false});
    out.push_back({b, e, true});
    prev = e;
  };
  if (re) {
    for (auto [b, e] : re->find_all(text)) add(b, e);
  } else if (!literal.empty()) {
    for (size_t f = text.find(literal); f != std::string::npos; f = text.find(literal, prev)) add(f, f + literal.size());
  }
  if (prev != text.size()) out.push_back({prev, text.size(), false});
  return out;
}

void split_pieces(std::vector<PreToken>& pieces, const std::string& literal, const Regex* re, Behavior behavior,
                  bool invert) {
  std::vector<PreToken> out;
  out.reserve(pieces.size());
  for (auto& p : pieces) {
    auto spans = find_spans(p.text, literal, re);
    if (invert)
      for (auto& s : spans) s.match = !s.match;
    for (auto& s : apply_behavior(std::move(spans), behavior)) {
      if (s.e > s.b) out.push_back({p.text.substr(s.b, s.e - s.b), p.at_start && s.b == 0});
    }
  }
  pieces = std::move(out);
}

Behavior parse_behavior(const std::string& s, const std::string& what) {
  if (s == "Removed") return Behavior::kRemoved;
  if (s == "Isolated") return Behavior::kIsolated;
  if (s == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::kMergedWithNext;
  if (s == "Contiguous") return Behavior::kContiguous;
  throw Error(what + ": unknown Split behavior '" + s + "'");
}

struct Split : PreTokenizer {
  std::string literal;
  std::unique_ptr<Regex> re;
  Behavior behavior = Behavior::kIsolated;
  bool invert = false;
  void apply(std::vector<PreToken>& pieces) const override {
    split_pieces(pieces, literal, re.get(), behavior, invert);
  }
};

// GPT-2's pattern, used by ByteLevel when use_regex is true.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct ByteLevel : PreTokenizer {
  bool add_prefix_space = false;
  std::unique_ptr<Regex> re;  // set when use_regex
  void apply(std::vector<PreToken>& pieces) const override {
    if (add_prefix_space)
      for (auto& p : pieces)
        if (p.text.empty() || p.text[0] != ' ') p.text.insert(0, " ");
    if (re) split_pieces(pieces, "", re.get(), Behavior::kIsolated, false);
    const auto& map = ByteLevelMap::get();
    for (auto& p : pieces) p.text = map.encode(p.text);
  }
};

struct Metaspace : PreTokenizer {
  std::string replacement;
  enum { kAlways, kFirst, kNever } scheme = kAlways;
  bool split = true;
  void apply(std::vector<PreToken>& pieces) const override {
    for (auto& p : pieces) {
      std::string t;
      t.reserve(p.text.size() + replacement.size());
      for (char c : p.text) {
        if (c == ' ') {
          t += replacement;
        } else {
          t += c;
        }
      }
      bool starts = t.compare(0, replacement.size(), replacement) == 0;
      if (!starts && (scheme == kAlways || (scheme == kFirst && p.at_start))) t.insert(0, replacement);
      p.text = std::move(t);
    }
    if (split) split_pieces(pieces, replacement, nullptr, Behavior::kMergedWithNext, false);
  }
};

struct SequencePre : PreTokenizer {
  std::vector<std::unique_ptr<PreTokenizer>> items;
  void apply(std::vector<PreToken>& pieces) const override {
    for (auto& p : items) p->apply(pieces);
  }
};

}  // namespace

std::unique_ptr<PreTokenizer> make_metaspace(const std::string& replacement, const std::string& prepend_scheme,
                                             bool split) {
  auto r = std::make_unique<Metaspace>();
  r->replacement = replacement;
  r->scheme = prepend_scheme == "first" ? Metaspace::kFirst : prepend_scheme == "never" ? Metaspace::kNever
                                                                                         : Metaspace::kAlways;
  r->split = split;
  return r;
}

namespace {

// One punctuation character as tokenizers' is_punctuation has it: Unicode P* or ASCII punctuation (which also
// counts $ + < = > ^ ` | ~, Unicode symbols).
constexpr const char* kPunctuationChar = R"([\p{P}!-/:-@\[-`{-~])";

std::unique_ptr<PreTokenizer> make_split(const char* regex, Behavior behavior, bool invert, const std::string& what) {
  auto r = std::make_unique<Split>();
  r->re = std::make_unique<Regex>(regex, what);
  r->behavior = behavior;
  r->invert = invert;
  return r;
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j, const std::string& what) {
  if (j.is_null()) return nullptr;
  std::string type = j.at("type").get<std::string>();
  if (type == "Split") {
    auto r = std::make_unique<Split>();
    read_pattern(j.at("pattern"), what, r->literal, r->re);
    r->behavior = parse_behavior(j.at("behavior").get<std::string>(), what);
    r->invert = j.value("invert", false);
    return r;
  }
  // HF's fixed splitters, each a Split of a pattern:
  if (type == "Digits")  // StarCoder / Granite: digits isolated, one by one or in runs
    return make_split(j.value("individual_digits", false) ? "\\p{N}" : "\\p{N}+", Behavior::kIsolated, false, what);
  if (type == "WhitespaceSplit") return make_split("\\s+", Behavior::kRemoved, false, what);
  if (type == "Whitespace") return make_split("\\w+|[^\\w\\s]+", Behavior::kRemoved, true, what);  // keeps the matches
  if (type == "Punctuation")
    return make_split(kPunctuationChar, parse_behavior(j.value("behavior", "Isolated"), what), false, what);
  if (type == "CharDelimiterSplit") {
    auto r = std::make_unique<Split>();
    r->literal = j.at("delimiter").get<std::string>();
    if (r->literal.empty()) throw Error(what + ": CharDelimiterSplit needs a delimiter");
    r->behavior = Behavior::kRemoved;
    return r;
  }
  if (type == "BertPreTokenizer") {  // whitespace removed, then every punctuation character apart
    auto r = std::make_unique<SequencePre>();
    r->items.push_back(make_split("\\s+", Behavior::kRemoved, false, what));
    r->items.push_back(make_split(kPunctuationChar, Behavior::kIsolated, false, what));
    return r;
  }
  if (type == "ByteLevel") {
    auto r = std::make_unique<ByteLevel>();
    r->add_prefix_space = j.value("add_prefix_space", false);
    if (j.value("use_regex", true)) r->re = std::make_unique<Regex>(kGpt2Pattern, what);
    return r;
  }
  if (type == "Metaspace") {
    std::string scheme = j.value("prepend_scheme", "");
    if (scheme.empty()) scheme = j.value("add_prefix_space", true) ? "always" : "never";
    return make_metaspace(j.value("replacement", "\xE2\x96\x81"), scheme, j.value("split", true));
  }
  if (type == "Sequence") {
    auto r = std::make_unique<SequencePre>();
    for (auto& p : j.at("pretokenizers"))
      if (auto x = make_pre_tokenizer(p, what)) r->items.push_back(std::move(x));
    return r;
  }
  throw Error(what + ": unsupported pre_tokenizer type '" + type + "'");
}

}  // namespace vireo
