// Batch-invariant mode (create_backend(..., batch_invariant = true)): every row of linear and
// paged_attention bitwise equal to the same row computed alone, in mixed batches and as a decode row vs
// recomputed inside a prefill chunk; the new kernels against the CPU oracle; the GEMM kernel choice (host).
#include <cstring>
#include <tuple>

#include "backend/cuda/gemm_invariant_plan.h"
#include "cuda_test_util.h"

namespace vireo::testing {
namespace {

using cuda::InvariantGemmKernel;
using cuda::plan_invariant_gemm;

TEST(InvariantGemmPlan, KernelFollowsDtypeKAndAlignmentOnly) {
  for (int64_t n : {1, 5, 16, 17, 300}) {
    EXPECT_EQ(plan_invariant_gemm(n, 4096, 1024, DType::kF32, true).kernel, InvariantGemmKernel::kSimt);
    EXPECT_EQ(plan_invariant_gemm(n, 4096, 1020, DType::kBF16, true).kernel, InvariantGemmKernel::kSimt);
    EXPECT_EQ(plan_invariant_gemm(n, 4096, 1024, DType::kF16, false).kernel, InvariantGemmKernel::kSimt);
    const auto p = plan_invariant_gemm(n, 4096, 1024, DType::kBF16, true);
    EXPECT_NE(p.kernel, InvariantGemmKernel::kSimt);
  }
}

TEST(InvariantGemmPlan, BlockRowsAndGrid) {
  auto p = plan_invariant_gemm(1, 151936, 1024, DType::kBF16, true);
  EXPECT_EQ(p.kernel, InvariantGemmKernel::kMma16);
  EXPECT_EQ(p.block_rows, 16);
  EXPECT_EQ(p.grid_x, 2374);
  EXPECT_EQ(p.grid_y, 1);
  p = plan_invariant_gemm(16, 100, 64, DType::kF16, true);
  EXPECT_EQ(p.kernel, InvariantGemmKernel::kMma16);
  EXPECT_EQ(p.grid_x, 2);
  p = plan_invariant_gemm(17, 64, 64, DType::kBF16, true);
  EXPECT_EQ(p.kernel, InvariantGemmKernel::kMma64);
  EXPECT_EQ(p.grid_y, 1);
  p = plan_invariant_gemm(300, 1024, 3072, DType::kBF16, true);
  EXPECT_EQ(p.block_rows, 64);
  EXPECT_EQ(p.grid_x, 16);
  EXPECT_EQ(p.grid_y, 5);
  p = plan_invariant_gemm(300, 65, 7, DType::kF32, true);
  EXPECT_EQ(p.block_rows, 64);
  EXPECT_EQ(p.grid_x, 2);
  EXPECT_EQ(p.grid_y, 5);
}

class BatchInvariantTest : public CudaOpsTest {
 protected:
  void use_invariant(DType act) {
    use_dtype(act);  // frees what the previous backend owned
    const char* name = act == DType::kBF16 ? "bfloat16" : act == DType::kF16 ? "float16" : "float32";
    gpu_ = create_backend("cuda", name, /*batch_invariant=*/true);
    ASSERT_TRUE(gpu_->batch_invariant());
  }
  std::vector<uint8_t> raw(const Tensor& t) {
    std::vector<uint8_t> b(t.nbytes());
    gpu_->copy_to_host(t, b.data());
    return b;
  }
  // Row r of `got` ([*, width] elements of es bytes) equals row r2 of `want`, bit for bit.
  static bool same_row(const std::vector<uint8_t>& got, int64_t r, const std::vector<uint8_t>& want, int64_t r2,
                       int64_t width, size_t es) {
    return std::memcmp(got.data() + r * width * es, want.data() + r2 * width * es, width * es) == 0;
  }
};

// Every fused form's rows too: LinearParams with input_norm / silu_mul_input / residual.
enum class Form { kPlain, kNorm, kSilu, kResidual };

TEST_F(BatchInvariantTest, LinearRowsIndependentOfBatch) {
  const std::vector<int> ns = {1, 2, 3, 4, 5, 17, 64, 300};
  const int max_n = 300;
  for (DType act : {DType::kBF16, DType::kF16, DType::kF32}) {
    use_invariant(act);
    const size_t es = dtype_size(act);
    for (auto [k, m, bias, form] : std::vector<std::tuple<int, int, bool, Form>>{
             {1024, 768, true, Form::kPlain}, {3072, 1024, false, Form::kPlain}, {520, 1000, true, Form::kPlain},
             {100, 40, true, Form::kPlain},  // K % 8 != 0: the SIMT kernel for every dtype
             {256, 1536, false, Form::kNorm}, {768, 256, true, Form::kSilu}, {256, 192, false, Form::kResidual}}) {
      SCOPED_TRACE(std::string(dtype_name(act)) + " K " + std::to_string(k) + " M " + std::to_string(m) +
                   " form " + std::to_string(int(form)));
      const int in_k = form == Form::kSilu ? 2 * k : k;
      const float wsc = 1.f / std::sqrt(float(k));
      auto x = rand_vec(size_t(max_n) * in_k, -1, 1, act);
      auto w = rand_vec(size_t(m) * k, -wsc, wsc, act);
      auto b = rand_vec(m, -1, 1, act);
      auto nw = rand_vec(k, 0.5f, 1.5f, act);
      auto res = rand_vec(size_t(max_n) * m, -1, 1, act);
      Tensor gw = gpu_from(w, {m, k}, act), gb = bias ? gpu_from(b, {m}, act) : Tensor();
      Tensor gnw = gpu_from(nw, {k}, act);
      auto run = [&](int row0, int n) {
        std::vector<float> xs(x.begin() + size_t(row0) * in_k, x.begin() + size_t(row0 + n) * in_k);
        LinearParams p{gpu_from(xs, {n, in_k}, act), gw, gb, gpu_poisoned({n, m}, act)};
        if (form == Form::kNorm) p.input_norm = gnw;
        if (form == Form::kSilu) p.silu_mul_input = true;
        if (form == Form::kResidual) {
          std::vector<float> rs(res.begin() + size_t(row0) * m, res.begin() + size_t(row0 + n) * m);
          p.residual = gpu_from(rs, {n, m}, act);
        }
        gpu_->linear(p);
        return raw(p.out);
      };
      std::vector<std::vector<uint8_t>> alone(max_n);
      for (int r = 0; r < max_n; ++r) alone[r] = run(r, 1);
      for (int n : ns) {
        const auto got = run(0, n);
        int bad = 0, first = -1;
        for (int r = 0; r < n; ++r)
          if (!same_row(got, r, alone[r], 0, m, es)) first = first < 0 ? r : first, ++bad;
        EXPECT_EQ(bad, 0) << "N " << n << ": " << bad << " rows differ from the row alone (first " << first << ")";
      }
      // The batch of 300 against the CPU oracle (the composed ops on the CPU for the fused forms).
      const auto got = run(0, max_n);
      std::vector<float> gotf(size_t(max_n) * m);
      convert_to_f32(got.data(), act, gotf.data(), gotf.size());
      Tensor ref = cpu_poisoned({max_n, m});
      LinearParams c{cpu_f32(x, {max_n, in_k}), cpu_f32(w, {m, k}), bias ? cpu_f32(b, {m}) : Tensor(), ref};
      if (form == Form::kNorm) c.input_norm = cpu_f32(nw, {k});
      if (form == Form::kSilu) c.silu_mul_input = true;
      if (form == Form::kResidual) c.residual = cpu_f32(res, {max_n, m});
      cpu_->linear(c);
      Tolerance tol = tol_for(act);
      if (act == DType::kF32) tol = {2e-4f, 2e-4f};  // summation order over K differs
      if (form != Form::kPlain && act != DType::kF32) tol = {2 * tol.atol, 2 * tol.rtol};  // intermediate rounding
      expect_close(gotf, to_host(ref), tol, "batch-invariant linear vs CPU");
    }
  }
}

// The fused forms are the unfused op sequence exactly (what a decode step and a prefill step each run).
TEST_F(BatchInvariantTest, FusedFormsEqualUnfusedOps) {
  use_invariant(DType::kBF16);
  const DType act = DType::kBF16;
  const int n = 3, k = 256, m = 384;
  auto x = rand_vec(size_t(n) * 2 * k, -1, 1, act);
  auto w = rand_vec(size_t(m) * k, -0.0625f, 0.0625f, act);
  auto nw = rand_vec(k, 0.5f, 1.5f, act);
  auto res = rand_vec(size_t(n) * m, -1, 1, act);
  Tensor gx = gpu_from(x, {n, 2 * k}, act), gw = gpu_from(w, {m, k}, act), gnw = gpu_from(nw, {k}, act);
  Tensor gx1 = gpu_from(std::vector<float>(x.begin(), x.begin() + n * k), {n, k}, act);
  // input_norm vs rms_norm then linear
  LinearParams f{gx1, gw, Tensor(), gpu_poisoned({n, m}, act)};
  f.input_norm = gnw;
  gpu_->linear(f);
  Tensor normed = gpu_poisoned({n, k}, act), plain = gpu_poisoned({n, m}, act);
  gpu_->rms_norm({gx1, gnw, normed, Tensor(), 1e-6f});
  gpu_->linear({normed, gw, Tensor(), plain});
  EXPECT_EQ(raw(f.out), raw(plain)) << "input_norm";
  // silu_mul_input vs silu_and_mul then linear
  LinearParams s{gx, gw, Tensor(), gpu_poisoned({n, m}, act)};
  s.silu_mul_input = true;
  gpu_->linear(s);
  Tensor act_out = gpu_poisoned({n, k}, act), plain2 = gpu_poisoned({n, m}, act);
  gpu_->silu_and_mul({gx, act_out});
  gpu_->linear({act_out, gw, Tensor(), plain2});
  EXPECT_EQ(raw(s.out), raw(plain2)) << "silu_mul_input";
  // residual vs linear then add
  Tensor r1 = gpu_from(res, {n, m}, act), r2 = gpu_from(res, {n, m}, act);
  LinearParams r{gx1, gw, Tensor(), r1};
  r.residual = r1;
  gpu_->linear(r);
  Tensor y = gpu_poisoned({n, m}, act);
  gpu_->linear({gx1, gw, Tensor(), y});
  gpu_->add({r2, y, r2});
  EXPECT_EQ(raw(r1), raw(r2)) << "residual";
}

// qkv_prepare picks its kernel by T (warp per head up to 1024 tokens, block per token above); in this
// mode one kernel serves every T, so a token's q row and cache rows match the token prepared alone.
TEST_F(BatchInvariantTest, QkvPrepareRowsIndependentOfT) {
  for (QkNorm norm : {QkNorm::kPerHeadBeforeRope, QkNorm::kPerHeadAfterRope, QkNorm::kFullWidth}) {
    SCOPED_TRACE("norm " + std::to_string(int(norm)));
    use_invariant(DType::kBF16);
    const DType act = DType::kBF16;
    const int t = 1100, h = 16, hkv = 8, d = 128, bs = 16, rd = 128, max_pos = 4096;
    const int width = (h + 2 * hkv) * d, num_blocks = (t + bs - 1) / bs;
    auto qkv = rand_vec(size_t(t) * width, -2, 2, act);
    std::vector<int> pos(t), slots(t);
    for (int i = 0; i < t; ++i) pos[i] = rand_int(0, max_pos - 1), slots[i] = i;
    std::vector<float> cs(size_t(max_pos) * rd);
    for (int p = 0; p < max_pos; ++p)
      for (int i = 0; i < rd / 2; ++i) {
        const double f = std::pow(1000000.0, -2.0 * i / rd);
        cs[size_t(p) * rd + i] = float(std::cos(p * f));
        cs[size_t(p) * rd + rd / 2 + i] = float(std::sin(p * f));
      }
    const bool full = norm == QkNorm::kFullWidth;
    auto qn = rand_vec(full ? h * d : d, 0.5f, 1.5f, act), kn = rand_vec(full ? hkv * d : d, 0.5f, 1.5f, act);
    Tensor gcs = gpu_from(cs, {max_pos, rd}, DType::kF32);
    Tensor gqn = gpu_from(qn, {int64_t(qn.size())}, act), gkn = gpu_from(kn, {int64_t(kn.size())}, act);
    auto run = [&](int t0, int n) {
      QkvPrepareParams g;
      g.qkv = gpu_from(std::vector<float>(qkv.begin() + size_t(t0) * width, qkv.begin() + size_t(t0 + n) * width),
                       {n, width}, act);
      g.positions = gpu_i32(std::vector<int>(pos.begin() + t0, pos.begin() + t0 + n), {n});
      g.rope_cos_sin = gcs;
      g.rotary_dim = rd;
      g.qk_norm = norm;
      g.q_norm = gqn;
      g.k_norm = gkn;
      g.q_out = gpu_poisoned({n, h, d}, act);
      g.k_cache = gpu_poisoned({num_blocks, bs, hkv, d}, act);
      g.v_cache = gpu_poisoned({num_blocks, bs, hkv, d}, act);
      g.slot_mapping = gpu_i32(std::vector<int>(slots.begin() + t0, slots.begin() + t0 + n), {n});
      g.num_heads = h;
      g.num_kv_heads = hkv;
      g.head_dim = d;
      g.block_size = bs;
      gpu_->qkv_prepare(g);
      return std::make_tuple(raw(g.q_out), raw(g.k_cache), raw(g.v_cache));
    };
    const auto [q_all, k_all, v_all] = run(0, t);
    for (int i : {0, 1, 517, 1023, 1024, 1099}) {
      const auto [q1, k1, v1] = run(i, 1);
      EXPECT_TRUE(same_row(q_all, i, q1, 0, int64_t(h) * d, 2)) << "q of token " << i;
      EXPECT_TRUE(same_row(k_all, i, k1, i, int64_t(hkv) * d, 2)) << "k of token " << i;
      EXPECT_TRUE(same_row(v_all, i, v1, i, int64_t(hkv) * d, 2)) << "v of token " << i;
    }
  }
}

// ---- attention ----

// A paged cache shared by every call of a test: sequences own scattered blocks; q rows are per position.
struct PagedSeq {
  int kv_len;
  std::vector<int> blocks;
};

class BatchInvariantAttentionTest : public BatchInvariantTest {
 protected:
  int h_ = 0, hkv_ = 0, d_ = 0, bs_ = 16;
  Tensor kc_, vc_;
  std::vector<PagedSeq> seqs_;
  std::vector<std::vector<float>> q_;  // per sequence: [kv_len, H, D], the q of each position
  std::vector<float> kc_host_, vc_host_;

  void setup(DType act, int h, int hkv, int d, const std::vector<int>& lens) {
    use_invariant(act);
    h_ = h, hkv_ = hkv, d_ = d;
    int total = 0;
    for (int l : lens) total += (l + bs_ - 1) / bs_;
    std::vector<int> ids(total + 2);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int(i);
    std::shuffle(ids.begin(), ids.end(), rng_);
    seqs_.clear();
    q_.clear();
    int next = 0;
    for (int l : lens) {
      PagedSeq s{l, {}};
      for (int b = 0; b < (l + bs_ - 1) / bs_; ++b) s.blocks.push_back(ids[next++]);
      seqs_.push_back(s);
      q_.push_back(rand_vec(size_t(l) * h * d, -1.5f, 1.5f, act));
    }
    const int64_t n = int64_t(ids.size()) * bs_ * hkv * d;
    kc_host_ = rand_vec(n, -1.5f, 1.5f, act);
    vc_host_ = rand_vec(n, -1, 1, act);
    kc_ = gpu_from(kc_host_, {int64_t(ids.size()), bs_, hkv, d}, act);
    vc_ = gpu_from(vc_host_, {int64_t(ids.size()), bs_, hkv, d}, act);
  }

  // One call: entry (seq, q_len, ctx) attends the rows of positions [ctx - q_len, ctx) of that sequence
  // with context ctx. Returns the output bytes [T, H, D]; `cpu` (optional) gets the CPU oracle's.
  std::vector<uint8_t> call(const std::vector<std::tuple<int, int, int>>& entries, bool hints,
                            std::vector<float>* cpu = nullptr) {
    const int S = int(entries.size());
    int max_blocks = 1, T = 0, max_q = 0, max_kv = 0;
    for (auto [s, ql, ctx] : entries) {
      max_blocks = std::max(max_blocks, (ctx + bs_ - 1) / bs_);
      T += ql;
      max_q = std::max(max_q, ql);
      max_kv = std::max(max_kv, ctx);
    }
    std::vector<int> qs(1, 0), lens, tables(size_t(S) * max_blocks, 0);
    std::vector<float> q;
    for (int i = 0; i < S; ++i) {
      auto [s, ql, ctx] = entries[i];
      qs.push_back(qs.back() + ql);
      lens.push_back(ctx);
      for (int b = 0; b < (ctx + bs_ - 1) / bs_; ++b) tables[size_t(i) * max_blocks + b] = seqs_[s].blocks[b];
      const size_t row = size_t(h_) * d_;
      q.insert(q.end(), q_[s].begin() + (ctx - ql) * row, q_[s].begin() + ctx * row);
    }
    AttentionParams p;
    p.q = gpu_from(q, {T, h_, d_}, act_);
    p.k_cache = kc_;
    p.v_cache = vc_;
    p.out = gpu_poisoned({T, h_, d_}, act_);
    p.query_start = gpu_i32(qs, {S + 1});
    p.seq_lens = gpu_i32(lens, {S});
    p.block_tables = gpu_i32(tables, {int64_t(S) * max_blocks});
    p.num_seqs = S;
    p.max_blocks_per_seq = max_blocks;
    p.block_size = bs_;
    p.num_heads = h_;
    p.num_kv_heads = hkv_;
    p.head_dim = d_;
    p.scale = 1.0f / std::sqrt(float(d_));
    if (hints) {
      p.max_query_len = max_q;
      p.max_seq_len = max_kv;
    }
    gpu_->paged_attention(p);
    if (cpu) {
      AttentionParams c = p;
      const int64_t nb = kc_.dim(0);
      c.q = cpu_f32(q, {T, h_, d_});
      c.k_cache = cpu_f32(kc_host_, {nb, bs_, hkv_, d_});
      c.v_cache = cpu_f32(vc_host_, {nb, bs_, hkv_, d_});
      c.out = cpu_poisoned({T, h_, d_});
      c.query_start = cpu_i32(qs, {S + 1});
      c.seq_lens = cpu_i32(lens, {S});
      c.block_tables = cpu_i32(tables, {int64_t(S) * max_blocks});
      cpu_->paged_attention(c);
      *cpu = to_host(c.out);
    }
    return raw(p.out);
  }
};

TEST_F(BatchInvariantAttentionTest, RowsEqualAloneInMixedBatchesAndAsPrefill) {
  struct Shape {
    DType act;
    int h, hkv, d;
  };
  for (Shape sh : {Shape{DType::kBF16, 4, 2, 64}, Shape{DType::kBF16, 16, 8, 128}, Shape{DType::kF16, 8, 1, 128},
                   Shape{DType::kBF16, 32, 2, 64}, Shape{DType::kF32, 4, 2, 64}}) {
    SCOPED_TRACE(std::string(dtype_name(sh.act)) + " H " + std::to_string(sh.h) + " Hkv " + std::to_string(sh.hkv) +
                 " D " + std::to_string(sh.d));
    // 0: the sequence under test; 1: a long one; 2, 3: prefill partners.
    setup(sh.act, sh.h, sh.hkv, sh.d, {700, 5000, 300, 129});
    const int64_t row = int64_t(sh.h) * sh.d;
    const size_t es = dtype_size(sh.act);
    const int L = 700;
    // Decode rows of sequence 0 alone, at a few positions (context = position + 1).
    std::vector<int> ctxs = {1, 2, 63, 64, 65, 200, 651, 699, 700};
    std::vector<std::vector<uint8_t>> alone;
    for (int ctx : ctxs) alone.push_back(call({{0, 1, ctx}}, true));
    auto check = [&](const std::vector<uint8_t>& got, int64_t t, size_t i, const std::string& what) {
      EXPECT_TRUE(BatchInvariantTest::same_row(got, t, alone[i], 0, row, es))
          << what << ": context " << ctxs[i] << " differs from the decode row alone";
    };
    const size_t last = ctxs.size() - 1;
    // Inside mixed batches: prefill rows before and after, a long decode, a fresh prefill, no hints.
    for (bool hints : {true, false}) {
      auto got = call({{2, 100, 300}, {0, 1, L}, {1, 1, 5000}, {3, 129, 129}}, hints);
      check(got, 100, last, "mixed batch");
      got = call({{1, 1, 5000}, {3, 64, 129}, {2, 17, 250}, {0, 1, L}}, hints);
      check(got, 1 + 64 + 17, last, "decode after prefills");
      got = call({{0, 1, 65}, {0, 1, 64}, {1, 3, 4000}}, hints);  // the same sequence twice
      check(got, 0, 4, "batch with itself");
      check(got, 1, 3, "batch with itself");
    }
    // Recomputed as part of a prefill chunk (preemption: the output tokens run as prefill rows): every
    // chunk row at context c equals the decode row at context c.
    for (auto [q_len, ctx] : std::vector<std::pair<int, int>>{{700, 700}, {50, 700}, {37, 200}, {65, 65}, {2, 2}}) {
      auto got = call({{1, 5, 4000}, {0, q_len, ctx}}, true);
      for (size_t i = 0; i < ctxs.size(); ++i)
        if (ctxs[i] <= ctx && ctxs[i] > ctx - q_len) check(got, 5 + (ctxs[i] - (ctx - q_len)) - 1, i, "prefill chunk");
    }
    // The new kernel against the CPU oracle on a mixed batch.
    std::vector<float> want;
    const auto got = call({{2, 100, 300}, {0, 1, L}, {1, 1, 5000}, {3, 129, 129}, {0, 40, 640}}, true, &want);
    std::vector<float> gotf(got.size() / es);
    convert_to_f32(got.data(), sh.act, gotf.data(), gotf.size());
    expect_close(gotf, want, tol_for(sh.act), "batch-invariant attention vs CPU");
  }
}

}  // namespace
}  // namespace vireo::testing
