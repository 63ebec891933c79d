// Mirrors transformers' modeling_rope_utils: inv_freq in fp32, angles p * inv_freq in fp32.
#include "model/rope.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace vireo {
namespace {

std::vector<float> base_inv_freq(double base, int dim) {
  std::vector<float> f(dim / 2);
  for (int i = 0; i < dim / 2; ++i) {
    // torch: base ** (arange(0, dim, 2).float() / dim) in fp32, then 1.0 / that.
    const float expo = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float pw = static_cast<float>(std::pow(base, static_cast<double>(expo)));
    f[i] = 1.0f / pw;
  }
  return f;
}

double yarn_get_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

}  // namespace

RopeFrequencies rope_frequencies(const ModelConfig& c) {
  const RopeScaling& rs = c.rope_scaling;
  const int dim = c.rotary_dim();
  const double base = c.rope_theta;
  RopeFrequencies out;
  if (rs.type == "default") {
    out.inv_freq = base_inv_freq(base, dim);
  } else if (rs.type == "linear") {
    out.inv_freq = base_inv_freq(base, dim);
    for (auto& f : out.inv_freq) f /= rs.factor;
  } else if (rs.type == "dynamic") {
    if (rs.alpha && *rs.alpha > 0) {
      // HunYuan's DynamicNTKAlphaRotary: base grows with alpha, uses head_dim.
      const double hd = c.head_dim;
      out.inv_freq = base_inv_freq(base * std::pow(static_cast<double>(*rs.alpha), hd / (hd - 2)), c.head_dim);
      out.inv_freq.resize(dim / 2);
    } else {
      // Dynamic NTK only changes the base past max_position_embeddings, which the engine never reaches.
      out.inv_freq = base_inv_freq(base, dim);
    }
  } else if (rs.type == "llama3") {
    auto inv = base_inv_freq(base, dim);
    const double old_ctx = rs.original_max_position_embeddings;
    const double low_wavelen = old_ctx / rs.low_freq_factor, high_wavelen = old_ctx / rs.high_freq_factor;
    for (auto& f : inv) {
      const float wavelen = static_cast<float>(2 * M_PI) / f;
      float v = wavelen > low_wavelen ? f / rs.factor : f;
      if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
        const float smooth = static_cast<float>((old_ctx / wavelen - rs.low_freq_factor) /
                                                (rs.high_freq_factor - rs.low_freq_factor));
        v = (1 - smooth) * v / rs.factor + smooth * v;
      }
      f = v;
    }
    out.inv_freq = inv;
  } else if (rs.type == "yarn") {
    // The explicit factor, as transformers 5 and vLLM: a Qwen3 config turning YaRN on sets factor 4 and
    // original_max_position_embeddings 32768 beside max_position_embeddings 40960, and means 4 (older
    // transformers took 40960 / 32768 instead). Only a config without a factor gets the lengths' ratio.
    double orig = rs.original_max_position_embeddings > 0 ? rs.original_max_position_embeddings
                                                          : c.max_position_embeddings;
    double factor = rs.factor;
    if (!rs.factor_set && rs.original_max_position_embeddings > 0)
      factor = static_cast<double>(c.max_position_embeddings) / orig;
    double attn = 1.0;
    if (rs.attention_factor) {
      attn = *rs.attention_factor;
    } else if (rs.mscale && rs.mscale_all_dim && *rs.mscale != 0 && *rs.mscale_all_dim != 0) {
      attn = yarn_get_mscale(factor, *rs.mscale) / yarn_get_mscale(factor, *rs.mscale_all_dim);
    } else {
      attn = yarn_get_mscale(factor, 1.0);
    }
    auto corr_dim = [&](double rot) { return (dim * std::log(orig / (rot * 2 * M_PI))) / (2 * std::log(base)); };
    double low = corr_dim(rs.beta_fast), high = corr_dim(rs.beta_slow);
    if (rs.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high) high += 0.001;
    const int half = dim / 2;
    out.inv_freq.resize(half);
    for (int i = 0; i < half; ++i) {
      const float pos_freq = static_cast<float>(std::pow(base, static_cast<double>(static_cast<float>(2 * i) / dim)));
      const float extrap = 1.0f / pos_freq;
      const float interp = 1.0f / (static_cast<float>(factor) * pos_freq);
      const float ramp = std::clamp(static_cast<float>((i - low) / (high - low)), 0.0f, 1.0f);
      const float extrap_factor = 1.0f - ramp;
      out.inv_freq[i] = interp * (1 - extrap_factor) + extrap * extrap_factor;
    }
    out.attention_scaling = static_cast<float>(attn);
  } else if (rs.type == "longrope") {
    // transformers' _compute_longrope_parameters: inv_freq = 1 / (ext * base^(2i/dim)), ext the short
    // factors up to original_max_position_embeddings and the long ones past it (longrope_frequency_update);
    // cos / sin times sqrt(1 + ln(factor) / ln(original)), factor = max_position / original (Phi-3), else
    // the config's factor.
    if (rs.short_factor.size() != static_cast<size_t>(dim / 2) || rs.long_factor.size() != static_cast<size_t>(dim / 2))
      throw Error("rope_scaling: longrope needs " + std::to_string(dim / 2) + " short_factor and long_factor values, got " +
                  std::to_string(rs.short_factor.size()) + " and " + std::to_string(rs.long_factor.size()));
    const int orig = rs.original_max_position_embeddings;
    const double factor = orig > 0 ? static_cast<double>(c.max_position_embeddings) / orig : rs.factor;
    const double attn_base = orig > 0 ? orig : c.max_position_embeddings;
    out.attention_scaling = rs.attention_factor ? *rs.attention_factor
                            : factor <= 1.0     ? 1.0f
                                                : static_cast<float>(std::sqrt(1 + std::log(factor) / std::log(attn_base)));
    auto scaled = [&](const std::vector<float>& ext) {
      std::vector<float> f(dim / 2);
      for (int i = 0; i < dim / 2; ++i) {
        const float pw = static_cast<float>(std::pow(base, static_cast<double>(static_cast<float>(2 * i) / dim)));
        f[i] = 1.0f / (ext[i] * pw);
      }
      return f;
    };
    out.inv_freq = scaled(rs.short_factor);
    out.inv_freq_long = scaled(rs.long_factor);
    out.long_from = orig > 0 ? orig : c.max_position_embeddings;
  } else {
    throw Error("rope_scaling: unsupported rope_type '" + rs.type + "'");
  }
  if (!rs.freq_factors.empty()) {
    if (rs.freq_factors.size() != out.inv_freq.size())
      throw Error("rope: " + std::to_string(rs.freq_factors.size()) + " frequency factors for " +
                  std::to_string(out.inv_freq.size()) + " frequencies");
    for (size_t i = 0; i < out.inv_freq.size(); ++i) out.inv_freq[i] /= rs.freq_factors[i];
    for (size_t i = 0; i < out.inv_freq_long.size(); ++i) out.inv_freq_long[i] /= rs.freq_factors[i];
  }
  return out;
}

std::vector<float> rope_cos_sin_table(const ModelConfig& c, int max_positions) {
  const RopeFrequencies rf = rope_frequencies(c);
  const int half = static_cast<int>(rf.inv_freq.size()), rd = 2 * half;
  std::vector<float> table(static_cast<size_t>(max_positions) * rd);
  for (int p = 0; p < max_positions; ++p) {
    float* row = table.data() + static_cast<size_t>(p) * rd;
    const std::vector<float>& inv = !rf.inv_freq_long.empty() && p >= rf.long_from ? rf.inv_freq_long : rf.inv_freq;
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv[i];
      row[i] = std::cos(angle) * rf.attention_scaling;  // fp32 like torch's emb.cos()
      row[half + i] = std::sin(angle) * rf.attention_scaling;
    }
  }
  return table;
}

}  // namespace vireo
