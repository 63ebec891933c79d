// DeepSeek-V3 (and V2) from a safetensors checkpoint in HF's layout (random weights written here)
// against a naive forward written from transformers' modeling_deepseek_v3.py / _v2.py (5.x), in double: MLA with its
// [nope | rope] head split, interleaved or rotate_half RoPE on q_rot / the shared k_rot, kv_b_proj's
// [k_nope | v] split, the softmax scale (with yarn's mscale_all_dim), o_proj over H * v_head_dim; the
// noaux_tc router (sigmoid, bias, group top-2 sums, topk_group, renormalise, scale) and the shared
// expert. This checks the load-time reorderings and mla_pack before the transformers fixture exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>

#include "backend/backend.h"
#include "model/model.h"
#include "model/rope.h"
#include "model_test_util.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Mat = std::vector<double>;  // row-major

struct W {
  std::vector<int64_t> shape;
  std::vector<float> v;
};

void write_safetensors(const fs::path& path, const std::map<std::string, W>& tensors) {
  json header = json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    const size_t n = t.v.size() * 4;
    header[name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + n}}};
    data.append(reinterpret_cast<const char*>(t.v.data()), n);
  }
  const std::string h = header.dump();
  const uint64_t n = h.size();
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << h << data;
}

// y [T, out] = x [T, in] @ w^T (w [out, in])
Mat lin(const Mat& x, const W& w, int T) {
  const int64_t out = w.shape[0], in = w.shape[1];
  Mat y(size_t(T * out), 0.0);
  for (int t = 0; t < T; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (int64_t i = 0; i < in; ++i) s += x[t * in + i] * w.v[o * in + i];
      y[t * out + o] = s;
    }
  return y;
}

Mat rmsnorm(const Mat& x, const W& w, int T, double eps) {
  const int64_t C = w.shape[0];
  Mat y(x.size());
  for (int t = 0; t < T; ++t) {
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) ss += x[t * C + c] * x[t * C + c];
    const double r = 1.0 / std::sqrt(ss / C + eps);
    for (int64_t c = 0; c < C; ++c) y[t * C + c] = x[t * C + c] * r * w.v[c];
  }
  return y;
}

Mat cols(const Mat& x, int T, int64_t width, int64_t b, int64_t e) {
  Mat y;
  for (int t = 0; t < T; ++t) y.insert(y.end(), x.begin() + t * width + b, x.begin() + t * width + e);
  return y;
}

struct Variant {
  bool v2;  // DeepseekV2ForCausalLM: greedy softmax gate, complex-pair RoPE, no mscale, q_a/kv_a eps 1e-6
  bool q_lora, interleave, yarn, stacked_experts;
  int n_group, topk_group, n_shared;
  bool renorm;
  double scaling_factor;
};

class DeepseekReference : public ::testing::TestWithParam<int> {
 protected:
  Variant variant() const {
    switch (GetParam()) {
      case 0: return Variant{false, true, true, false, false, 2, 1, 1, true, 2.5};
      case 1: return Variant{false, false, false, true, true, 1, 1, 2, false, 1.0};
      default: return Variant{true, true, true, true, false, 1, 1, 1, false, 2.0};
    }
  }
};

TEST_P(DeepseekReference, MatchesNaiveTransformersForward) {
  const Variant vr = variant();
  const int V = 97, hid = 32, inter = 48, mi = 16, layers = 3, H = 4, QL = 24, L = 16, N = 16, R = 8, VD = 12, E = 8,
            K = 2;
  const int D = N + R;
  const double eps = vr.v2 ? 1e-2 : 1e-6, mla_eps = vr.v2 ? 1e-6 : eps;  // V2: a large eps tells the two apart
  json cfg{{"architectures", {vr.v2 ? "DeepseekV2ForCausalLM" : "DeepseekV3ForCausalLM"}},
           {"model_type", vr.v2 ? "deepseek_v2" : "deepseek_v3"}, {"vocab_size", V},
           {"hidden_size", hid}, {"intermediate_size", inter}, {"moe_intermediate_size", mi},
           {"num_hidden_layers", layers}, {"num_attention_heads", H}, {"num_key_value_heads", H}, {"head_dim", R},
           {"q_lora_rank", vr.q_lora ? json(QL) : json(nullptr)}, {"kv_lora_rank", L}, {"qk_nope_head_dim", N},
           {"qk_rope_head_dim", R}, {"v_head_dim", VD}, {"n_routed_experts", E}, {"num_experts_per_tok", K},
           {"n_shared_experts", vr.n_shared}, {"n_group", vr.n_group}, {"topk_group", vr.topk_group},
           {"routed_scaling_factor", vr.scaling_factor}, {"norm_topk_prob", vr.renorm},
           {"first_k_dense_replace", 1}, {"max_position_embeddings", 128},
           {"rms_norm_eps", eps}, {"tie_word_embeddings", false}, {"torch_dtype", "float32"}};
  if (vr.v2) {
    cfg["topk_method"] = "greedy";
    cfg["scoring_func"] = "softmax";
  } else {
    cfg["rope_interleave"] = vr.interleave;
  }
  if (vr.yarn)
    cfg["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 4.0}, {"mscale", 1.0},
                              {"mscale_all_dim", 1.0}, {"original_max_position_embeddings", 32}};
  else
    cfg["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};

  std::mt19937 rng(1234 + GetParam());
  std::normal_distribution<float> nd(0.f, 1.f);
  std::map<std::string, W> ws;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float std, float mean = 0.f) -> const W& {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    W w{shape, std::vector<float>(size_t(n))};
    for (auto& x : w.v) x = mean + std * nd(rng);
    return ws[name] = std::move(w);
  };
  add("model.embed_tokens.weight", {V, hid}, 1.0f);
  add("lm_head.weight", {V, hid}, 0.1f);
  add("model.norm.weight", {hid}, 0.2f, 1.f);
  for (int l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".", a = p + "self_attn.", m = p + "mlp.";
    add(p + "input_layernorm.weight", {hid}, 0.2f, 1.f);
    add(p + "post_attention_layernorm.weight", {hid}, 0.2f, 1.f);
    if (vr.q_lora) {
      add(a + "q_a_proj.weight", {QL, hid}, 0.2f);
      add(a + "q_a_layernorm.weight", {QL}, 0.2f, 1.f);
      add(a + "q_b_proj.weight", {H * D, QL}, 0.2f);
    } else {
      add(a + "q_proj.weight", {H * D, hid}, 0.2f);
    }
    add(a + "kv_a_proj_with_mqa.weight", {L + R, hid}, 0.2f);
    add(a + "kv_a_layernorm.weight", {L}, 0.2f, 1.f);
    add(a + "kv_b_proj.weight", {H * (N + VD), L}, 0.2f);
    add(a + "o_proj.weight", {hid, H * VD}, 0.2f);
    if (l == 0) {
      add(m + "gate_proj.weight", {inter, hid}, 0.2f);
      add(m + "up_proj.weight", {inter, hid}, 0.2f);
      add(m + "down_proj.weight", {hid, inter}, 0.2f);
      continue;
    }
    add(m + "gate.weight", {E, hid}, 0.3f);
    if (!vr.v2) add(m + "gate.e_score_correction_bias", {E}, 0.1f);
    if (vr.stacked_experts) {
      add(m + "experts.gate_up_proj", {E, 2 * mi, hid}, 0.2f);
      add(m + "experts.down_proj", {E, hid, mi}, 0.2f);
    } else {
      for (int e = 0; e < E; ++e) {
        const std::string x = m + "experts." + std::to_string(e) + ".";
        add(x + "gate_proj.weight", {mi, hid}, 0.2f);
        add(x + "up_proj.weight", {mi, hid}, 0.2f);
        add(x + "down_proj.weight", {hid, mi}, 0.2f);
      }
    }
    const int Is = vr.n_shared * mi;
    add(m + "shared_experts.gate_proj.weight", {Is, hid}, 0.2f);
    add(m + "shared_experts.up_proj.weight", {Is, hid}, 0.2f);
    add(m + "shared_experts.down_proj.weight", {hid, Is}, 0.2f);
  }
  const fs::path dir = fs::path(::testing::TempDir()) / ("vireo_deepseek_ref_" + std::to_string(GetParam()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << cfg.dump();
  write_safetensors(dir / "model.safetensors", ws);

  // ---- the naive forward ----
  const std::vector<int32_t> ids{3, 17, 42, 5, 96, 0, 11, 64, 23, 7, 50};
  const int T = static_cast<int>(ids.size());
  ModelConfig mc = ModelConfig::from_json(cfg, "cfg");
  const RopeFrequencies rf = rope_frequencies(mc);
  ASSERT_EQ(rf.inv_freq.size(), size_t(R / 2));
  double scale = 1.0 / std::sqrt(double(D));
  if (vr.yarn && !vr.v2) {  // transformers' V2 has no mscale in its scaling
    const double ms = 0.1 * 1.0 * std::log(4.0) + 1.0;
    scale *= ms * ms;
  }
  auto rope = [&](std::vector<double> x, int pos) {  // x: R values of one head
    if (vr.v2) {  // view_as_complex on pairs (2i, 2i+1) times polar(1, angle_i) * attention_scaling
      std::vector<double> out(R);
      for (int i = 0; i < R / 2; ++i) {
        const double ang = double(float(pos) * rf.inv_freq[i]);
        const double c = std::cos(ang) * rf.attention_scaling, sn = std::sin(ang) * rf.attention_scaling;
        out[2 * i] = x[2 * i] * c - x[2 * i + 1] * sn;
        out[2 * i + 1] = x[2 * i] * sn + x[2 * i + 1] * c;
      }
      return out;
    }
    if (vr.interleave) {  // view(d/2, 2).transpose: evens then odds
      std::vector<double> y(R);
      for (int i = 0; i < R / 2; ++i) y[i] = x[2 * i], y[R / 2 + i] = x[2 * i + 1];
      x = y;
    }
    std::vector<double> out(R);
    for (int i = 0; i < R; ++i) {
      const int f = i % (R / 2);
      const double ang = double(float(pos) * rf.inv_freq[f]);
      const double c = std::cos(ang) * rf.attention_scaling, s = std::sin(ang) * rf.attention_scaling;
      const double rot = i < R / 2 ? -x[i + R / 2] : x[i - R / 2];
      out[i] = x[i] * c + rot * s;
    }
    return out;
  };
  auto mlp = [&](const Mat& x, const std::string& pre, int width) {
    W g = ws[pre + "gate_proj.weight"], u = ws[pre + "up_proj.weight"];
    Mat gg = lin(x, g, T), uu = lin(x, u, T), act(size_t(T * width));
    for (size_t i = 0; i < act.size(); ++i) act[i] = gg[i] / (1 + std::exp(-gg[i])) * uu[i];
    return lin(act, ws[pre + "down_proj.weight"], T);
  };
  Mat h(size_t(T * hid));
  for (int t = 0; t < T; ++t)
    for (int c = 0; c < hid; ++c) h[t * hid + c] = ws["model.embed_tokens.weight"].v[ids[t] * hid + c];
  for (int l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".", a = p + "self_attn.", m = p + "mlp.";
    Mat x = rmsnorm(h, ws[p + "input_layernorm.weight"], T, eps);
    Mat q = vr.q_lora ? lin(rmsnorm(lin(x, ws[a + "q_a_proj.weight"], T), ws[a + "q_a_layernorm.weight"], T, mla_eps),
                            ws[a + "q_b_proj.weight"], T)
                      : lin(x, ws[a + "q_proj.weight"], T);
    Mat ckv = lin(x, ws[a + "kv_a_proj_with_mqa.weight"], T);
    Mat kb = lin(rmsnorm(cols(ckv, T, L + R, 0, L), ws[a + "kv_a_layernorm.weight"], T, mla_eps),
                 ws[a + "kv_b_proj.weight"], T);
    // query / key [T][H][D] as HF concatenates them: [pass | rot]
    std::vector<std::vector<std::vector<double>>> Q(T, std::vector<std::vector<double>>(H)), Kk = Q, Vv = Q;
    for (int t = 0; t < T; ++t) {
      std::vector<double> kr(ckv.begin() + t * (L + R) + L, ckv.begin() + (t + 1) * (L + R));
      kr = rope(kr, t);
      for (int hh = 0; hh < H; ++hh) {
        const double* qh = &q[(t * H + hh) * D];
        std::vector<double> qr(qh + N, qh + D);
        qr = rope(qr, t);
        Q[t][hh].assign(qh, qh + N);
        Q[t][hh].insert(Q[t][hh].end(), qr.begin(), qr.end());
        const double* kh = &kb[(t * H + hh) * (N + VD)];
        Kk[t][hh].assign(kh, kh + N);
        Kk[t][hh].insert(Kk[t][hh].end(), kr.begin(), kr.end());
        Vv[t][hh].assign(kh + N, kh + N + VD);
      }
    }
    Mat att(size_t(T * H * VD), 0.0);
    for (int t = 0; t < T; ++t)
      for (int hh = 0; hh < H; ++hh) {
        std::vector<double> sc(t + 1);
        double mx = -1e300;
        for (int j = 0; j <= t; ++j) {
          double s = 0;
          for (int d = 0; d < D; ++d) s += Q[t][hh][d] * Kk[j][hh][d];
          sc[j] = s * scale;
          mx = std::max(mx, sc[j]);
        }
        double sum = 0;
        for (auto& s : sc) sum += s = std::exp(s - mx);
        for (int j = 0; j <= t; ++j)
          for (int d = 0; d < VD; ++d) att[(t * H + hh) * VD + d] += sc[j] / sum * Vv[j][hh][d];
      }
    Mat o = lin(att, ws[a + "o_proj.weight"], T);
    for (size_t i = 0; i < h.size(); ++i) h[i] += o[i];
    x = rmsnorm(h, ws[p + "post_attention_layernorm.weight"], T, eps);
    Mat y;
    if (l == 0) {
      y = mlp(x, m, inter);
    } else {
      Mat logits = lin(x, ws[m + "gate.weight"], T);
      y = mlp(x, m + "shared_experts.", vr.n_shared * mi);
      for (int t = 0; t < T; ++t) {
        std::vector<double> s(E), c(E);
        if (vr.v2) {  // softmax(fp32 logits), greedy top-k
          double mx = -1e300, sum = 0;
          for (int e = 0; e < E; ++e) mx = std::max(mx, logits[t * E + e]);
          for (int e = 0; e < E; ++e) sum += s[e] = std::exp(logits[t * E + e] - mx);
          for (int e = 0; e < E; ++e) c[e] = s[e] /= sum;
        } else {
          const W& bias = ws[m + "gate.e_score_correction_bias"];
          for (int e = 0; e < E; ++e) s[e] = 1 / (1 + std::exp(-logits[t * E + e])), c[e] = s[e] + bias.v[e];
        }
        const int per = E / vr.n_group;
        std::vector<double> gs(vr.n_group);
        for (int g = 0; g < vr.n_group; ++g) {
          std::vector<double> v(c.begin() + g * per, c.begin() + (g + 1) * per);
          std::sort(v.begin(), v.end(), std::greater<double>());
          gs[g] = v[0] + v[1];
        }
        std::vector<int> gi(vr.n_group), ei(E);
        std::iota(gi.begin(), gi.end(), 0);
        std::stable_sort(gi.begin(), gi.end(), [&](int p1, int p2) { return gs[p1] > gs[p2]; });
        std::set<int> kept(gi.begin(), gi.begin() + vr.topk_group);
        for (int e = 0; e < E; ++e)
          if (!kept.count(e / per)) c[e] = -1e300;
        std::iota(ei.begin(), ei.end(), 0);
        std::stable_sort(ei.begin(), ei.end(), [&](int p1, int p2) { return c[p1] > c[p2]; });
        double tot = 0;
        for (int j = 0; j < K; ++j) tot += s[ei[j]];
        for (int j = 0; j < K; ++j) {
          const int e = ei[j];
          const double wt = (vr.renorm ? s[e] / (tot + 1e-20) : s[e]) * vr.scaling_factor;
          std::vector<double> act(mi);
          for (int i = 0; i < mi; ++i) {
            double g = 0, u = 0;
            for (int cc = 0; cc < hid; ++cc) {
              double gw, uw;
              if (vr.stacked_experts) {
                gw = ws[m + "experts.gate_up_proj"].v[(size_t(e) * 2 * mi + i) * hid + cc];
                uw = ws[m + "experts.gate_up_proj"].v[(size_t(e) * 2 * mi + mi + i) * hid + cc];
              } else {
                gw = ws[m + "experts." + std::to_string(e) + ".gate_proj.weight"].v[i * hid + cc];
                uw = ws[m + "experts." + std::to_string(e) + ".up_proj.weight"].v[i * hid + cc];
              }
              g += x[t * hid + cc] * gw;
              u += x[t * hid + cc] * uw;
            }
            act[i] = g / (1 + std::exp(-g)) * u;
          }
          for (int cc = 0; cc < hid; ++cc) {
            double d = 0;
            for (int i = 0; i < mi; ++i)
              d += act[i] * (vr.stacked_experts ? ws[m + "experts.down_proj"].v[(size_t(e) * hid + cc) * mi + i]
                                                : ws[m + "experts." + std::to_string(e) + ".down_proj.weight"].v[cc * mi + i]);
            y[t * hid + cc] += wt * d;
          }
        }
      }
    }
    for (size_t i = 0; i < h.size(); ++i) h[i] += y[i];
  }
  const Mat want = lin(rmsnorm(h, ws["model.norm.weight"], T, eps), ws["lm_head.weight"], T);

  // ---- the model: one shot, and prefill 4 + decode ----
  auto model = load_model(dir.string(), create_backend("cpu"), LoadOptions{});
  KvCache kv = model->allocate_kv_cache(8, 4);
  testing::SeqDriver d{*model, kv, {2, 0, 5}};
  const auto got = d.step(ids, true);
  ASSERT_EQ(got.size(), want.size());
  std::vector<float> wantf(want.begin(), want.end());
  for (int t = 0; t < T; ++t)
    EXPECT_LT(testing::rel_max_err(got.data() + t * V, wantf.data() + t * V, V), 1e-4) << "position " << t;
  testing::SeqDriver d2{*model, kv, {6, 7, 1}};
  d2.step({ids.begin(), ids.begin() + 4});
  for (int t = 4; t < T; ++t) {
    const auto one = d2.step({ids[t]});
    EXPECT_LT(testing::rel_max_err(one.data(), wantf.data() + t * V, V), 1e-4) << "decode position " << t;
  }
  model->free_kv_cache(kv);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Variants, DeepseekReference, ::testing::Values(0, 1, 2));

}  // namespace
}  // namespace vireo
