// Qwen3-Next / Qwen3.5 Gated DeltaNet weights of a GGUF file, served under the HF names the loader asks
// for (decoder_gated_delta_net.cc), undoing what llama.cpp's converters did:
// - ssm_a = -exp(A_log) (A_log = log(-ssm_a)); dt_bias as ssm_dt.bias; conv1d squeezed to [C, L];
//   linear_attn.norm as ssm_norm (not shifted by 1, unlike every other norm of these models);
// - Qwen3-Next: in_proj_qkvz either kept (ssm_in, older converters) or split into attn_qkv ([q | k | v],
//   the value heads in HF's order) and attn_gate (z), put back into HF's per-key-head groups
//   [q (dk) | k (dk) | v (r dv) | z (r dv)]; in_proj_ba as ssm_ba;
// - Qwen3.5: in_proj_qkv / z / b / a as attn_qkv / attn_gate / ssm_beta / ssm_alpha, the value heads
//   tiled (HF head g * r + t stored at t * nk + g; identity when r = 1) in every tensor with a value-head
//   axis (rows of the projections, conv channels, A_log, dt_bias, out_proj's columns).
#include <cmath>

#include "core/error.h"
#include "gguf/gguf_dequant.h"
#include "gguf/gguf_types.h"
#include "model/gguf_weights.h"

namespace vireo {
namespace {

constexpr const char* kPrefix = "model.layers.";
constexpr const char* kGdn = ".linear_attn.";

// "model.layers.L.linear_attn.<what>" -> {L, what}; {"", ""} otherwise.
std::pair<std::string, std::string> gdn_parts(const std::string& name) {
  if (name.rfind(kPrefix, 0) != 0) return {};
  const size_t x = name.find(kGdn);
  if (x == std::string::npos) return {};
  const size_t p = std::string(kPrefix).size();
  return {name.substr(p, x - p), name.substr(x + std::string(kGdn).size())};
}

// Source index of each of the n * hd HF rows of a value-head axis, with the converter's tiling undone.
std::vector<int64_t> untiled(int64_t nk, int64_t nv, int64_t hd, bool tiled) {
  std::vector<int64_t> out;
  const int64_t r = nv / nk;
  for (int64_t j = 0; j < nv; ++j) {
    const int64_t src = tiled ? (j % r) * nk + j / r : j;
    for (int64_t i = 0; i < hd; ++i) out.push_back(src * hd + i);
  }
  return out;
}

}  // namespace

std::vector<float> GgufWeights::dequantized(const std::string& g, const std::string& name, int64_t numel) const {
  const GgufShards::Found f = files_->find_tensor(g);
  if (!f.info) throw Error(files_->first().path() + ": missing tensor '" + g + "' (for " + name + ")");
  if (f.info->numel() != numel)
    throw Error(f.file->path() + ": tensor '" + g + "' has " + std::to_string(f.info->numel()) + " values, expected " +
                std::to_string(numel) + " (for " + name + ")");
  if (!ggml_can_dequantize(f.info->type))
    throw Error(f.file->path() + ": tensor '" + g + "' has type " + ggml_type_name(f.info->type) +
                ", which Vireo cannot load (supported: " + ggml_dequantizable_types() + ")");
  std::vector<float> out(static_cast<size_t>(numel));
  dequantize(f.info->type, f.data(), out.data(), numel);
  return out;
}

bool GgufWeights::gdn_has(const std::string& name, bool& found) const {
  const auto [l, what] = gdn_parts(name);
  if (gdn_ == 0 || l.empty()) return false;
  const std::string b = "blk." + l + ".";
  auto in = [&](const char* g) { return files_->find_tensor(b + g).info != nullptr; };
  if (what == "in_proj_qkvz.weight") found = gdn_ == 1 && (in("ssm_in.weight") || (in("attn_qkv.weight") && in("attn_gate.weight")));
  else if (what == "in_proj_ba.weight") found = gdn_ == 1 && in("ssm_ba.weight");
  else if (what == "in_proj_qkv.weight") found = gdn_ == 2 && in("attn_qkv.weight");
  else if (what == "in_proj_z.weight") found = gdn_ == 2 && in("attn_gate.weight");
  else if (what == "in_proj_b.weight") found = gdn_ == 2 && in("ssm_beta.weight");
  else if (what == "in_proj_a.weight") found = gdn_ == 2 && in("ssm_alpha.weight");
  else if (what == "conv1d.weight") found = in("ssm_conv1d.weight");
  else if (what == "A_log") found = in("ssm_a");
  else if (what == "dt_bias") found = in("ssm_dt.bias");
  else if (what == "norm.weight") found = in("ssm_norm.weight");
  else if (what == "out_proj.weight") found = in("ssm_out.weight");
  else found = false;  // in_proj.weight (the loader's fused name) and anything else
  return true;
}

bool GgufWeights::gdn_read(const std::string& name, const std::vector<int64_t>& expected, DType dtype, void* dst) const {
  const auto [l, what] = gdn_parts(name);
  if (gdn_ == 0 || l.empty()) return false;
  const std::string b = "blk." + l + ".";
  int64_t numel = 1;
  for (int64_t d : expected) numel *= d;
  const int64_t nk = gdn_nk_, nv = gdn_nv_, dk = gdn_dk_, dv = gdn_dv_, r = nv / nk, qk = 2 * nk * dk;
  const bool tiled = gdn_ == 2;
  std::vector<float> out;
  // rows: source row of each output row (rows of `cols` values) of `src`.
  auto pick_rows = [&](const std::vector<float>& src, const std::vector<int64_t>& rows, int64_t cols) {
    if (static_cast<int64_t>(rows.size()) * cols != numel)
      throw Error(files_->first().path() + ": " + name + " does not have the expected shape");
    std::vector<float> o(static_cast<size_t>(numel));
    for (size_t i = 0; i < rows.size(); ++i)
      std::copy_n(src.begin() + rows[i] * cols, cols, o.begin() + static_cast<int64_t>(i) * cols);
    return o;
  };
  const int64_t cols = expected.empty() ? 1 : numel / expected[0];
  auto qkv_rows = [&](int64_t v_hd) {  // [q | k] as they are, then the value heads untiled
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < qk; ++i) rows.push_back(i);
    for (int64_t i : untiled(nk, nv, v_hd, tiled)) rows.push_back(qk + i);
    return rows;
  };
  if (what == "in_proj_qkvz.weight") {
    if (files_->find_tensor(b + "ssm_in.weight").info) {
      out = dequantized(b + "ssm_in.weight", name, numel);
    } else {  // [q | k | v] + z -> per key head [q | k | v (r dv) | z (r dv)]
      std::vector<float> src = dequantized(b + "attn_qkv.weight", name, (qk + nv * dv) * cols);
      const std::vector<float> z = dequantized(b + "attn_gate.weight", name, nv * dv * cols);
      src.insert(src.end(), z.begin(), z.end());
      std::vector<int64_t> rows;
      for (int64_t g = 0; g < nk; ++g) {
        for (int64_t i = 0; i < dk; ++i) rows.push_back(g * dk + i);
        for (int64_t i = 0; i < dk; ++i) rows.push_back(nk * dk + g * dk + i);
        for (int64_t i = 0; i < r * dv; ++i) rows.push_back(qk + g * r * dv + i);
        for (int64_t i = 0; i < r * dv; ++i) rows.push_back(qk + nv * dv + g * r * dv + i);
      }
      out = pick_rows(src, rows, cols);
    }
  } else if (what == "in_proj_ba.weight") {
    out = dequantized(b + "ssm_ba.weight", name, numel);
  } else if (what == "in_proj_qkv.weight") {
    out = pick_rows(dequantized(b + "attn_qkv.weight", name, numel), qkv_rows(dv), cols);
  } else if (what == "in_proj_z.weight") {
    out = pick_rows(dequantized(b + "attn_gate.weight", name, numel), untiled(nk, nv, dv, tiled), cols);
  } else if (what == "in_proj_b.weight" || what == "in_proj_a.weight") {
    const std::string g = what == "in_proj_b.weight" ? "ssm_beta.weight" : "ssm_alpha.weight";
    out = pick_rows(dequantized(b + g, name, numel), untiled(nk, nv, 1, tiled), cols);
  } else if (what == "conv1d.weight") {  // [C, 1, L] from [C, L]: channels as in_proj_qkv's rows
    out = pick_rows(dequantized(b + "ssm_conv1d.weight", name, numel), qkv_rows(dv), expected.back());
  } else if (what == "A_log" || what == "dt_bias") {
    out = pick_rows(dequantized(b + (what == "A_log" ? "ssm_a" : "ssm_dt.bias"), name, numel),
                    untiled(nk, nv, 1, tiled), 1);
    if (what == "A_log")
      for (float& v : out) v = std::log(-v);  // the converter stored -exp(A_log)
  } else if (what == "norm.weight") {
    out = dequantized(b + "ssm_norm.weight", name, numel);
  } else if (what == "out_proj.weight") {  // [hidden, nv * dv]: columns untiled
    const std::vector<float> src = dequantized(b + "ssm_out.weight", name, numel);
    const std::vector<int64_t> c = untiled(nk, nv, dv, tiled);
    const int64_t n = static_cast<int64_t>(c.size());
    out.resize(static_cast<size_t>(numel));
    for (int64_t row = 0; row < numel / n; ++row)
      for (int64_t i = 0; i < n; ++i) out[row * n + i] = src[row * n + c[i]];
  } else {
    return false;
  }
  store_f32_as(out.data(), numel, dtype, dst);
  return true;
}

}  // namespace vireo
