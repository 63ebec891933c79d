// gated_delta_net (gated_delta_net.cu) and sigmoid_gate vs the CPU backend (cpu_gated_delta_net.cc).
// The CPU op rounds where the spec says "round" to proj's dtype, so it gets proj / out / conv_state in
// the GPU's activation dtype (host tensors of bf16 / f16 bytes) and does the same roundings; the rest
// differs only in fp32 summation order (the GPU also regroups the recurrence: o = decay * S^T q +
// (k.q) delta). Fresh random inputs and random prior states (both backends start from the same
// bytes), NaN-poisoned outputs, every element of out, and afterwards every slot of ssm_state and
// conv_state (conv_state holds copies of proj values: compared exactly).
// Cases: Hk 2 / Hv 4 dk = dv = 16; dk 16 / dv 24; Hk 16 / Hv 16 and Hk 16 / Hv 32 at dk = dv = 128
// (Qwen3.5-9B-like); Hk 1 / Hv 2 dk 18 / dv 20 with a 3-tap conv; decode (T = 1 for 8 sequences), a mixed batch (3 sequences, chunks of 1..70 rows,
// restarts and continuations) with a padding sequence (slot -1), chunked (two calls) == one call
// bit for bit, and a CUDA graph replay == the eager op.
#include <cstring>
#include <numeric>

#include "cuda_test_util.h"

namespace vireo::testing {
namespace {

struct GdnShape {
  int Hk, Hv, dk, dv, L;
  int C() const { return 2 * Hk * dk + Hv * dv; }
  int P() const { return C() + Hv * dv + 2 * Hv; }
  std::string name() const {
    return "Hk " + std::to_string(Hk) + " Hv " + std::to_string(Hv) + " dk " + std::to_string(dk) + " dv " +
           std::to_string(dv) + " L " + std::to_string(L);
  }
};

// One sequence of a step: rows, context length after the step, state slot.
struct Seq {
  int q_len, seq_len, slot;
};

class GatedDeltaNetTest : public CudaOpsTest {
 protected:
  static constexpr int kSlots = 12;

  // Host tensor of dtype t holding v (rounded to t), bytes kept by the fixture.
  Tensor host_t(const std::vector<float>& v, std::vector<int64_t> shape, DType t) {
    keep_b_.emplace_back(v.size() * dtype_size(t));
    auto& b = keep_b_.back();
    for (size_t i = 0; i < v.size(); ++i) {
      if (t == DType::kF32) std::memcpy(&b[i * 4], &v[i], 4);
      else {
        const uint16_t h = t == DType::kBF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
        std::memcpy(&b[i * 2], &h, 2);
      }
    }
    return Tensor(b.data(), t, std::move(shape));
  }
  static std::vector<uint8_t> bytes_of(const Tensor& t) {
    const auto* p = static_cast<const uint8_t*>(t.data);
    return std::vector<uint8_t>(p, p + t.nbytes());
  }
  std::vector<uint8_t> gpu_bytes(const Tensor& t) {
    std::vector<uint8_t> b(t.nbytes());
    gpu_->copy_to_host(t, b.data());
    return b;
  }

  // A layer's weights and both backends' states (same initial contents).
  struct Layer {
    GdnShape s;
    std::vector<float> conv_w, A_log, dt_bias, norm_w;
    Tensor c_conv_state, c_ssm;  // CPU (host, act dtype / F32)
    Tensor g_conv_state, g_ssm;  // GPU
    Tensor g_conv_w, g_A_log, g_dt_bias, g_norm_w;
  };
  Layer make_layer(const GdnShape& s) {
    Layer l{s};
    const DType a = act_;
    l.conv_w = rand_vec(size_t(s.C()) * s.L, -0.6f, 0.6f, a);
    l.A_log = rand_vec(s.Hv, -0.5f, 1.5f, DType::kF32);
    l.dt_bias = rand_vec(s.Hv, -1.f, 1.f, DType::kF32);
    l.norm_w = rand_vec(s.dv, 0.7f, 1.3f, a);
    const auto cs = rand_vec(size_t(kSlots) * (s.L - 1) * s.C(), -1.f, 1.f, a);
    const auto ss = rand_vec(size_t(kSlots) * s.Hv * s.dk * s.dv, -0.3f, 0.3f, DType::kF32);
    l.c_conv_state = host_t(cs, {kSlots, s.L - 1, s.C()}, a);
    l.c_ssm = host_t(ss, {kSlots, s.Hv, s.dk, s.dv}, DType::kF32);
    l.g_conv_state = gpu_from(cs, {kSlots, s.L - 1, s.C()}, a);
    l.g_ssm = gpu_from(ss, {kSlots, s.Hv, s.dk, s.dv}, DType::kF32);
    l.g_conv_w = gpu_from(l.conv_w, {s.C(), s.L}, a);
    l.g_A_log = gpu_from(l.A_log, {s.Hv}, DType::kF32);
    l.g_dt_bias = gpu_from(l.dt_bias, {s.Hv}, DType::kF32);
    l.g_norm_w = gpu_from(l.norm_w, {s.dv}, a);
    return l;
  }

  struct StepTensors {
    std::vector<int> qs, lens, slots;
    int T = 0;
  };
  static StepTensors meta(const std::vector<Seq>& seqs) {
    StepTensors m;
    m.qs.push_back(0);
    for (const Seq& q : seqs) {
      m.qs.push_back(m.qs.back() + q.q_len);
      m.lens.push_back(q.seq_len);
      m.slots.push_back(q.slot);
    }
    m.T = m.qs.back();
    return m;
  }
  GatedDeltaNetParams gpu_params(Layer& l, const StepTensors& m, Tensor proj, Tensor out) {
    GatedDeltaNetParams p;
    p.proj = proj;
    p.conv_w = l.g_conv_w;
    p.A_log = l.g_A_log;
    p.dt_bias = l.g_dt_bias;
    p.norm_w = l.g_norm_w;
    p.conv_state = l.g_conv_state;
    p.ssm_state = l.g_ssm;
    p.out = out;
    p.query_start = gpu_i32(m.qs, {int64_t(m.qs.size())});
    p.seq_lens = gpu_i32(m.lens, {int64_t(m.lens.size())});
    p.state_slots = gpu_i32(m.slots, {int64_t(m.slots.size())});
    p.num_seqs = int(m.lens.size());
    p.num_k_heads = l.s.Hk, p.num_v_heads = l.s.Hv, p.head_k_dim = l.s.dk, p.head_v_dim = l.s.dv;
    p.conv_kernel = l.s.L;
    p.norm_eps = 1e-6f;
    return p;
  }
  std::vector<float> rand_proj(const GdnShape& s, int T) { return rand_vec(size_t(T) * s.P(), -1.5f, 1.5f, act_); }

  Tolerance out_tol() const {
    // bf16 / f16: a rounding that flips one ulp at one of the five rounding points moves an output by
    // about an ulp of the result; fp32: summation order over up to 70-row recurrences.
    return act_ == DType::kBF16 ? Tolerance{3e-2f, 3e-2f} : act_ == DType::kF16 ? Tolerance{5e-3f, 5e-3f}
                                                                                : Tolerance{5e-4f, 5e-4f};
  }
  Tolerance state_tol() const {
    return act_ == DType::kBF16 ? Tolerance{2e-2f, 2e-2f} : act_ == DType::kF16 ? Tolerance{4e-3f, 4e-3f}
                                                                                : Tolerance{2e-4f, 2e-4f};
  }

  // One step on both backends from the same proj; out, then both states (all slots) compared.
  void step_both(Layer& l, const std::vector<Seq>& seqs, const std::string& what) {
    SCOPED_TRACE(what);
    const StepTensors m = meta(seqs);
    const GdnShape& s = l.s;
    const auto proj = rand_proj(s, m.T);
    GatedDeltaNetParams cp;
    cp.proj = host_t(proj, {m.T, s.P()}, act_);
    cp.conv_w = cpu_f32(l.conv_w, {s.C(), s.L});
    cp.A_log = cpu_f32(l.A_log, {s.Hv});
    cp.dt_bias = cpu_f32(l.dt_bias, {s.Hv});
    cp.norm_w = cpu_f32(l.norm_w, {s.dv});
    cp.conv_state = l.c_conv_state;
    cp.ssm_state = l.c_ssm;
    cp.out = host_t(std::vector<float>(size_t(m.T) * s.Hv * s.dv, std::nanf("")), {m.T, s.Hv * s.dv}, act_);
    cp.query_start = cpu_i32(m.qs, {int64_t(m.qs.size())});
    cp.seq_lens = cpu_i32(m.lens, {int64_t(m.lens.size())});
    cp.state_slots = cpu_i32(m.slots, {int64_t(m.slots.size())});
    cp.num_seqs = int(seqs.size());
    cp.num_k_heads = s.Hk, cp.num_v_heads = s.Hv, cp.head_k_dim = s.dk, cp.head_v_dim = s.dv, cp.conv_kernel = s.L;
    cp.norm_eps = 1e-6f;
    cpu_->gated_delta_net(cp);

    Tensor gout = gpu_poisoned({m.T, s.Hv * s.dv}, act_);
    gpu_->gated_delta_net(gpu_params(l, m, gpu_from(proj, {m.T, s.P()}, act_), gout));

    const auto got = to_host(gout), want = to_host(cp.out);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_FALSE(std::isnan(got[i])) << "out element " << i << " not written";
    expect_close(got, want, out_tol(), "gated_delta_net out");
    expect_close(to_host(l.g_ssm), to_host(l.c_ssm), state_tol(), "gated_delta_net ssm_state");
    EXPECT_TRUE(gpu_bytes(l.g_conv_state) == bytes_of(l.c_conv_state))
        << "conv_state differs from the CPU's (seed " << seed_ << ")";
  }

  std::deque<std::vector<uint8_t>> keep_b_;
};

// The last: dk % 4 != 0 (the scalar-row kernel), conv kernel 3.
const GdnShape kShapes[] = {{2, 4, 16, 16, 4}, {2, 4, 16, 24, 4}, {16, 16, 128, 128, 4}, {16, 32, 128, 128, 4},
                            {1, 2, 18, 20, 3}};

// Decode: 8 sequences of one row each, scattered slots, contexts of 2..3000 (prior state used), one
// of them a fresh request (context 1: both states restart from zero).
TEST_F(GatedDeltaNetTest, DecodeEightSequences) {
  for (DType act : {DType::kF32, DType::kBF16}) {
    use_dtype(act);
    for (const GdnShape& s : kShapes) {
      Layer l = make_layer(s);
      const std::vector<Seq> seqs = {{1, 17, 3}, {1, 2, 0}, {1, 3000, 11}, {1, 1, 5},
                                     {1, 64, 7}, {1, 5, 1}, {1, 9, 10},    {1, 129, 4}};
      step_both(l, seqs, std::string(dtype_name(act)) + " " + s.name() + " decode step 1");
      std::vector<Seq> next = seqs;
      for (Seq& q : next) ++q.seq_len;
      step_both(l, next, std::string(dtype_name(act)) + " " + s.name() + " decode step 2");
    }
  }
}

// Mixed batches: three sequences with prefill chunks of 1..70 rows (a restart at position 0, a
// continuation with prior state, a decode row), and a padding sequence (slot -1, zero rows, no state
// touched); then a second step continuing them with other chunk lengths, then random lengths.
TEST_F(GatedDeltaNetTest, MixedBatchChunksAndPadding) {
  for (DType act : {DType::kF32, DType::kBF16, DType::kF16}) {
    use_dtype(act);
    for (const GdnShape& s : kShapes) {
      if (act == DType::kF16 && s.dk == 128) continue;
      Layer l = make_layer(s);
      const std::string tag = std::string(dtype_name(act)) + " " + s.name();
      step_both(l, {{70, 70, 2}, {1, 40, 6}, {33, 100, 9}, {2, 2, -1}}, tag + " step 1");
      step_both(l, {{5, 75, 2}, {17, 57, 6}, {1, 101, 9}}, tag + " step 2");
      step_both(l, {{1, 1, 8}, {2, 2, -1}, {8, 83, 2}, {9, 66, 6}}, tag + " step 3 (tile-sized chunks)");
      std::vector<Seq> r;
      int len2 = 83, len6 = 66;
      const int a = rand_int(1, 70), b = rand_int(1, 70);
      r.push_back({a, len2 += a, 2});
      r.push_back({b, len6 += b, 6});
      r.push_back({rand_int(1, 3), 3, 0});  // context 3 with q_len <= 3: restart when q_len == 3
      r.back().seq_len = std::max(r.back().seq_len, r.back().q_len);
      step_both(l, r, tag + " step 4 (random lengths)");
    }
  }
}

// A sequence as one call == the same rows in two calls (state carried through the slots), bit for
// bit on the GPU, and both match the CPU.
TEST_F(GatedDeltaNetTest, ChunkedEqualsOneCall) {
  for (DType act : {DType::kF32, DType::kBF16}) {
    use_dtype(act);
    for (const GdnShape& s : {kShapes[1], kShapes[3]}) {
      SCOPED_TRACE(std::string(dtype_name(act)) + " " + s.name());
      Layer l = make_layer(s);
      const int n = 53, first = 21;
      const auto proj = rand_proj(s, n);
      // One call on slot 1 (restart), two calls on slot 4 (restart, then continuation).
      Tensor whole = gpu_poisoned({n, s.Hv * s.dv}, act);
      gpu_->gated_delta_net(gpu_params(l, meta({{n, n, 1}}), gpu_from(proj, {n, s.P()}, act), whole));
      const std::vector<float> pa(proj.begin(), proj.begin() + size_t(first) * s.P());
      const std::vector<float> pb(proj.begin() + size_t(first) * s.P(), proj.end());
      Tensor o1 = gpu_poisoned({first, s.Hv * s.dv}, act), o2 = gpu_poisoned({n - first, s.Hv * s.dv}, act);
      gpu_->gated_delta_net(gpu_params(l, meta({{first, first, 4}}), gpu_from(pa, {first, s.P()}, act), o1));
      gpu_->gated_delta_net(gpu_params(l, meta({{n - first, n, 4}}), gpu_from(pb, {n - first, s.P()}, act), o2));
      auto a = gpu_bytes(whole), b1 = gpu_bytes(o1), b2 = gpu_bytes(o2);
      b1.insert(b1.end(), b2.begin(), b2.end());
      EXPECT_TRUE(a == b1) << "two calls differ from one call";
      const auto ssm = gpu_bytes(l.g_ssm), cs = gpu_bytes(l.g_conv_state);
      const size_t ssm_slot = size_t(s.Hv) * s.dk * s.dv * 4, cs_slot = size_t(s.L - 1) * s.C() * dtype_size(act);
      EXPECT_TRUE(std::equal(ssm.begin() + ssm_slot, ssm.begin() + 2 * ssm_slot, ssm.begin() + 4 * ssm_slot))
          << "final ssm_state differs";
      EXPECT_TRUE(std::equal(cs.begin() + cs_slot, cs.begin() + 2 * cs_slot, cs.begin() + 4 * cs_slot))
          << "final conv_state differs";
      // And against the CPU over the same rows (one call).
      GatedDeltaNetParams cp;
      cp.proj = host_t(proj, {n, s.P()}, act);
      cp.conv_w = cpu_f32(l.conv_w, {s.C(), s.L});
      cp.A_log = cpu_f32(l.A_log, {s.Hv});
      cp.dt_bias = cpu_f32(l.dt_bias, {s.Hv});
      cp.norm_w = cpu_f32(l.norm_w, {s.dv});
      cp.conv_state = l.c_conv_state;
      cp.ssm_state = l.c_ssm;
      cp.out = host_t(std::vector<float>(size_t(n) * s.Hv * s.dv, std::nanf("")), {n, s.Hv * s.dv}, act);
      const std::vector<int> qs{0, n}, lens{n}, slots{1};
      cp.query_start = cpu_i32(qs, {2});
      cp.seq_lens = cpu_i32(lens, {1});
      cp.state_slots = cpu_i32(slots, {1});
      cp.num_seqs = 1;
      cp.num_k_heads = s.Hk, cp.num_v_heads = s.Hv, cp.head_k_dim = s.dk, cp.head_v_dim = s.dv, cp.conv_kernel = s.L;
      cpu_->gated_delta_net(cp);
      expect_close(to_host(whole), to_host(cp.out), out_tol(), "one call vs CPU");
    }
  }
}

// Captured in a CUDA graph (decode step of 4 sequences, one padding): replays with new proj rows and
// states restored give the eager op's bits.
TEST_F(GatedDeltaNetTest, GraphReplayEqualsEager) {
  use_dtype(DType::kBF16);
  if (!gpu_->supports_graphs()) GTEST_SKIP() << "no graphs";
  const GdnShape s = kShapes[3];
  Layer l = make_layer(s);
  const StepTensors m = meta({{1, 10, 0}, {1, 1, 3}, {1, 7, -1}, {1, 300, 9}});
  const Tensor proj = gpu_from(rand_proj(s, m.T), {m.T, s.P()}, DType::kBF16);
  Tensor gout = gpu_poisoned({m.T, s.Hv * s.dv}, DType::kBF16);
  const GatedDeltaNetParams p = gpu_params(l, m, proj, gout);
  const auto ssm0 = gpu_bytes(l.g_ssm), cs0 = gpu_bytes(l.g_conv_state);
  gpu_->begin_capture();
  try {
    gpu_->gated_delta_net(p);
  } catch (...) {
    gpu_->abort_capture();
    throw;
  }
  const int graph = gpu_->end_capture();
  for (int rep = 0; rep < 2; ++rep) {
    Tensor proj_in = p.proj;
    gpu_->copy(gpu_from(rand_proj(s, m.T), {m.T, s.P()}, DType::kBF16), proj_in);
    gpu_->copy_from_host(ssm0.data(), l.g_ssm);
    gpu_->copy_from_host(cs0.data(), l.g_conv_state);
    gpu_->replay_graph(graph);
    const auto g_out = gpu_bytes(gout), g_ssm = gpu_bytes(l.g_ssm), g_cs = gpu_bytes(l.g_conv_state);
    gpu_->copy_from_host(ssm0.data(), l.g_ssm);
    gpu_->copy_from_host(cs0.data(), l.g_conv_state);
    Tensor eout = gpu_poisoned({m.T, s.Hv * s.dv}, DType::kBF16);
    GatedDeltaNetParams e = p;
    e.out = eout;
    gpu_->gated_delta_net(e);
    EXPECT_TRUE(gpu_bytes(eout) == g_out) << "replay " << rep << ": out differs from the eager op";
    EXPECT_TRUE(gpu_bytes(l.g_ssm) == g_ssm) << "replay " << rep << ": ssm_state differs";
    EXPECT_TRUE(gpu_bytes(l.g_conv_state) == g_cs) << "replay " << rep << ": conv_state differs";
  }
  gpu_->destroy_graph(graph);
}

TEST_F(GatedDeltaNetTest, RejectsBadShapes) {
  use_dtype(DType::kBF16);
  const GdnShape s = kShapes[0];
  Layer l = make_layer(s);
  const StepTensors m = meta({{1, 3, 0}});
  GatedDeltaNetParams p = gpu_params(l, m, gpu_from(rand_proj(s, 1), {1, s.P()}, DType::kBF16),
                                     gpu_poisoned({1, s.Hv * s.dv}, DType::kBF16));
  GatedDeltaNetParams bad = p;
  bad.num_v_heads = 3;  // not a multiple of Hk
  EXPECT_THROW(gpu_->gated_delta_net(bad), Error);
  bad = p;
  bad.head_k_dim = 256;
  EXPECT_THROW(gpu_->gated_delta_net(bad), Error);
  bad = p;
  bad.ssm_state = gpu_poisoned({kSlots, s.Hv, s.dk, s.dv}, DType::kBF16);
  EXPECT_THROW(gpu_->gated_delta_net(bad), Error);
}

// sigmoid_gate: [N, C] and [N, 1] gates, with and without residual, out separate or aliasing x /
// residual; every element vs the CPU (same roundings: exact up to expf).
TEST_F(GatedDeltaNetTest, SigmoidGateMatchesCpu) {
  for (DType act : {DType::kF32, DType::kBF16, DType::kF16}) {
    use_dtype(act);
    for (const auto [N, C] : {std::pair{1, 64}, std::pair{7, 100}, std::pair{33, 2048}}) {
      for (int gc : {C, 1})
        for (int mode = 0; mode < 4; ++mode) {  // 0: no residual, 1: residual, 2: out = x, 3: out = residual
          SCOPED_TRACE(std::string(dtype_name(act)) + " N " + std::to_string(N) + " C " + std::to_string(C) +
                       " gate cols " + std::to_string(gc) + " mode " + std::to_string(mode));
          const auto x = rand_vec(size_t(N) * C, -3, 3, act), g = rand_vec(size_t(N) * gc, -6, 6, act);
          const auto r = rand_vec(size_t(N) * C, -2, 2, act);
          const bool res = mode != 0 && mode != 2;
          SigmoidGateParams cp{host_t(x, {N, C}, act), host_t(g, {N, gc}, act), res ? host_t(r, {N, C}, act) : Tensor(),
                               host_t(std::vector<float>(size_t(N) * C, std::nanf("")), {N, C}, act)};
          cpu_->sigmoid_gate(cp);
          SigmoidGateParams gp{gpu_from(x, {N, C}, act), gpu_from(g, {N, gc}, act),
                               res ? gpu_from(r, {N, C}, act) : Tensor(), Tensor()};
          gp.out = mode == 2 ? gp.x : mode == 3 ? gp.residual : gpu_poisoned({N, C}, act);
          gpu_->sigmoid_gate(gp);
          // expf vs std::exp can flip the rounded sigmoid by one ulp (rarely): up to an ulp of x * sg.
          const Tolerance tol = act == DType::kBF16 ? Tolerance{3e-2f, 2e-2f} : act == DType::kF16
                                                                                   ? Tolerance{4e-3f, 4e-3f}
                                                                                   : tol_for(act);
          expect_close(to_host(gp.out), to_host(cp.out), tol, "sigmoid_gate");
        }
    }
  }
}

}  // namespace
}  // namespace vireo::testing
