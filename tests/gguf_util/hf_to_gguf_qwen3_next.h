// Test-only: the Qwen3-Next / Qwen3.5 parts of convert_hf_to_gguf.py (Qwen3NextModel,
// _LinearAttentionVReorderBase, Qwen3_5TextModel), written out independently of the product's loader
// (src/model/gguf_weights_gdn.cc), for hf_to_gguf.h.
#pragma once
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf_writer.h"

namespace vireo::testing {

// The ssm.* keys, the interval of full attention layers (taken from layer_types, checked to be one),
// the rotary dims (head_dim * partial_rotary_factor) and Qwen3.5's M-RoPE sections.
inline void add_qwen3_next_metadata(GgufWriter& w, const std::string& a, const nlohmann::json& c) {
  w.add_u32(a + ".ssm.conv_kernel", c["linear_conv_kernel_dim"]);
  w.add_u32(a + ".ssm.state_size", c["linear_key_head_dim"]);
  w.add_u32(a + ".ssm.group_count", c["linear_num_key_heads"]);
  w.add_u32(a + ".ssm.time_step_rank", c["linear_num_value_heads"]);
  w.add_u32(a + ".ssm.inner_size", c["linear_value_head_dim"].get<uint32_t>() * c["linear_num_value_heads"].get<uint32_t>());
  uint32_t interval = c.value("full_attention_interval", 4u);
  if (c.contains("layer_types")) {
    const auto& t = c["layer_types"];
    for (uint32_t i = 0; i < t.size(); ++i)
      if (t[i] == "full_attention") {
        interval = i + 1;
        break;
      }
    for (uint32_t i = 0; i < t.size(); ++i)
      if ((t[i] == "full_attention") != ((i + 1) % interval == 0)) throw std::runtime_error("layer_types not periodic");
  }
  w.add_u32(a + ".full_attention_interval", interval);
  const nlohmann::json rp = c.value("rope_parameters", nlohmann::json::object());
  const double partial = rp.value("partial_rotary_factor", c.value("partial_rotary_factor", 0.25));
  w.add_u32(a + ".rope.dimension_count", static_cast<uint32_t>(c["head_dim"].get<int64_t>() * partial));
  if (a != "qwen3next") {
    std::vector<int32_t> sections = rp.value("mrope_section", std::vector<int32_t>{11, 11, 10});
    sections.resize(4, 0);
    w.add_i32_array(a + ".rope.dimension_sections", sections);
  }
}

// One linear_attn.* tensor of layer `blk` (v: its values as HF holds them), as the converter writes it;
// legacy: Qwen3-Next's in_proj_qkvz kept whole as ssm_in (converters before the split).
inline void add_qwen3_next_gdn(GgufWriter& w, const std::string& a, const nlohmann::json& c, const std::string& blk,
                               const std::string& what, const std::vector<int64_t>& shape, std::vector<float> v,
                               uint32_t type, bool legacy) {
  const int64_t nk = c["linear_num_key_heads"], nv = c["linear_num_value_heads"], dk = c["linear_key_head_dim"];
  const int64_t dv = c["linear_value_head_dim"], r = nv / nk, qk = 2 * nk * dk, H = c["hidden_size"];
  auto put = [&](const std::string& name, std::vector<int64_t> ne, const std::vector<float>& d, uint32_t t) {
    w.add_tensor(blk + name, ne, t, encode_values(d.data(), static_cast<int64_t>(d.size()), t));
  };
  // _reorder_v_heads: value head g * r + t of rows [off, off + nv * hd) of a [rows, cols] matrix to t * nk + g.
  auto tile = [&](std::vector<float>& d, int64_t off, int64_t hd, int64_t cols) {
    if (a == "qwen3next" || nk == nv) return;
    const std::vector<float> src = d;
    for (int64_t g = 0; g < nk; ++g)
      for (int64_t t = 0; t < r; ++t)
        std::copy_n(src.begin() + (off + (g * r + t) * hd) * cols, hd * cols, d.begin() + (off + (t * nk + g) * hd) * cols);
  };
  if (what == "in_proj_qkvz.weight") {
    if (legacy) return put("ssm_in.weight", {H, shape[0]}, v, type);
    std::vector<float> q, k, vv, z;  // per key head g: [q (dk) | k (dk) | v (r dv) | z (r dv)] rows
    const int64_t group = 2 * dk + 2 * r * dv;
    for (int64_t g = 0; g < nk; ++g) {
      auto rows = [&](std::vector<float>& to, int64_t from, int64_t n) {
        to.insert(to.end(), v.begin() + (g * group + from) * H, v.begin() + (g * group + from + n) * H);
      };
      rows(q, 0, dk), rows(k, dk, dk), rows(vv, 2 * dk, r * dv), rows(z, 2 * dk + r * dv, r * dv);
    }
    q.insert(q.end(), k.begin(), k.end());
    q.insert(q.end(), vv.begin(), vv.end());
    put("attn_qkv.weight", {H, qk + nv * dv}, q, type);
    return put("attn_gate.weight", {H, nv * dv}, z, type);
  }
  if (what == "in_proj_ba.weight") return put("ssm_ba.weight", {H, 2 * nv}, v, type);
  if (what == "in_proj_qkv.weight") return tile(v, qk, dv, H), put("attn_qkv.weight", {H, shape[0]}, v, type);
  if (what == "in_proj_z.weight") return tile(v, 0, dv, H), put("attn_gate.weight", {H, nv * dv}, v, type);
  if (what == "in_proj_b.weight") return tile(v, 0, 1, H), put("ssm_beta.weight", {H, nv}, v, type);
  if (what == "in_proj_a.weight") return tile(v, 0, 1, H), put("ssm_alpha.weight", {H, nv}, v, type);
  if (what == "conv1d.weight")  // [C, 1, L] squeezed, F32
    return tile(v, qk, dv, shape[2]), put("ssm_conv1d.weight", {shape[2], shape[0]}, v, kGgmlF32);
  if (what == "A_log") {
    tile(v, 0, 1, 1);
    for (float& x : v) x = -std::exp(x);
    return put("ssm_a", {nv}, v, kGgmlF32);
  }
  if (what == "dt_bias") return tile(v, 0, 1, 1), put("ssm_dt.bias", {nv}, v, kGgmlF32);
  if (what == "norm.weight") return put("ssm_norm.weight", {dv}, v, kGgmlF32);
  if (what == "out_proj.weight") {  // columns: value heads tiled
    if (a != "qwen3next" && nk != nv) {
      const std::vector<float> src = v;
      for (int64_t row = 0; row < H; ++row)
        for (int64_t g = 0; g < nk; ++g)
          for (int64_t t = 0; t < r; ++t)
            std::copy_n(src.begin() + row * nv * dv + (g * r + t) * dv, dv, v.begin() + row * nv * dv + (t * nk + g) * dv);
    }
    return put("ssm_out.weight", {nv * dv, H}, v, type);
  }
  throw std::runtime_error("unexpected DeltaNet tensor " + what);
}

}  // namespace vireo::testing
