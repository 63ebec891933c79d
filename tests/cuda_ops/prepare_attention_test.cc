// prepare_attention (qkv_prepare fused into the decode attention kernel) three ways on the same inputs,
// once with the cluster decode kernel (attention_decode_cluster.cu, decode_cluster = 16) and once with
// the split decode kernel (decode_cluster = 0, attention_mma.cu):
//   - the fused kernel (launch_prepare_attention with fuse_prepare = 1), vs
//   - the two CUDA ops in turn (qkv_prepare, then paged_attention): attention output and the whole
//     K/V caches must agree bit for bit (same per-head math, same rounding, same attention kernel), and
//   - the CPU backend's qkv_prepare + paged_attention (q and the caches rounded to the activation dtype
//     in between, as the GPU stores them): within the dtype's tolerance.
// Decode shapes: batch 1 at contexts 1..32k (new key in a prefetched tile and in a tile gathered inside
// the pipeline loop), several new tokens per sequence (speculative-decode rows), GQA 1/2/4/8, head dims
// 64 and 128, NeoX / GPT-J / partial RoPE, every per-head norm mode, scattered blocks, f16. Attention
// sinks (GPT-OSS) are never fused: both ways are then the two ops, the attention on a sink-aware kernel.
#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kernels.h"
#include "cuda_test_util.h"

namespace vireo::testing {
namespace {

struct PrepSeq {
  int q_len, kv_len;  // kv_len includes the q_len new tokens
};

struct PrepCase {
  std::vector<PrepSeq> seqs;
  int h = 16, hkv = 8, d = 128, rotary = 128;
  bool neox = true;
  QkNorm norm = QkNorm::kPerHeadBeforeRope;
  bool sinks = false;  // AttentionParams::sinks: random [H] F32
};

class PrepareAttentionTest : public CudaOpsTest {
 protected:
  void run(const PrepCase& c, DType act) {
    for (int cluster : {16, 0}) {  // cluster size 16 forced; 0: the split kernel
      decode_cluster_ = cluster;
      run_one(c, act);
    }
  }

  int decode_cluster_ = -1;

  void run_one(const PrepCase& c, DType act) {
    use_dtype(act);
    std::string desc = std::string(dtype_name(act)) + " H " + std::to_string(c.h) + " Hkv " + std::to_string(c.hkv) +
                       " D " + std::to_string(c.d) + " rd " + std::to_string(c.rotary) + " norm " +
                       std::to_string(int(c.norm)) + " cluster " + std::to_string(decode_cluster_) + " sinks " +
                       std::to_string(c.sinks) + " seqs";
    for (auto& s : c.seqs) desc += " " + std::to_string(s.q_len) + "/" + std::to_string(s.kv_len);
    SCOPED_TRACE(desc);
    const int S = int(c.seqs.size()), bs = 16, width = (c.h + 2 * c.hkv) * c.d;
    int total_blocks = 0, max_blocks = 1, T = 0, max_q = 0, max_kv = 0;
    std::vector<int> qs(S + 1, 0), lens(S);
    for (int s = 0; s < S; ++s) {
      const int nb = (c.seqs[s].kv_len + bs - 1) / bs;
      total_blocks += nb;
      max_blocks = std::max(max_blocks, nb + 1);
      qs[s + 1] = qs[s] + c.seqs[s].q_len;
      lens[s] = c.seqs[s].kv_len;
      max_q = std::max(max_q, c.seqs[s].q_len);
      max_kv = std::max(max_kv, c.seqs[s].kv_len);
    }
    T = qs[S];
    const int num_blocks = total_blocks + 3;
    std::vector<int> ids(num_blocks);
    for (int i = 0; i < num_blocks; ++i) ids[i] = i;
    std::shuffle(ids.begin(), ids.end(), rng_);
    std::vector<int> tables(size_t(S) * max_blocks, -1);
    int next = 0;
    for (int s = 0; s < S; ++s)
      for (int b = 0; b < (c.seqs[s].kv_len + bs - 1) / bs; ++b) tables[size_t(s) * max_blocks + b] = ids[next++];
    // The new tokens: positions kv_len - q_len + j, slots from the block table.
    std::vector<int> pos(T), slots(T);
    for (int s = 0; s < S; ++s)
      for (int j = 0; j < c.seqs[s].q_len; ++j) {
        const int p = c.seqs[s].kv_len - c.seqs[s].q_len + j;
        pos[qs[s] + j] = p;
        slots[qs[s] + j] = tables[size_t(s) * max_blocks + p / bs] * bs + p % bs;
      }
    const int max_pos = max_kv + 1;
    const int rd = std::max(c.rotary, 2);
    std::vector<float> cs(size_t(max_pos) * rd);
    for (int p = 0; p < max_pos && c.rotary > 0; ++p)
      for (int i = 0; i < c.rotary / 2; ++i) {
        const double inv_freq = std::pow(10000.0, -2.0 * i / c.rotary);
        cs[size_t(p) * c.rotary + i] = float(std::cos(p * inv_freq));
        cs[size_t(p) * c.rotary + c.rotary / 2 + i] = float(std::sin(p * inv_freq));
      }
    auto qkv = rand_vec(size_t(T) * width, -2, 2, act);
    auto qn = rand_vec(c.d, 0.5f, 1.5f, act), kn = rand_vec(c.d, 0.5f, 1.5f, act);
    const int64_t cache_n = int64_t(num_blocks) * bs * c.hkv * c.d;
    auto kc = rand_vec(cache_n, -1.5f, 1.5f, act), vc = rand_vec(cache_n, -1, 1, act);
    std::vector<int64_t> cache_shape{num_blocks, bs, c.hkv, c.d};
    // Sinks in the scores' range, every fifth head's above any score (it takes most of the weight).
    std::vector<float> sinks;
    if (c.sinks) {
      sinks = rand_vec(c.h, -1.f, 3.f, DType::kF32);
      for (int h = 2; h < c.h; h += 5) sinks[h] = rand_vec(1, 5.f, 9.f, DType::kF32)[0];
    }

    // GPU params; `fused` selects the op, each run on fresh caches.
    auto gpu_run = [&](bool fused, std::vector<float>* out, std::vector<float>* k_after, std::vector<float>* v_after) {
      QkvPrepareParams qp;
      qp.qkv = gpu_from(qkv, {T, width}, act);
      qp.positions = gpu_i32(pos, {T});
      qp.rope_cos_sin = gpu_from(cs, {max_pos, rd}, DType::kF32);
      qp.rotary_dim = c.rotary;
      qp.neox = c.neox;
      qp.qk_norm = c.norm;
      if (c.norm != QkNorm::kNone) {
        qp.q_norm = gpu_from(qn, {c.d}, act);
        qp.k_norm = gpu_from(kn, {c.d}, act);
      }
      qp.norm_eps = 1e-6f;
      qp.q_out = gpu_poisoned({T, c.h, c.d}, act);
      qp.k_cache = gpu_from(kc, cache_shape, act);
      qp.v_cache = gpu_from(vc, cache_shape, act);
      qp.slot_mapping = gpu_i32(slots, {T});
      qp.num_heads = c.h;
      qp.num_kv_heads = c.hkv;
      qp.head_dim = c.d;
      qp.block_size = bs;
      AttentionParams ap;
      ap.q = qp.q_out;
      ap.k_cache = qp.k_cache;
      ap.v_cache = qp.v_cache;
      ap.out = gpu_poisoned({T, c.h, c.d}, act);
      ap.query_start = gpu_i32(qs, {S + 1});
      ap.seq_lens = gpu_i32(lens, {S});
      ap.block_tables = gpu_i32(tables, {S, max_blocks});
      ap.num_seqs = S;
      ap.max_blocks_per_seq = max_blocks;
      ap.block_size = bs;
      ap.num_heads = c.h;
      ap.num_kv_heads = c.hkv;
      ap.head_dim = c.d;
      ap.scale = 1.f / std::sqrt(float(c.d));
      ap.max_query_len = max_q;
      ap.max_seq_len = max_kv;
      if (c.sinks) ap.sinks = gpu_from(sinks, {c.h}, DType::kF32);
      // fused: the fused kernel whatever VIREO_FUSED_ATTENTION says; else the two ops in turn (same
      // attention kernel choice).
      cuda::DeviceInfo dev;
      cudaDeviceGetAttribute(&dev.num_sms, cudaDevAttrMultiProcessorCount, 0);
      cuda::AttentionTuning tuning;
      tuning.fuse_prepare = fused ? 1 : 0;
      tuning.decode_cluster = decode_cluster_;
      auto ws = [&](size_t bytes) { return gpu_own(gpu_->alloc({int64_t(bytes)}, DType::kU8)).data; };
      cuda::launch_prepare_attention(qp, ap, ws, dev, static_cast<cuda::CudaBackend*>(gpu_.get())->stream(), tuning);
      *out = to_host(ap.out);
      *k_after = to_host(qp.k_cache);
      *v_after = to_host(qp.v_cache);
    };
    std::vector<float> fo, fk, fv, so, sk, sv;
    gpu_run(true, &fo, &fk, &fv);
    gpu_run(false, &so, &sk, &sv);
    EXPECT_EQ(fk, sk) << "k cache: fused != separate ops";
    EXPECT_EQ(fv, sv) << "v cache: fused != separate ops";
    EXPECT_EQ(fo, so) << "attention out: fused != separate ops";
    // Twice: no races, counters left at zero.
    std::vector<float> fo2, fk2, fv2;
    gpu_run(true, &fo2, &fk2, &fv2);
    EXPECT_EQ(fo, fo2) << "fused: second run differs";

    // CPU reference.
    QkvPrepareParams rq;
    rq.qkv = cpu_f32(qkv, {T, width});
    rq.positions = cpu_i32(pos, {T});
    rq.rope_cos_sin = cpu_f32(cs, {max_pos, rd});
    rq.rotary_dim = c.rotary;
    rq.neox = c.neox;
    rq.qk_norm = c.norm;
    if (c.norm != QkNorm::kNone) {
      rq.q_norm = cpu_f32(qn, {c.d});
      rq.k_norm = cpu_f32(kn, {c.d});
    }
    rq.norm_eps = 1e-6f;
    rq.q_out = cpu_poisoned({T, c.h, c.d});
    rq.k_cache = cpu_f32(kc, cache_shape);
    rq.v_cache = cpu_f32(vc, cache_shape);
    rq.slot_mapping = cpu_i32(slots, {T});
    rq.num_heads = c.h;
    rq.num_kv_heads = c.hkv;
    rq.head_dim = c.d;
    rq.block_size = bs;
    cpu_->qkv_prepare(rq);
    auto rounded = [&](const Tensor& t, std::vector<int64_t> shape) {
      std::vector<float> v = to_host(t);
      for (float& x : v) x = round_to(act, x);
      return cpu_f32(v, std::move(shape));
    };
    AttentionParams ra;
    ra.q = rounded(rq.q_out, {T, c.h, c.d});
    ra.k_cache = rounded(rq.k_cache, cache_shape);
    ra.v_cache = rounded(rq.v_cache, cache_shape);
    ra.out = cpu_poisoned({T, c.h, c.d});
    ra.query_start = cpu_i32(qs, {S + 1});
    ra.seq_lens = cpu_i32(lens, {S});
    ra.block_tables = cpu_i32(tables, {S, max_blocks});
    ra.num_seqs = S;
    ra.max_blocks_per_seq = max_blocks;
    ra.block_size = bs;
    ra.num_heads = c.h;
    ra.num_kv_heads = c.hkv;
    ra.head_dim = c.d;
    ra.scale = 1.f / std::sqrt(float(c.d));
    if (c.sinks) ra.sinks = cpu_f32(sinks, {c.h});
    cpu_->paged_attention(ra);
    expect_close(fk, to_host(ra.k_cache), tol_for(act), "k cache vs CPU");
    expect_close(fv, to_host(ra.v_cache), tol_for(act), "v cache vs CPU");
    expect_close(fo, to_host(ra.out), tol_for(act), "attention out vs CPU");
  }
};

TEST_F(PrepareAttentionTest, BatchOneContexts) {
  for (int kv : {1, 2, 15, 16, 17, 63, 64, 65, 129, 1000, 1024, 4097})
    run({{{1, kv}}}, DType::kBF16);
}

// Long contexts: several tiles per split, so the new key sits in a tile the pipeline gathers inside its
// loop (from the cache row this block wrote) rather than in a prefetched one.
TEST_F(PrepareAttentionTest, BatchOneLongContexts) {
  for (int kv : {8191, 32768}) run({{{1, kv}}}, DType::kBF16);
}

TEST_F(PrepareAttentionTest, BatchedDecode) {
  run({{{1, 300}, {1, 1}, {1, 17}, {1, 2048}, {1, 64}, {1, 999}, {1, 5000}}}, DType::kBF16);
  PrepCase c{{{1, 40}, {1, 700}}};
  c.h = 32;
  c.hkv = 8;  // Qwen3-8B's ratio
  run(c, DType::kBF16);
}

TEST_F(PrepareAttentionTest, SeveralNewTokensPerSequence) {
  PrepCase c{{{3, 70}, {2, 2}, {4, 513}, {16, 200}}};
  c.h = 8;
  c.hkv = 8;  // G = 1: up to 16 new tokens a sequence stay decode-shaped
  run(c, DType::kBF16);
  PrepCase g4{{{4, 64}, {2, 1030}, {1, 5}}};
  g4.h = 16;
  g4.hkv = 4;
  run(g4, DType::kBF16);
}

TEST_F(PrepareAttentionTest, GqaHeadDimsRopeAndNorms) {
  PrepCase a{{{1, 333}, {2, 90}}};
  a.h = 16;
  a.hkv = 2;  // G = 8
  a.d = 64;
  a.rotary = 64;
  a.neox = false;
  a.norm = QkNorm::kPerHeadAfterRope;
  run(a, DType::kBF16);
  PrepCase b{{{1, 129}, {1, 4000}}};
  b.rotary = 64;  // partial rotary
  b.norm = QkNorm::kNone;
  run(b, DType::kBF16);
  PrepCase n{{{1, 77}}};
  n.rotary = 0;  // no RoPE
  run(n, DType::kBF16);
}

TEST_F(PrepareAttentionTest, Float16) {
  run({{{1, 1500}, {2, 33}}}, DType::kF16);
}

// Not decode-shaped (a prefill row) or a full-width norm: the two ops run in turn, same results.
TEST_F(PrepareAttentionTest, FallsBackOutsideDecodeShape) {
  PrepCase p{{{40, 100}, {1, 50}}};
  run(p, DType::kBF16);
}

// Attention sinks (GPT-OSS: 64 query heads on 8 KV heads, head dim 64, no q/k norm; and 16 / 8 at 128):
// the fused and cluster kernels have none, so with the fusion and cluster size 16 asked for, the call
// must still run qkv_prepare and then the routed paged_attention (the wide kernel: key splits at batch 1
// over 3000 keys), bitwise equal to the two ops and close to the CPU. Decode rows, several new tokens,
// a prefill row; bf16 and f16.
TEST_F(PrepareAttentionTest, SinksRunTheTwoOps) {
  PrepCase a{{{1, 3000}}};
  a.h = 64;
  a.hkv = 8;
  a.d = 64;
  a.rotary = 64;
  a.norm = QkNorm::kNone;
  a.sinks = true;
  run(a, DType::kBF16);
  a.seqs = {{1, 300}, {2, 17}, {1, 1}, {1, 1025}};
  run(a, DType::kBF16);
  a.seqs = {{40, 100}, {1, 50}};
  run(a, DType::kBF16);
  PrepCase b{{{1, 1500}, {3, 70}}};
  b.sinks = true;
  run(b, DType::kBF16);
  run(b, DType::kF16);
}

}  // namespace
}  // namespace vireo::testing
