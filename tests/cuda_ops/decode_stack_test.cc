// decode_stack (the persistent kernel of decode_stack.cu) three ways on the same random layers, caches
// and residual:
//   - the kernel (CudaBackend::decode_stack), vs
//   - the CUDA ops in the model's order (Backend::decode_stack on the CUDA backend): the same roundings at
//     the same points, so only summation order differs (bf16 tolerance on the residual, the new K/V
//     entries of every layer's cache), and
//   - the CPU backend's op sequence in F32 (inputs rounded to bf16): a looser tolerance, since the
//     CPU keeps fp32 between ops and the difference grows over the layers.
// Shapes: 1, 3, 5 and 8 tokens, contexts 1 to 5,000 (one page to many key splits), GQA 1 / 4 / 8, head
// dims 64 and 128, Qwen3 (q/k norm before RoPE), Qwen2 (q/k/v bias), HunYuan (norm after RoPE), GPT-J
// and partial RoPE, scattered blocks. Outputs and scratch are poisoned with NaN first.
#include <cstdlib>
#include <numeric>

#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"

namespace vireo::testing {
namespace {

struct StackCase {
  std::vector<int> ctx;  // context length of each sequence, the new token included
  int layers = 2, hidden = 512, inter = 1024, h = 8, hkv = 2, d = 128, rotary = 128;
  bool neox = true, bias = false;
  QkNorm norm = QkNorm::kPerHeadBeforeRope;
};

class DecodeStackTest : public CudaOpsTest {
 protected:
  // One backend's view of the case: weights, caches, step inputs and scratch.
  struct Side {
    DecodeStackParams p;
    std::vector<Tensor> caches;
  };

  void run(const StackCase& c) {
    setenv("VIREO_DECODE_STACK", "1", 1);  // opt-in (read once, at the first decode_stack_supported)
    use_dtype(DType::kBF16);
    std::string desc = "H " + std::to_string(c.h) + " Hkv " + std::to_string(c.hkv) + " D " + std::to_string(c.d) +
                       " hidden " + std::to_string(c.hidden) + " inter " + std::to_string(c.inter) + " rd " +
                       std::to_string(c.rotary) + " norm " + std::to_string(int(c.norm)) + " ctx";
    for (int n : c.ctx) desc += " " + std::to_string(n);
    SCOPED_TRACE(desc);
    const DType bf = DType::kBF16;
    const int T = static_cast<int>(c.ctx.size()), bs = 16, qkv_rows = (c.h + 2 * c.hkv) * c.d;
    int max_blocks = 1, total = 0;
    for (int n : c.ctx) max_blocks = std::max(max_blocks, (n + bs - 1) / bs), total += (n + bs - 1) / bs;
    const int num_blocks = total + 3;
    // Scattered blocks: a random permutation handed out in order.
    std::vector<int> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng_);
    std::vector<int> tables(T * max_blocks, 0), pos(T), slots(T), lens(T), qs(T + 1);
    int next = 0;
    for (int t = 0; t < T; ++t) {
      const int nb = (c.ctx[t] + bs - 1) / bs;
      for (int b = 0; b < nb; ++b) tables[t * max_blocks + b] = perm[next++];
      pos[t] = c.ctx[t] - 1;
      lens[t] = c.ctx[t];
      slots[t] = tables[t * max_blocks + pos[t] / bs] * bs + pos[t] % bs;
      qs[t + 1] = t + 1;
    }
    const int max_pos = *std::max_element(c.ctx.begin(), c.ctx.end()) + 8;
    std::vector<float> rope(static_cast<size_t>(max_pos) * c.rotary);
    for (int p = 0; p < max_pos; ++p)
      for (int i = 0; i < c.rotary / 2; ++i) {
        const float f = p * std::pow(10000.f, -2.f * i / c.rotary);
        rope[p * c.rotary + i] = std::cos(f);
        rope[p * c.rotary + c.rotary / 2 + i] = std::sin(f);
      }

    // Random layers (bf16-rounded), a fresh cache per layer, and the residual.
    struct HostLayer {
      std::vector<float> in_norm, qkv_w, qkv_b, q_norm, k_norm, o_w, post_norm, gate_up_w, down_w, k, v;
    };
    std::vector<HostLayer> hl(c.layers);
    const int64_t cache_n = int64_t{num_blocks} * bs * c.hkv * c.d;
    for (HostLayer& l : hl) {
      l.in_norm = rand_vec(c.hidden, 0.5f, 1.5f, bf);
      l.qkv_w = rand_vec(size_t(qkv_rows) * c.hidden, -1.f, 1.f, bf);
      for (float& x : l.qkv_w) x = round_to(bf, x * 2.f / std::sqrt(float(c.hidden)));
      if (c.bias) l.qkv_b = rand_vec(qkv_rows, -0.5f, 0.5f, bf);
      l.q_norm = rand_vec(c.d, 0.5f, 1.5f, bf);
      l.k_norm = rand_vec(c.d, 0.5f, 1.5f, bf);
      l.o_w = rand_vec(size_t(c.hidden) * c.h * c.d, -1.f, 1.f, bf);
      for (float& x : l.o_w) x = round_to(bf, x / std::sqrt(float(c.h * c.d)));
      l.post_norm = rand_vec(c.hidden, 0.5f, 1.5f, bf);
      l.gate_up_w = rand_vec(size_t(2) * c.inter * c.hidden, -1.f, 1.f, bf);
      for (float& x : l.gate_up_w) x = round_to(bf, x * 2.f / std::sqrt(float(c.hidden)));
      l.down_w = rand_vec(size_t(c.hidden) * c.inter, -1.f, 1.f, bf);
      for (float& x : l.down_w) x = round_to(bf, x / std::sqrt(float(c.inter)));
      l.k = rand_vec(cache_n, -2.f, 2.f, bf);
      l.v = rand_vec(cache_n, -2.f, 2.f, bf);
    }
    const std::vector<float> residual0 = rand_vec(size_t(T) * c.hidden, -1.f, 1.f, bf);

    auto make_side = [&](bool gpu) {
      Side s;
      auto f = [&](const std::vector<float>& v, std::vector<int64_t> shape) {
        if (v.empty()) return Tensor();
        return gpu ? gpu_from(v, std::move(shape), bf) : cpu_f32(v, std::move(shape));
      };
      auto i32 = [&](const std::vector<int>& v, std::vector<int64_t> shape) {
        return gpu ? gpu_i32(v, std::move(shape)) : cpu_i32(v, std::move(shape));
      };
      auto poison = [&](std::vector<int64_t> shape) { return gpu ? gpu_poisoned(std::move(shape), bf) : cpu_poisoned(std::move(shape)); };
      const bool qk = c.norm != QkNorm::kNone;
      for (const HostLayer& l : hl) {
        DecodeStackLayer L;
        L.input_norm = f(l.in_norm, {c.hidden});
        L.qkv_w = f(l.qkv_w, {qkv_rows, c.hidden});
        L.qkv_b = f(l.qkv_b, {qkv_rows});
        if (qk) L.q_norm = f(l.q_norm, {c.d}), L.k_norm = f(l.k_norm, {c.d});
        L.o_w = f(l.o_w, {c.hidden, c.h * c.d});
        L.post_attn_norm = f(l.post_norm, {c.hidden});
        L.gate_up_w = f(l.gate_up_w, {2 * c.inter, c.hidden});
        L.down_w = f(l.down_w, {c.hidden, c.inter});
        L.k_cache = f(l.k, {num_blocks, bs, c.hkv, c.d});
        L.v_cache = f(l.v, {num_blocks, bs, c.hkv, c.d});
        s.caches.push_back(L.k_cache);
        s.caches.push_back(L.v_cache);
        s.p.layers.push_back(L);
      }
      s.p.residual = f(residual0, {T, c.hidden});
      s.p.qkv = poison({T, qkv_rows});
      s.p.q = poison({T, c.h, c.d});
      s.p.attn = poison({T, c.h, c.d});
      s.p.act = poison({T, c.inter});
      s.p.positions = i32(pos, {T});
      s.p.slot_mapping = i32(slots, {T});
      s.p.query_start = i32(qs, {T + 1});
      s.p.seq_lens = i32(lens, {T});
      s.p.block_tables = i32(tables, {T, max_blocks});
      s.p.rope_cos_sin = gpu ? gpu_own(gpu_->upload(cpu_f32(rope, {max_pos, c.rotary}), DType::kF32))
                             : cpu_f32(rope, {max_pos, c.rotary});
      s.p.rotary_dim = c.rotary;
      s.p.neox = c.neox;
      s.p.qk_norm = c.norm;
      s.p.norm_eps = 1e-6f;
      s.p.scale = 1.f / std::sqrt(float(c.d));
      s.p.num_heads = c.h;
      s.p.num_kv_heads = c.hkv;
      s.p.head_dim = c.d;
      s.p.block_size = bs;
      s.p.max_blocks_per_seq = max_blocks;
      s.p.max_seq_len = *std::max_element(c.ctx.begin(), c.ctx.end());
      return s;
    };

    Side kernel = make_side(true), ops = make_side(true), cpu = make_side(false);
    ASSERT_TRUE(gpu_->decode_stack_supported(kernel.p));
    gpu_->decode_stack(kernel.p);        // the persistent kernel
    gpu_->Backend::decode_stack(ops.p);  // the CUDA ops one by one
    cpu_->decode_stack(cpu.p);           // the CPU reference
    // The residual after the last layer. The kernel and the CUDA ops round at the same points but sum in
    // different orders: a 1-ulp difference in a rounded intermediate (|x| ~ 1-4) moves the residual by
    // up to ~0.03 and propagates to later layers, so rows are compared by relative L2 error; a wrong
    // head, position or rounding point gives errors of tens of percent. Against the CPU (fp32 between
    // ops) the kernel must be as close as the CUDA ops are.
    const std::vector<float> got = to_host(kernel.p.residual), ops_r = to_host(ops.p.residual);
    const std::vector<float> cpu_r = to_host(cpu.p.residual);
    auto rel_l2 = [&](const std::vector<float>& a, const std::vector<float>& b, int t) {
      double num = 0, den = 0;
      for (int i = 0; i < c.hidden; ++i) {
        const double x = a[size_t(t) * c.hidden + i], y = b[size_t(t) * c.hidden + i];
        num += (x - y) * (x - y);
        den += y * y;
      }
      return std::isfinite(num) ? std::sqrt(num / std::max(den, 1e-30)) : 1e30;
    };
    for (int t = 0; t < T; ++t) {
      const double vs_ops = rel_l2(got, ops_r, t), vs_cpu = rel_l2(got, cpu_r, t), ops_cpu = rel_l2(ops_r, cpu_r, t);
      EXPECT_LT(vs_ops, 0.02) << "token " << t << ": residual vs the CUDA ops (seed " << seed_ << ")";
      EXPECT_LT(vs_cpu, 1.5 * ops_cpu + 0.004)
          << "token " << t << ": kernel vs CPU " << vs_cpu << ", CUDA ops vs CPU " << ops_cpu << " (seed " << seed_ << ")";
    }
    // The new K / V entries of every layer (the rest of each cache must be untouched): layer 0's from
    // the same residual (bf16 tolerance), later layers' within the propagated difference.
    for (size_t i = 0; i < kernel.caches.size(); ++i) {
      const std::vector<float> kc = to_host(kernel.caches[i]), oc = to_host(ops.caches[i]);
      const std::vector<float>& orig = (i % 2 == 0) ? hl[i / 2].k : hl[i / 2].v;
      const Tolerance tol = i < 2 ? tol_for(DType::kBF16) : Tolerance{0.1f, 0.05f};
      size_t changed = 0, bad = 0;
      for (size_t e = 0; e < kc.size(); ++e) {
        if (kc[e] != orig[e]) ++changed;
        if (!(std::fabs(kc[e] - oc[e]) <= tol.atol + tol.rtol * std::fabs(oc[e]))) ++bad;
      }
      EXPECT_EQ(bad, 0u) << "cache " << i << " differs from the CUDA ops' (seed " << seed_ << ")";
      EXPECT_LE(changed, size_t(T) * c.hkv * c.d) << "cache " << i << ": entries outside the new slots changed";
    }
  }
};

TEST_F(DecodeStackTest, Qwen3ShapeOneToken) {
  StackCase c;
  c.ctx = {300};
  c.layers = 3;
  c.hidden = 1024, c.inter = 3072, c.h = 16, c.hkv = 8;
  run(c);
}

TEST_F(DecodeStackTest, LongContextManySplits) {
  StackCase c;
  c.ctx = {5000};
  run(c);
}

TEST_F(DecodeStackTest, Qwen2BiasGptjPartialRope) {
  StackCase c;
  c.ctx = {1, 17, 64};
  c.hidden = 256, c.inter = 512, c.h = 4, c.hkv = 4, c.d = 64, c.rotary = 32;
  c.neox = false, c.bias = true, c.norm = QkNorm::kNone;
  run(c);
}

TEST_F(DecodeStackTest, EightTokensGqa8NormAfterRope) {
  StackCase c;
  c.ctx = {1, 2, 15, 16, 17, 333, 1000, 40};
  c.h = 16, c.hkv = 2, c.hidden = 512, c.inter = 768;
  c.norm = QkNorm::kPerHeadAfterRope;
  run(c);
}

TEST_F(DecodeStackTest, FiveTokensHeadDim64) {
  StackCase c;
  c.ctx = {7, 100, 129, 2048, 3};
  c.h = 32, c.hkv = 8, c.d = 64, c.rotary = 64, c.hidden = 768, c.inter = 2048;
  c.layers = 4;
  run(c);
}

TEST_F(DecodeStackTest, RepeatedLaunchesResetCounters) {
  // The kernel leaves its barrier and split counters at zero: a second and third launch work too.
  StackCase c;
  c.ctx = {50, 700};
  for (int i = 0; i < 3; ++i) run(c);
}

}  // namespace
}  // namespace vireo::testing
