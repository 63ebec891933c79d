// Test doubles for the engine: a tiny character tokenizer and a model whose logits are a
// deterministic function of the whole context it reads back from its own paged KV cache, so
// any mistake in slot mapping, block tables, prefix caching or preemption changes the output.
#pragma once
#include <atomic>
#include <chrono>
#include <thread>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace vireo::testing {

constexpr int kFakeVocab = 64;
constexpr int32_t kFakeEos = 63;

// ids 0..25 'a'..'z', 26..51 'A'..'Z', 52 ' ', 53..62 '0'..'9', 63 "<eos>" (special).
class FakeTokenizer : public Tokenizer {
 public:
  static std::string piece(int32_t id) {
    if (id < 26) return std::string(1, static_cast<char>('a' + id));
    if (id < 52) return std::string(1, static_cast<char>('A' + id - 26));
    if (id == 52) return " ";
    if (id < 63) return std::string(1, static_cast<char>('0' + id - 53));
    if (id == 63) return "<eos>";
    return "";
  }
  std::vector<int32_t> encode(std::string_view text, bool) const override {
    std::vector<int32_t> out;
    for (char c : text) {
      if (c >= 'a' && c <= 'z') out.push_back(c - 'a');
      else if (c >= 'A' && c <= 'Z') out.push_back(26 + c - 'A');
      else if (c == ' ') out.push_back(52);
      else if (c >= '0' && c <= '9') out.push_back(53 + c - '0');
    }
    return out;
  }
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override {
    std::string s;
    for (int32_t id : ids) {
      if (id < 0 || id >= kFakeVocab) continue;
      if (skip_special && id == kFakeEos) continue;
      s += piece(id);
    }
    return s;
  }
  int32_t vocab_size() const override { return kFakeVocab; }
  std::optional<int32_t> token_to_id(std::string_view) const override { return std::nullopt; }
  std::string id_to_token(int32_t id) const override { return piece(id); }
  bool is_special(int32_t id) const override { return id == kFakeEos; }
  std::optional<std::string> bos_token() const override { return std::nullopt; }
  std::optional<std::string> eos_token() const override { return "<eos>"; }
  std::optional<int32_t> bos_token_id() const override { return std::nullopt; }
  std::optional<int32_t> eos_token_id() const override { return kFakeEos; }
  const std::string& chat_template() const override { return empty_; }

 private:
  std::string empty_;
};

inline uint64_t fake_mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Logits over kFakeVocab for a context (what the fake model computes, for direct checks).
inline void fake_logits(const std::vector<int32_t>& context, float* out) {
  uint64_t h = 1469598103934665603ULL;
  for (int32_t t : context) h = fake_mix(h ^ static_cast<uint32_t>(t));
  for (int v = 0; v < kFakeVocab; ++v) {
    uint64_t r = fake_mix(h ^ (0x1000ULL + v));
    out[v] = static_cast<float>(r >> 40) / static_cast<float>(1u << 24) * 8.0f - 4.0f;
  }
}

struct FakeModelStats {
  std::atomic<int> num_forwards{0};
  std::atomic<int> max_tokens_per_step{0};
  std::atomic<int> max_seqs_per_step{0};
};

class FakeModel : public Model {
 public:
  explicit FakeModel(FakeModelStats* stats = nullptr, int fail_on_forward = -1,
                     std::chrono::milliseconds delay = std::chrono::milliseconds(0))
      : stats_(stats), fail_on_forward_(fail_on_forward), delay_(delay) {
    cfg_.architecture = "FakeForCausalLM";
    cfg_.vocab_size = kFakeVocab;
    cfg_.max_position_embeddings = 512;
    cfg_.eos_token_ids = {kFakeEos};
  }
  const ModelConfig& config() const override { return cfg_; }
  Backend& backend() override { throw Error("FakeModel has no backend"); }
  KvCache allocate_kv_cache(int num_blocks, int block_size) override {
    KvCache kv;
    kv.num_blocks = num_blocks;
    kv.block_size = block_size;
    cache_.assign(static_cast<size_t>(num_blocks) * block_size, -1);  // -1: never written
    return kv;
  }
  void free_kv_cache(KvCache&) override { cache_.clear(); }
  size_t kv_block_bytes(int block_size) const override { return static_cast<size_t>(block_size) * 8; }

  void forward(const StepInput& in, KvCache& kv, std::vector<float>& logits) override {
    int n = stats_ ? stats_->num_forwards++ : 0;
    if (n == fail_on_forward_) throw Error("fake model failure");
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    const int T = static_cast<int>(in.token_ids.size());
    const int S = static_cast<int>(in.seq_lens.size());
    if (stats_) {
      stats_->max_tokens_per_step = std::max<int>(stats_->max_tokens_per_step, T);
      stats_->max_seqs_per_step = std::max<int>(stats_->max_seqs_per_step, S);
    }
    // Write K/V (here: the token id) for every new token first, as a real model does per layer.
    for (int t = 0; t < T; ++t) cache_.at(in.slot_mapping[t]) = in.token_ids[t];
    // Row -> sequence.
    std::vector<int> seq_of(T);
    for (int s = 0; s < S; ++s)
      for (int t = in.query_start[s]; t < in.query_start[s + 1]; ++t) seq_of[t] = s;
    logits.assign(in.logits_indices.size() * kFakeVocab, 0.0f);
    for (size_t r = 0; r < in.logits_indices.size(); ++r) {
      int t = in.logits_indices[r];
      int s = seq_of[t];
      int pos = in.positions[t];
      std::vector<int32_t> ctx;
      for (int p = 0; p <= pos; ++p) {
        int32_t block = in.block_tables[static_cast<size_t>(s) * in.max_blocks_per_seq + p / kv.block_size];
        if (block == 0) throw Error("fake model: null block in use");
        int32_t v = cache_.at(static_cast<size_t>(block) * kv.block_size + p % kv.block_size);
        if (v < 0) throw Error("fake model: read an unwritten KV slot");
        ctx.push_back(v);
      }
      fake_logits(ctx, logits.data() + r * kFakeVocab);
    }
  }

 private:
  ModelConfig cfg_;
  std::vector<int32_t> cache_;
  FakeModelStats* stats_;
  int fail_on_forward_;
  std::chrono::milliseconds delay_;
};

// Greedy continuation computed straight from fake_logits (the oracle).
inline std::vector<int32_t> fake_greedy(std::vector<int32_t> ctx, int n) {
  std::vector<int32_t> out;
  float lg[kFakeVocab];
  for (int i = 0; i < n; ++i) {
    fake_logits(ctx, lg);
    int best = 0;
    for (int v = 1; v < kFakeVocab; ++v)
      if (lg[v] > lg[best]) best = v;
    out.push_back(best);
    ctx.push_back(best);
  }
  return out;
}

}  // namespace vireo::testing
