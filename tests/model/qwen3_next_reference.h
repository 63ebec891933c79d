// A naive whole-sequence forward of the Qwen3-Next / Qwen3.5 family, written from transformers'
// modeling_qwen3_next.py / modular_qwen3_5.py over the checkpoint's own (HF-named, HF-layout) tensors:
// zero-centred RMSNorms (1 + w), gated attention (q_proj per head [query | gate], q/k norm, partial
// rotate_half RoPE, GQA, attn * sigmoid(gate)), Gated DeltaNet (Qwen3.5's in_proj_qkv/z/b/a or
// Qwen3-Next's interleaved in_proj_qkvz/ba split as fix_query_key_value_ordering does; causal conv +
// silu, l2norm, torch_recurrent_gated_delta_rule, RMSNormGated), SwiGLU or softmax top-k MoE plus the
// sigmoid-gated shared expert. For tests of the model against something independent of its loader.
#pragma once
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/weight_source.h"

namespace vireo::testing {

class Qwen3NextReference {
 public:
  Qwen3NextReference(const ModelConfig& c, const WeightSource& w, bool interleaved) : c_(c), w_(w), il_(interleaved) {}

  // Logits [n, vocab] of every position of `ids`.
  std::vector<float> logits(const std::vector<int32_t>& ids) const {
    const int n = static_cast<int>(ids.size()), Hd = c_.hidden_size;
    const auto emb = get("model.embed_tokens.weight", {c_.vocab_size, Hd});
    std::vector<Vec> h(n);
    for (int t = 0; t < n; ++t) h[t] = Vec(emb.begin() + int64_t(ids[t]) * Hd, emb.begin() + int64_t(ids[t] + 1) * Hd);
    for (int l = 0; l < c_.num_hidden_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      std::vector<Vec> x(n);
      for (int t = 0; t < n; ++t) x[t] = norm1(h[t], get(p + "input_layernorm.weight", {Hd}));
      const auto mix = c_.linear_layer(l) ? delta_net(p + "linear_attn.", x) : attention(p + "self_attn.", x);
      for (int t = 0; t < n; ++t) {
        for (int i = 0; i < Hd; ++i) h[t][i] += mix[t][i];
        const Vec y = norm1(h[t], get(p + "post_attention_layernorm.weight", {Hd}));
        const Vec m = c_.moe_layer(l) ? moe(p + "mlp.", y) : mlp(p + "mlp.", y, c_.intermediate_size);
        for (int i = 0; i < Hd; ++i) h[t][i] += m[i];
      }
    }
    const auto head = get(c_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", {c_.vocab_size, Hd});
    std::vector<float> out;
    for (int t = 0; t < n; ++t) {
      const Vec y = matvec(head, c_.vocab_size, norm1(h[t], get("model.norm.weight", {Hd})));
      out.insert(out.end(), y.begin(), y.end());
    }
    return out;
  }

 private:
  using Vec = std::vector<double>;
  static double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
  static double silu(double x) { return x * sigmoid(x); }

  std::vector<float> get(const std::string& name, std::vector<int64_t> shape) const {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    std::vector<float> v(static_cast<size_t>(n));
    w_.read(name, shape, DType::kF32, v.data());
    return v;
  }
  static Vec matvec(const std::vector<float>& W, int64_t rows, const Vec& x) {
    Vec y(rows, 0.0);
    const size_t k = x.size();
    for (int64_t r = 0; r < rows; ++r)
      for (size_t i = 0; i < k; ++i) y[r] += double(W[r * k + i]) * x[i];
    return y;
  }
  // Qwen3NextRMSNorm: x / rms(x) * (1 + w)
  Vec norm1(const Vec& x, const std::vector<float>& w) const {
    double ms = 0;
    for (double v : x) ms += v * v / x.size();
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] / std::sqrt(ms + c_.rms_norm_eps) * (1.0 + w[i]);
    return y;
  }

  std::vector<Vec> attention(const std::string& a, const std::vector<Vec>& x) const {
    const int n = static_cast<int>(x.size()), Hd = c_.hidden_size, H = c_.num_attention_heads;
    const int Hkv = c_.num_key_value_heads, D = c_.head_dim, rd = c_.rotary_dim();
    const auto Wq = get(a + "q_proj.weight", {H * 2 * D, Hd}), Wk = get(a + "k_proj.weight", {Hkv * D, Hd});
    const auto Wv = get(a + "v_proj.weight", {Hkv * D, Hd}), Wo = get(a + "o_proj.weight", {Hd, H * D});
    const auto qn = get(a + "q_norm.weight", {D}), kn = get(a + "k_norm.weight", {D});
    std::vector<Vec> q(n), g(n), k(n), v(n);
    auto rope = [&](double* head, int pos) {
      for (int i = 0; i < rd / 2; ++i) {
        const double inv = 1.0 / std::pow(double(c_.rope_theta), 2.0 * i / rd), f = float(float(pos) * float(inv));
        const double x1 = head[i], x2 = head[i + rd / 2];
        head[i] = x1 * std::cos(f) - x2 * std::sin(f);
        head[i + rd / 2] = x2 * std::cos(f) + x1 * std::sin(f);
      }
    };
    for (int t = 0; t < n; ++t) {
      const Vec qg = matvec(Wq, H * 2 * D, x[t]);
      for (int h = 0; h < H; ++h) {
        Vec qh(qg.begin() + h * 2 * D, qg.begin() + h * 2 * D + D);
        qh = norm1(qh, qn);
        rope(qh.data(), t);
        q[t].insert(q[t].end(), qh.begin(), qh.end());
        g[t].insert(g[t].end(), qg.begin() + h * 2 * D + D, qg.begin() + (h + 1) * 2 * D);
      }
      const Vec kk = matvec(Wk, Hkv * D, x[t]);
      for (int h = 0; h < Hkv; ++h) {
        Vec kh = norm1(Vec(kk.begin() + h * D, kk.begin() + (h + 1) * D), kn);
        rope(kh.data(), t);
        k[t].insert(k[t].end(), kh.begin(), kh.end());
      }
      v[t] = matvec(Wv, Hkv * D, x[t]);
    }
    std::vector<Vec> out(n);
    for (int t = 0; t < n; ++t) {
      Vec o(H * D, 0.0);
      for (int h = 0; h < H; ++h) {
        const int kh = h / (H / Hkv);
        std::vector<double> s(t + 1);
        for (int j = 0; j <= t; ++j) {
          double d = 0;
          for (int i = 0; i < D; ++i) d += q[t][h * D + i] * k[j][kh * D + i];
          s[j] = d / std::sqrt(double(D));
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double z = 0;
        for (auto& e : s) z += (e = std::exp(e - mx));
        for (int j = 0; j <= t; ++j)
          for (int i = 0; i < D; ++i) o[h * D + i] += s[j] / z * v[j][kh * D + i];
      }
      for (int i = 0; i < H * D; ++i) o[i] *= sigmoid(g[t][i]);
      out[t] = matvec(Wo, Hd, o);
    }
    return out;
  }

  std::vector<Vec> delta_net(const std::string& p, const std::vector<Vec>& x) const {
    const ModelConfig::LinearAttn& la = c_.linear_attn;
    const int n = static_cast<int>(x.size()), Hd = c_.hidden_size, Hk = la.num_k_heads, Hv = la.num_v_heads;
    const int dk = la.head_k_dim, dv = la.head_v_dim, L = la.conv_kernel, r = Hv / Hk, C = 2 * Hk * dk + Hv * dv;
    std::vector<Vec> qkv(n), z(n), b(n), a(n);
    if (il_) {
      const int group = 2 * dk + 2 * r * dv;
      const auto Wqkvz = get(p + "in_proj_qkvz.weight", {Hk * group, Hd}), Wba = get(p + "in_proj_ba.weight", {2 * Hv, Hd});
      for (int t = 0; t < n; ++t) {
        const Vec m = matvec(Wqkvz, Hk * group, x[t]), mba = matvec(Wba, 2 * Hv, x[t]);
        Vec q, k, v;
        for (int gi = 0; gi < Hk; ++gi) {
          const double* G = m.data() + gi * group;
          q.insert(q.end(), G, G + dk);
          k.insert(k.end(), G + dk, G + 2 * dk);
          v.insert(v.end(), G + 2 * dk, G + 2 * dk + r * dv);
          z[t].insert(z[t].end(), G + 2 * dk + r * dv, G + group);
          b[t].insert(b[t].end(), mba.begin() + gi * 2 * r, mba.begin() + gi * 2 * r + r);
          a[t].insert(a[t].end(), mba.begin() + gi * 2 * r + r, mba.begin() + (gi + 1) * 2 * r);
        }
        qkv[t] = q;
        qkv[t].insert(qkv[t].end(), k.begin(), k.end());
        qkv[t].insert(qkv[t].end(), v.begin(), v.end());
      }
    } else {
      const auto Wqkv = get(p + "in_proj_qkv.weight", {C, Hd}), Wz = get(p + "in_proj_z.weight", {Hv * dv, Hd});
      const auto Wb = get(p + "in_proj_b.weight", {Hv, Hd}), Wa = get(p + "in_proj_a.weight", {Hv, Hd});
      for (int t = 0; t < n; ++t)
        qkv[t] = matvec(Wqkv, C, x[t]), z[t] = matvec(Wz, Hv * dv, x[t]), b[t] = matvec(Wb, Hv, x[t]),
        a[t] = matvec(Wa, Hv, x[t]);
    }
    const auto cw = get(p + "conv1d.weight", {C, 1, L});
    const auto A_log = get(p + "A_log", {Hv}), dt_bias = get(p + "dt_bias", {Hv}), nw = get(p + "norm.weight", {dv});
    const auto Wo = get(p + "out_proj.weight", {Hd, Hv * dv});
    std::vector<Vec> xc(n, Vec(C));
    for (int t = 0; t < n; ++t)
      for (int ch = 0; ch < C; ++ch) {
        double acc = 0;
        for (int i = 0; i < L; ++i)
          if (t - (L - 1) + i >= 0) acc += double(cw[ch * L + i]) * qkv[t - (L - 1) + i][ch];
        xc[t][ch] = silu(acc);
      }
    std::vector<Vec> core(n, Vec(Hv * dv));
    for (int h = 0; h < Hv; ++h) {
      Vec S(size_t(dk) * dv, 0.0);
      const int kh = h / r;
      for (int t = 0; t < n; ++t) {
        Vec q(xc[t].begin() + kh * dk, xc[t].begin() + (kh + 1) * dk);
        Vec k(xc[t].begin() + Hk * dk + kh * dk, xc[t].begin() + Hk * dk + (kh + 1) * dk);
        const double* v = xc[t].data() + 2 * Hk * dk + h * dv;
        double qq = 0, kk = 0;
        for (int i = 0; i < dk; ++i) qq += q[i] * q[i], kk += k[i] * k[i];
        for (int i = 0; i < dk; ++i) q[i] /= std::sqrt(qq + 1e-6) * std::sqrt(double(dk)), k[i] /= std::sqrt(kk + 1e-6);
        const double beta = sigmoid(b[t][h]);
        const double g = -std::exp(double(A_log[h])) * std::log1p(std::exp(a[t][h] + dt_bias[h]));
        for (auto& e : S) e *= std::exp(g);
        Vec kv(dv, 0.0);
        for (int i = 0; i < dk; ++i)
          for (int cc = 0; cc < dv; ++cc) kv[cc] += S[i * dv + cc] * k[i];
        for (int i = 0; i < dk; ++i)
          for (int cc = 0; cc < dv; ++cc) S[i * dv + cc] += k[i] * (v[cc] - kv[cc]) * beta;
        Vec o(dv, 0.0);
        for (int i = 0; i < dk; ++i)
          for (int cc = 0; cc < dv; ++cc) o[cc] += S[i * dv + cc] * q[i];
        double ms = 0;
        for (double e : o) ms += e * e / dv;
        for (int cc = 0; cc < dv; ++cc)
          core[t][h * dv + cc] = nw[cc] * o[cc] / std::sqrt(ms + c_.rms_norm_eps) * silu(z[t][h * dv + cc]);
      }
    }
    std::vector<Vec> out(n);
    for (int t = 0; t < n; ++t) out[t] = matvec(Wo, Hd, core[t]);
    return out;
  }

  Vec mlp_named(const std::string& g, const std::string& u, const std::string& d, const Vec& x, int I) const {
    const int Hd = c_.hidden_size;
    const Vec gv = matvec(get(g, {I, Hd}), I, x), uv = matvec(get(u, {I, Hd}), I, x);
    Vec act(I);
    for (int i = 0; i < I; ++i) act[i] = silu(gv[i]) * uv[i];
    return matvec(get(d, {Hd, I}), Hd, act);
  }
  Vec mlp(const std::string& m, const Vec& x, int I) const {
    return mlp_named(m + "gate_proj.weight", m + "up_proj.weight", m + "down_proj.weight", x, I);
  }
  Vec moe(const std::string& m, const Vec& x) const {
    const int Hd = c_.hidden_size, E = c_.num_experts, K = c_.num_experts_per_tok;
    Vec lg = matvec(get(m + "gate.weight", {E, Hd}), E, x);
    const double mx = *std::max_element(lg.begin(), lg.end());
    double zs = 0;
    for (auto& e : lg) zs += (e = std::exp(e - mx));
    for (auto& e : lg) e /= zs;
    std::vector<int> idx(E);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int i, int j) { return lg[i] > lg[j]; });
    double top = 0;
    for (int i = 0; i < K; ++i) top += lg[idx[i]];
    Vec out(Hd, 0.0);
    for (int i = 0; i < K; ++i) {
      const std::string e = m + "experts." + std::to_string(idx[i]) + ".";
      const Vec y = mlp(e, x, c_.moe_intermediate_size);
      const double wgt = c_.norm_topk_prob ? lg[idx[i]] / top : lg[idx[i]];
      for (int j = 0; j < Hd; ++j) out[j] += wgt * y[j];
    }
    if (c_.shared_expert_intermediate_size > 0) {
      const Vec s = mlp(m + "shared_expert.", x, c_.shared_expert_intermediate_size);
      const double gate = sigmoid(matvec(get(m + "shared_expert_gate.weight", {1, Hd}), 1, x)[0]);
      for (int j = 0; j < Hd; ++j) out[j] += gate * s[j];
    }
    return out;
  }

  const ModelConfig& c_;
  const WeightSource& w_;
  bool il_;
};

}  // namespace vireo::testing
