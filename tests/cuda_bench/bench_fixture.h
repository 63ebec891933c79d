// What the kernel benchmarks of this folder share: a fixture that skips unless VIREO_KERNEL_BENCH=1 and a
// GPU is there, holds a bf16 CUDA backend and its stream, frees the tensors it hands out, fills them from
// a multiplicative hash, makes paged-attention inputs, and times back-to-back calls between CUDA events.
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/fp8.h"

namespace vireo::bench {

// The comma-separated integers of environment variable `name` (e.g. row counts to bench), else `fallback`.
inline std::vector<int64_t> env_int_list(const char* name, std::vector<int64_t> fallback) {
  const char* e = std::getenv(name);
  if (!e) return fallback;
  std::vector<int64_t> out;
  for (std::string v = e; !v.empty();) {
    const size_t c = v.find(',');
    out.push_back(std::stoll(v.substr(0, c)));
    v = c == std::string::npos ? "" : v.substr(c + 1);
  }
  return out;
}

// Median over `reps` timings of `inner` back-to-back calls of f on `stream` (after `warmup` calls), per
// call, in microseconds. Several calls per event pair keep the host's launch latency out of short
// kernels. f gets the call's index: 0 .. warmup - 1 for the warm-up, then i * inner + j.
inline double median_us(cudaStream_t stream, const std::function<void(int)>& f, int reps, int inner, int warmup) {
  for (int i = 0; i < warmup; ++i) f(i);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> ts;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(a, stream);
    for (int j = 0; j < inner; ++j) f(i * inner + j);
    cudaEventRecord(b, stream);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    ts.push_back(ms * 1e3 / inner);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

class CudaBenchFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* on = std::getenv("VIREO_KERNEL_BENCH");
    if (!on || std::string(on) != "1") GTEST_SKIP() << "set VIREO_KERNEL_BENCH=1 to run the kernel benchmarks";
    if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
    be_ = create_backend("cuda", "bfloat16");
    stream_ = static_cast<cuda::CudaBackend*>(be_.get())->stream();
  }
  void TearDown() override {
    for (auto& t : owned_) be_->free(t);
  }
  // n values in [0, 1) from a multiplicative hash, not a full RNG (large tensors fill fast), salted by
  // the number of tensors handed out so far.
  std::vector<float> hash_unit(int64_t n) const {
    std::vector<float> h(n);
    const uint32_t salt = 0x9e3779b9u * static_cast<uint32_t>(owned_.size() + 1);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t v = (static_cast<uint32_t>(i) ^ salt) * 2654435761u;
      h[i] = static_cast<float>(v >> 8) * (1.0f / 16777216.0f);
    }
    return h;
  }
  // A device tensor of dtype dt with values spread over [lo, hi) (never zeros unless lo == hi == 0).
  Tensor rand_t(std::vector<int64_t> shape, float lo = -1, float hi = 1, DType dt = DType::kBF16) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    std::vector<float> h = hash_unit(n);
    for (float& x : h) x = lo + (hi - lo) * x;
    return own(be_->upload(Tensor(h.data(), DType::kF32, shape), dt));
  }
  Tensor ints(const std::vector<int>& v) {
    return own(be_->upload(Tensor(const_cast<int*>(v.data()), DType::kI32, {int64_t(v.size())}), DType::kI32));
  }
  Tensor dev(std::vector<int64_t> shape, DType dt) { return own(be_->alloc(std::move(shape), dt)); }

  // An F8_E4M3 weight [m, k] with row scales, from hashed values in [-0.02, 0.02).
  Tensor fp8_weight(int64_t m, int64_t k) {
    std::vector<float> h = hash_unit(m * k);
    for (float& v : h) v = 0.04f * v - 0.02f;
    std::vector<uint8_t> q(h.size());
    std::vector<float> s(m);
    fp8_quantize_rows(h.data(), m, k, q.data(), s.data());
    Tensor scale = dev({m}, DType::kF32), w = dev({m, k}, DType::kF8E4M3);
    be_->copy_from_host(s.data(), scale);
    be_->copy_from_host(q.data(), w);
    w.row_scale = scale.ptr<float>();
    return w;
  }
  // Random E4M3 codes of values in [-1.5, 1.5] (never NaN): an FP8 KV cache (--kv-cache-dtype fp8).
  Tensor fp8_codes(std::vector<int64_t> shape) {
    Tensor t = be_->alloc(std::move(shape), DType::kF8E4M3);
    owned_.push_back(t);
    std::vector<uint8_t> codes(t.nbytes());
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1.5f, 1.5f);
    for (auto& c : codes) c = f32_to_fp8_e4m3(u(rng));
    be_->copy_from_host(codes.data(), t);
    return t;
  }

  // AttentionParams over sequences (q_len, kv_len), block size 16, each sequence's blocks drawn from one
  // shuffled pool; q, caches (E4M3 codes with fp8) and out random. Prefill-shape sequences (q_len x group
  // > 16) are listed as the engine lists them (AttentionParams::prefill_seqs) when list_prefill.
  AttentionParams paged_params(const std::vector<std::pair<int, int>>& seqs, int h, int hkv, int d, bool fp8,
                               bool list_prefill) {
    const int bs = 16, n = static_cast<int>(seqs.size());
    int max_blocks = 0, t = 0, max_q = 0, max_kv = 0;
    for (auto [q, kv] : seqs) {
      max_blocks = std::max(max_blocks, (kv + bs - 1) / bs);
      t += q, max_q = std::max(max_q, q), max_kv = std::max(max_kv, kv);
    }
    const int num_blocks = n * max_blocks;
    std::vector<int> qs(n + 1, 0), lens(n), tables(size_t(n) * max_blocks), prefill;
    for (int s = 0; s < n; ++s) {
      qs[s + 1] = qs[s] + seqs[s].first;
      lens[s] = seqs[s].second;
      if (seqs[s].first * (h / hkv) > 16) prefill.push_back(s);
    }
    std::vector<int> perm(num_blocks);
    for (int i = 0; i < num_blocks; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), std::mt19937(7));
    for (size_t i = 0; i < tables.size(); ++i) tables[i] = perm[i];
    AttentionParams p;
    p.q = rand_t({t, h, d});
    p.k_cache = fp8 ? fp8_codes({num_blocks, bs, hkv, d}) : rand_t({num_blocks, bs, hkv, d});
    p.v_cache = fp8 ? fp8_codes({num_blocks, bs, hkv, d}) : rand_t({num_blocks, bs, hkv, d});
    p.out = rand_t({t, h, d});
    p.query_start = ints(qs);
    p.seq_lens = ints(lens);
    p.block_tables = ints(tables);
    p.num_seqs = n;
    p.max_blocks_per_seq = max_blocks;
    p.block_size = bs;
    p.num_heads = h;
    p.num_kv_heads = hkv;
    p.head_dim = d;
    p.scale = 1.f / std::sqrt(float(d));
    p.max_query_len = max_q;
    p.max_seq_len = max_kv;
    if (list_prefill) {
      p.num_prefill_seqs = static_cast<int>(prefill.size());
      if (!prefill.empty()) p.prefill_seqs = ints(prefill);
    }
    return p;
  }

  // Freed in TearDown.
  Tensor own(Tensor t) {
    owned_.push_back(t);
    return t;
  }

  std::unique_ptr<Backend> be_;
  cudaStream_t stream_ = nullptr;
  std::vector<Tensor> owned_;
};

}  // namespace vireo::bench
