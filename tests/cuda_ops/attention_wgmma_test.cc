// The wgmma prefill attention kernels (AttentionTuning::prefill_wgmma = 1): the warp-specialised one
// (attention_wgmma_ws.cuh; its variants by environment, one process each: VIREO_ATTN_WS_BN=64|128,
// VIREO_ATTN_WS_FLAGS=0..3, VIREO_ATTN_WS_QTMA=0) or, with VIREO_ATTN_WS=0, attention_wgmma.cuh's, vs the
// CPU backend: bf16 and f16, head dims 64 and 128, GQA 1/2/4/8/16/32 (Q by TMA) and 3/6/7 (Q by cp.async),
// one sequence of 17..8192 tokens (lengths on and off the 16- and 64-token grids), several sequences in
// one batch (decode rows beside them go to the mma.sync decode kernel), chunked prefill over a cached
// prefix (with key splits and the merge kernel), scattered and contiguous block tables, 16- and 32-token
// pages. Outputs NaN-poisoned; a second launch must agree bit for bit.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kernels.h"
#include "cuda_test_util.h"

namespace vireo::testing {
namespace {

struct WgSeq {
  int q_len, kv_len;
};

struct WgCase {
  std::vector<WgSeq> seqs;
  int h, hkv, d;
  bool scatter = true;
  int block_size = 16;
};

class AttentionWgmmaTest : public CudaOpsTest {
 protected:
  void attend(const AttentionParams& p) {
    cuda::DeviceInfo dev;
    cudaDeviceGetAttribute(&dev.num_sms, cudaDevAttrMultiProcessorCount, 0);
    cuda::AttentionTuning tuning;
    tuning.prefill_wgmma = 1;
    auto ws = [&](size_t bytes) { return gpu_own(gpu_->alloc({int64_t(bytes)}, DType::kU8)).data; };
    cuda::launch_paged_attention(p, ws, dev, static_cast<cuda::CudaBackend*>(gpu_.get())->stream(), tuning);
  }

  void run(const WgCase& c) {
    const DType act = act_;
    std::string desc = std::string(dtype_name(act)) + " H " + std::to_string(c.h) + " Hkv " + std::to_string(c.hkv) +
                       " D " + std::to_string(c.d) + " bs " + std::to_string(c.block_size) +
                       (c.scatter ? " scattered" : " contiguous") + " seqs";
    for (auto& s : c.seqs) desc += " " + std::to_string(s.q_len) + "/" + std::to_string(s.kv_len);
    SCOPED_TRACE(desc);
    const int S = int(c.seqs.size()), bs = c.block_size;
    int total_blocks = 0, max_blocks = 1, max_q = 0, max_kv = 0;
    std::vector<int> qs(S + 1, 0), lens(S);
    for (int s = 0; s < S; ++s) {
      const int nb = (c.seqs[s].kv_len + bs - 1) / bs;
      total_blocks += nb;
      max_blocks = std::max(max_blocks, nb + 1);  // a spare column: tables wider than needed
      qs[s + 1] = qs[s] + c.seqs[s].q_len;
      lens[s] = c.seqs[s].kv_len;
      max_q = std::max(max_q, c.seqs[s].q_len);
      max_kv = std::max(max_kv, c.seqs[s].kv_len);
    }
    const int T = qs[S];
    const int num_blocks = total_blocks + 3;
    std::vector<int> ids(num_blocks);
    for (int i = 0; i < num_blocks; ++i) ids[i] = i;
    if (c.scatter) std::shuffle(ids.begin(), ids.end(), rng_);
    std::vector<int> tables(size_t(S) * max_blocks, -1);  // unused entries: -1, never read
    int next = 0;
    for (int s = 0; s < S; ++s)
      for (int b = 0; b < (c.seqs[s].kv_len + bs - 1) / bs; ++b) tables[size_t(s) * max_blocks + b] = ids[next++];
    const int64_t cache_n = int64_t(num_blocks) * bs * c.hkv * c.d;
    auto kc = rand_vec(cache_n, -1.5f, 1.5f, act), vc = rand_vec(cache_n, -1, 1, act);
    auto q = rand_vec(size_t(T) * c.h * c.d, -1.5f, 1.5f, act);
    std::vector<int64_t> cache_shape{num_blocks, bs, c.hkv, c.d};

    AttentionParams g;
    g.q = gpu_from(q, {T, c.h, c.d}, act);
    g.k_cache = gpu_from(kc, cache_shape, act);
    g.v_cache = gpu_from(vc, cache_shape, act);
    g.out = gpu_poisoned({T, c.h, c.d}, act);
    g.query_start = gpu_i32(qs, {S + 1});
    g.seq_lens = gpu_i32(lens, {S});
    g.block_tables = gpu_i32(tables, {S, max_blocks});
    g.num_seqs = S;
    g.max_blocks_per_seq = max_blocks;
    g.block_size = bs;
    g.num_heads = c.h;
    g.num_kv_heads = c.hkv;
    g.head_dim = c.d;
    g.scale = 1.f / std::sqrt(float(c.d));
    g.max_query_len = max_q;
    g.max_seq_len = max_kv;
    attend(g);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

    AttentionParams r = g;
    r.q = cpu_f32(q, {T, c.h, c.d});
    r.k_cache = cpu_f32(kc, cache_shape);
    r.v_cache = cpu_f32(vc, cache_shape);
    r.out = cpu_poisoned({T, c.h, c.d});
    r.query_start = cpu_i32(qs, {S + 1});
    r.seq_lens = cpu_i32(lens, {S});
    r.block_tables = cpu_i32(tables, {S, max_blocks});
    cpu_->paged_attention(r);
    expect_close(to_host(g.out), to_host(r.out), tol_for(act), "attention out");
    std::vector<float> first = to_host(g.out);
    g.out = gpu_poisoned({T, c.h, c.d}, act);
    attend(g);
    EXPECT_EQ(first, to_host(g.out)) << "second run differs";
  }
};

// GQA 1 / 4 / 8 at both head dims; lengths below, on and past the 16-key page and 64-key tile grids,
// and past one 128-row block (partial last blocks, a warpgroup whose rows are all past the end).
TEST_F(AttentionWgmmaTest, SingleSequenceBf16) {
  use_dtype(DType::kBF16);
  for (auto [h, hkv] : std::vector<std::pair<int, int>>{{8, 8}, {16, 4}, {32, 4}})
    for (int d : {64, 128})
      for (int len : {17, 63, 64, 65, 100, 129, 300, 1000, 2049}) run({{{len, len}}, h, hkv, d});
}

TEST_F(AttentionWgmmaTest, SingleSequenceF16) {
  use_dtype(DType::kF16);
  for (auto [h, hkv] : std::vector<std::pair<int, int>>{{8, 8}, {16, 4}, {32, 4}})
    for (int d : {64, 128})
      for (int len : {17, 65, 300, 1000}) run({{{len, len}}, h, hkv, d});
}

// 8k tokens (the benchmark's length) and 4k + odd tails, fewer heads to keep the CPU oracle quick.
TEST_F(AttentionWgmmaTest, LongSequence) {
  use_dtype(DType::kBF16);
  run({{{8192, 8192}}, 8, 2, 128});
  run({{{4100, 4100}}, 8, 1, 64});
  use_dtype(DType::kF16);
  run({{{8192, 8192}}, 4, 1, 128});
}

TEST_F(AttentionWgmmaTest, SeveralSequences) {
  use_dtype(DType::kBF16);
  run({{{300, 300}, {17, 17}, {1000, 1000}, {65, 65}}, 32, 8, 128});
  run({{{129, 129}, {64, 64}, {777, 777}}, 16, 2, 64});
  // Decode rows (q_len * G <= 16) beside prefill rows: both shapes in one call.
  run({{{1, 513}, {77, 77}, {40, 1000}, {1, 1}, {2, 300}, {3, 18}, {129, 2000}}, 32, 8, 128});
  use_dtype(DType::kF16);
  run({{{300, 300}, {17, 17}, {1000, 1000}}, 32, 8, 64});
}

// q_len < seq_len: queries at positions kv_len - q_len + i attend to the cached prefix and themselves.
// Few rows on a long context plan prefill key splits (partials in ws_o / ws_ml, the merge kernel).
TEST_F(AttentionWgmmaTest, ChunkedPrefill) {
  use_dtype(DType::kBF16);
  run({{{100, 700}}, 32, 8, 128});
  run({{{64, 4160}, {3, 50}}, 16, 2, 64});
  run({{{513, 3000}}, 16, 4, 128});
  run({{{40, 12000}}, 8, 1, 128});   // key splits
  run({{{200, 9000}}, 8, 8, 64});    // key splits, MHA
  use_dtype(DType::kF16);
  run({{{100, 700}, {250, 2500}}, 32, 8, 128});
  run({{{40, 12000}}, 8, 1, 64});
}

// The warp-specialised kernel loads Q by TMA where the GQA group divides 64 (groups 1-64 by powers of two:
// boxes of 64 / group tokens) and by cp.async otherwise (groups 3, 6, 7: Qwen2.5-7B's 28 / 4), several
// sequences so that a row tile's rows past its sequence are the next sequence's tokens, and one past the
// tensor's end (zero-filled).
TEST_F(AttentionWgmmaTest, GqaGroupsBothQPaths) {
  use_dtype(DType::kBF16);
  run({{{300, 300}, {17, 17}, {129, 700}}, 16, 1, 128});  // group 16
  run({{{200, 200}, {33, 33}}, 32, 1, 64});              // group 32
  run({{{300, 300}, {17, 17}, {129, 700}}, 12, 4, 128});  // group 3
  run({{{250, 250}, {65, 400}}, 28, 4, 128});             // group 7
  run({{{100, 100}, {40, 40}}, 12, 2, 64});               // group 6
}

TEST_F(AttentionWgmmaTest, BlockTables) {
  use_dtype(DType::kBF16);
  run({{{300, 300}, {100, 1000}}, 16, 4, 128, /*scatter=*/false});
  run({{{300, 300}, {100, 1000}}, 16, 4, 128, /*scatter=*/true, /*block_size=*/32});
  run({{{250, 250}}, 8, 8, 64, /*scatter=*/true, /*block_size=*/32});
}

}  // namespace
}  // namespace vireo::testing
