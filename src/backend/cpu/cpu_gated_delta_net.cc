// gated_delta_net on the CPU (the oracle of the CUDA kernel): Qwen3-Next's Gated DeltaNet mixer over
// per-sequence state slots, token by token in fp32 (GatedDeltaNetParams has the math and layouts).
// proj / out / conv_state may be F32, F16 or BF16; "round" in the spec rounds to proj's dtype (a no-op
// for the CPU model's F32 activations, the bf16 roundings of HF when the caller passes bf16).
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace vireo::cpu {
namespace {

[[noreturn]] void fail(const std::string& why) { throw Error("cpu gated_delta_net: " + why); }

float round_to(DType t, float v) {
  if (t == DType::kF32) return v;
  float r = 0.0f;
  uint16_t h = 0;
  store_elem(&h, t, 0, v);
  r = load_elem(&h, t, 0);
  return r;
}
float silu(float x) { return x / (1.0f + std::exp(-x)); }
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }  // torch's threshold 20

struct Dims {
  int64_t Hk, Hv, dk, dv, L, C, P;  // P = proj row width
};

// Conv + silu of one sequence's rows [T_s, C] (fp32, rounded as HF), then its new conv state.
// old_state [L-1, C] holds positions first-(L-1) .. first-1 (zeros when the sequence restarts).
void conv_sequence(const Dims& d, const GatedDeltaNetParams& p, const std::vector<float>& w, int64_t row0,
                   int q_len, const float* old_state, float* x, float* new_state) {
  const DType at = p.proj.dtype;
  const int64_t Lm1 = d.L - 1;
  auto input = [&](int j, int64_t c) -> float {  // conv input at step-relative position j (j < 0: state)
    if (j >= 0) return load_elem(p.proj.data, at, (row0 + j) * d.P + c);
    return old_state[(Lm1 + j) * d.C + c];
  };
  for (int j = 0; j < q_len; ++j)
    for (int64_t c = 0; c < d.C; ++c) {
      float acc = 0.0f;
      for (int64_t i = 0; i < d.L; ++i) {
        const int jj = j - static_cast<int>(Lm1) + static_cast<int>(i);
        if (jj < -Lm1) continue;
        acc += w[c * d.L + i] * input(jj, c);
      }
      x[j * d.C + c] = round_to(at, silu(round_to(at, acc)));
    }
  for (int64_t i = 0; i < Lm1; ++i)  // position (q_len - (L-1) + i) relative to this step's first row
    for (int64_t c = 0; c < d.C; ++c) new_state[i * d.C + c] = input(q_len - static_cast<int>(Lm1) + static_cast<int>(i), c);
}

void l2norm(float* v, int64_t n, float scale) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += v[i] * v[i];
  const float inv = 1.0f / std::sqrt(ss + 1e-6f) * scale;
  for (int64_t i = 0; i < n; ++i) v[i] *= inv;
}

// The delta rule and gated norm of value head h over one sequence's rows; S [dk, dv] is its state.
void recur_head(const Dims& d, const GatedDeltaNetParams& p, const std::vector<float>& norm_w, int64_t row0,
                int q_len, const float* x, int64_t h, float* S) {
  const DType at = p.proj.dtype, ot = p.out.dtype;
  const int64_t kh = h / (d.Hv / d.Hk);
  const float A = -std::exp(p.A_log.ptr<float>()[h]), dt_bias = p.dt_bias.ptr<float>()[h];
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(d.dk));
  std::vector<float> q(d.dk), k(d.dk), v(d.dv), o(d.dv), kv(d.dv);
  for (int j = 0; j < q_len; ++j) {
    const float* xr = x + j * d.C;
    const int64_t prow = (row0 + j) * d.P;
    for (int64_t i = 0; i < d.dk; ++i) q[i] = xr[kh * d.dk + i], k[i] = xr[d.Hk * d.dk + kh * d.dk + i];
    for (int64_t i = 0; i < d.dv; ++i) v[i] = xr[2 * d.Hk * d.dk + h * d.dv + i];
    l2norm(q.data(), d.dk, q_scale);
    l2norm(k.data(), d.dk, 1.0f);
    const int64_t zoff = 2 * d.Hk * d.dk + d.Hv * d.dv;  // z, then b, then a
    const float b = load_elem(p.proj.data, at, prow + zoff + d.Hv * d.dv + h);
    const float a = load_elem(p.proj.data, at, prow + zoff + d.Hv * d.dv + d.Hv + h);
    const float beta = 1.0f / (1.0f + std::exp(-b));
    const float decay = std::exp(A * softplus(a + dt_bias));
    std::fill(kv.begin(), kv.end(), 0.0f);
    for (int64_t i = 0; i < d.dk; ++i) {
      float* Si = S + i * d.dv;
      for (int64_t c = 0; c < d.dv; ++c) {
        Si[c] *= decay;
        kv[c] += Si[c] * k[i];
      }
    }
    for (int64_t c = 0; c < d.dv; ++c) kv[c] = (v[c] - kv[c]) * beta;  // delta
    std::fill(o.begin(), o.end(), 0.0f);
    for (int64_t i = 0; i < d.dk; ++i) {
      float* Si = S + i * d.dv;
      for (int64_t c = 0; c < d.dv; ++c) {
        Si[c] += k[i] * kv[c];
        o[c] += Si[c] * q[i];
      }
    }
    float ss = 0.0f;
    for (int64_t c = 0; c < d.dv; ++c) o[c] = round_to(at, o[c]), ss += o[c] * o[c];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(d.dv) + p.norm_eps);
    for (int64_t c = 0; c < d.dv; ++c) {
      const float z = load_elem(p.proj.data, at, prow + zoff + h * d.dv + c);
      const float n = round_to(at, norm_w[c] * round_to(at, o[c] * inv));
      store_elem(p.out.data, ot, (row0 + j) * d.Hv * d.dv + h * d.dv + c, n * silu(z));
    }
  }
}

}  // namespace

void gated_delta_net(ThreadPool& pool, const GatedDeltaNetParams& p) {
  require_float(p.proj, "gated_delta_net proj");
  require_float(p.out, "gated_delta_net out");
  require_float(p.conv_w, "gated_delta_net conv_w");
  require_float(p.norm_w, "gated_delta_net norm_w");
  require_float(p.conv_state, "gated_delta_net conv_state");
  require_f32(p.ssm_state, "gated_delta_net ssm_state");
  require_f32(p.A_log, "gated_delta_net A_log");
  require_f32(p.dt_bias, "gated_delta_net dt_bias");
  require_i32(p.query_start, "gated_delta_net query_start");
  require_i32(p.seq_lens, "gated_delta_net seq_lens");
  require_i32(p.state_slots, "gated_delta_net state_slots");
  Dims d{p.num_k_heads, p.num_v_heads, p.head_k_dim, p.head_v_dim, p.conv_kernel, 0, 0};
  if (d.Hk <= 0 || d.Hv <= 0 || d.Hv % d.Hk != 0 || d.dk <= 0 || d.dv <= 0 || d.L < 1)
    fail("bad head counts / dims (num_v_heads must be a multiple of num_k_heads)");
  d.C = 2 * d.Hk * d.dk + d.Hv * d.dv;
  d.P = d.C + d.Hv * d.dv + 2 * d.Hv;
  const int S = p.num_seqs;
  if (p.conv_w.numel() != d.C * d.L) fail("conv_w must be [C, L] = [" + std::to_string(d.C) + ", " + std::to_string(d.L) + "]");
  if (p.A_log.numel() != d.Hv || p.dt_bias.numel() != d.Hv || p.norm_w.numel() != d.dv)
    fail("A_log / dt_bias must be [Hv], norm_w [dv]");
  if (p.conv_state.ndim() != 3 || p.conv_state.dim(1) != d.L - 1 || p.conv_state.dim(2) != d.C)
    fail("conv_state must be [slots, L-1, C], got " + p.conv_state.shape_str());
  const int64_t num_slots = p.conv_state.dim(0);
  if (p.ssm_state.numel() != num_slots * d.Hv * d.dk * d.dv) fail("ssm_state must be [slots, Hv, dk, dv]");
  if (S < 0 || p.query_start.numel() < S + 1 || p.seq_lens.numel() < S || p.state_slots.numel() < S)
    fail("query_start, seq_lens or state_slots is shorter than num_seqs needs");
  const int32_t* qs = p.query_start.ptr<int32_t>();
  const int32_t* lens = p.seq_lens.ptr<int32_t>();
  const int32_t* slots = p.state_slots.ptr<int32_t>();
  const int64_t T = S > 0 ? qs[S] : 0;
  if (p.proj.numel() < T * d.P || p.out.numel() < T * d.Hv * d.dv)
    fail("proj must be [T, " + std::to_string(d.P) + "] and out [T, Hv*dv] for T = " + std::to_string(T));
  for (int s = 0; s < S; ++s) {
    const int q_len = qs[s + 1] - qs[s];
    if (q_len < 0 || lens[s] < q_len) fail("sequence " + std::to_string(s) + " has seq_len < query length");
    if (slots[s] >= num_slots) fail("slot " + std::to_string(slots[s]) + " outside " + std::to_string(num_slots) + " slots");
    for (int s2 = 0; s2 < s; ++s2)
      if (slots[s] >= 0 && slots[s2] == slots[s]) fail("two sequences share state slot " + std::to_string(slots[s]));
  }

  std::vector<float> w(d.C * d.L), norm_w(d.dv);
  convert_to_f32(p.conv_w.data, p.conv_w.dtype, w.data(), w.size());
  convert_to_f32(p.norm_w.data, p.norm_w.dtype, norm_w.data(), d.dv);
  std::vector<float> x(T * d.C);  // conv outputs of all rows
  const int64_t Lm1 = d.L - 1, state_elems = Lm1 * d.C;
  pool.parallel_for(S, [&](int64_t b, int64_t e) {
    std::vector<float> old_state(state_elems), new_state(state_elems);
    for (int64_t s = b; s < e; ++s) {
      const int q_len = qs[s + 1] - qs[s];
      if (q_len == 0) continue;
      if (slots[s] < 0) {  // a padding row: output zeros, touch no state
        for (int64_t i = qs[s] * d.Hv * d.dv; i < qs[s + 1] * d.Hv * d.dv; ++i) store_elem(p.out.data, p.out.dtype, i, 0.0f);
        continue;
      }
      const bool restart = lens[s] - q_len == 0;
      const int64_t base = slots[s] * state_elems;
      for (int64_t i = 0; i < state_elems; ++i)
        old_state[i] = restart ? 0.0f : load_elem(p.conv_state.data, p.conv_state.dtype, base + i);
      conv_sequence(d, p, w, qs[s], q_len, old_state.data(), x.data() + qs[s] * d.C, new_state.data());
      for (int64_t i = 0; i < state_elems; ++i) store_elem(p.conv_state.data, p.conv_state.dtype, base + i, new_state[i]);
    }
  });
  // The recurrence: independent over (sequence, value head).
  const int64_t head_elems = d.dk * d.dv;
  pool.parallel_for(int64_t{S} * d.Hv, [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t s = u / d.Hv, h = u % d.Hv;
      const int q_len = qs[s + 1] - qs[s];
      if (q_len == 0 || slots[s] < 0) continue;
      float* St = p.ssm_state.ptr<float>() + (slots[s] * d.Hv + h) * head_elems;
      if (lens[s] - q_len == 0) std::fill(St, St + head_elems, 0.0f);
      recur_head(d, p, norm_w, qs[s], q_len, x.data() + qs[s] * d.C, h, St);
    }
  });
}

void sigmoid_gate(ThreadPool& pool, const SigmoidGateParams& p) {
  require_float(p.x, "sigmoid_gate x");
  require_float(p.gate, "sigmoid_gate gate");
  require_float(p.out, "sigmoid_gate out");
  if (p.x.ndim() != 2) throw Error("cpu sigmoid_gate: x must be [N, C], got " + p.x.shape_str());
  const int64_t N = p.x.dim(0), C = p.x.dim(1);
  const int64_t gc = p.gate.ndim() == 2 ? p.gate.dim(1) : 0;
  if (p.gate.ndim() != 2 || p.gate.dim(0) != N || (gc != C && gc != 1))
    throw Error("cpu sigmoid_gate: gate must be [N, C] or [N, 1], got " + p.gate.shape_str());
  if (p.out.numel() != N * C) throw Error("cpu sigmoid_gate: out must be [N, C]");
  if (!p.residual.empty()) {
    require_float(p.residual, "sigmoid_gate residual");
    if (p.residual.numel() != N * C) throw Error("cpu sigmoid_gate: residual must be [N, C]");
  }
  const DType at = p.out.dtype;
  pool.parallel_for(N, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      for (int64_t c = 0; c < C; ++c) {
        const float g = load_elem(p.gate.data, p.gate.dtype, r * gc + (gc == 1 ? 0 : c));
        const float sg = round_to(at, 1.0f / (1.0f + std::exp(-g)));
        float v = round_to(at, load_elem(p.x.data, p.x.dtype, r * C + c) * sg);
        if (!p.residual.empty()) v += load_elem(p.residual.data, p.residual.dtype, r * C + c);
        store_elem(p.out.data, at, r * C + c, v);
      }
  }, 16);
}

}  // namespace vireo::cpu
