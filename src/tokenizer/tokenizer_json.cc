#include "tokenizer/tokenizer_json.h"

#include <cstdio>

#include "core/error.h"

namespace vireo {

std::string read_whole_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error(path + ": cannot open");
  std::string s;
  std::fseek(f, 0, SEEK_END);
  long n = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  if (n > 0) {
    s.resize(static_cast<size_t>(n));
    size_t got = std::fread(s.data(), 1, s.size(), f);
    s.resize(got);
  }
  std::fclose(f);
  return s;
}

namespace {

using json = nlohmann::json;

class Sax {
 public:
  explicit Sax(TokenizerJson& out) : out_(out), dom_(out.doc, true) {}

  bool null() { return inside() ? true : dom_.null(); }
  bool boolean(bool v) { return inside() ? true : dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return inside() ? vocab_value(v) : dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) {
    return inside() ? vocab_value(static_cast<int64_t>(v)) : dom_.number_unsigned(v);
  }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return inside() ? true : dom_.number_float(v, s);
  }
  bool string(json::string_t& v) {
    if (!inside()) return dom_.string(v);
    if (mode_ == kMerges) {
      if (frames_.size() == 3) {  // "a b"
        size_t sp = v.find(' ');
        if (sp == std::string::npos || v.find(' ', sp + 1) != std::string::npos) {
          bad_ = "bad merge '" + v + "'";
          return false;
        }
        out_.merges.emplace_back(v.substr(0, sp), v.substr(sp + 1));
      } else {
        pair_.push_back(std::move(v));
      }
    }
    return true;
  }
  bool binary(json::binary_t& v) { return inside() ? true : dom_.binary(v); }
  bool start_object(std::size_t n) {
    bool in = inside();
    frames_.push_back({true, {}});
    update_mode();
    if (in) {
      bad_ = "unexpected object in model vocab/merges";
      return false;
    }
    return dom_.start_object(mode_ == kVocab ? 0 : n);
  }
  bool key(json::string_t& k) {
    if (inside()) {
      key_ = std::move(k);
      return true;
    }
    frames_.back().key = k;
    return dom_.key(k);
  }
  bool end_object() {
    bool own = !inside() || frames_.size() == 3;
    frames_.pop_back();
    update_mode();
    return own ? dom_.end_object() : true;
  }
  bool start_array(std::size_t n) {
    bool in = inside();
    frames_.push_back({false, {}});
    update_mode();
    if (in) {
      pair_.clear();
      return true;
    }
    return dom_.start_array(mode_ == kMerges ? 0 : n);
  }
  bool end_array() {
    bool nested_pair = inside() && frames_.size() == 4;
    bool own = !inside() || frames_.size() == 3;
    frames_.pop_back();
    update_mode();
    if (nested_pair) {  // ["a", "b"]
      if (pair_.size() != 2) {
        bad_ = "bad merge entry";
        return false;
      }
      out_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      pair_.clear();
      return true;
    }
    return own ? dom_.end_array() : true;
  }
  bool parse_error(std::size_t pos, const std::string& tok, const json::exception& e) {
    return dom_.parse_error(pos, tok, e);
  }
  const std::string& bad() const { return bad_; }

 private:
  struct Frame {
    bool object;
    std::string key;  // the last key seen in this object
  };
  enum Mode { kNone, kVocab, kMerges };

  // True while inside model.vocab or model.merges (but not for their own start/end events).
  bool inside() const { return mode_ != kNone && frames_.size() >= 3; }
  void update_mode() {
    mode_ = kNone;
    if (frames_.size() >= 3 && frames_[0].object && frames_[0].key == "model" && frames_[1].object) {
      if (frames_[1].key == "vocab" && frames_[2].object) mode_ = kVocab;
      if (frames_[1].key == "merges" && !frames_[2].object) mode_ = kMerges;
    }
  }
  bool vocab_value(int64_t v) {
    if (mode_ == kVocab && frames_.size() == 3) out_.vocab.emplace_back(std::move(key_), static_cast<int32_t>(v));
    return true;
  }

  TokenizerJson& out_;
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<Frame> frames_;
  Mode mode_ = kNone;
  std::string key_;
  std::vector<std::string> pair_;
  std::string bad_;
};

}  // namespace

TokenizerJson load_tokenizer_json(const std::string& path) {
  std::string text = read_whole_file(path);
  TokenizerJson out;
  Sax sax(out);
  try {
    if (!json::sax_parse(text, &sax) && !sax.bad().empty()) throw Error(path + ": " + sax.bad());
  } catch (const json::exception& e) {
    throw Error(path + ": malformed JSON: " + e.what());
  }
  out.captured = true;
  return out;
}

}  // namespace vireo
