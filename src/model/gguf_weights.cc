#include "model/gguf_weights.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include "core/error.h"
#include "gguf/gguf_dequant.h"
#include "core/parallel_ranges.h"
#include "gguf/gguf_mxfp4.h"
#include "gguf/gguf_types.h"

namespace vireo {
namespace {

// HF module path inside a layer -> llama.cpp's name (llama-arch.cpp's LLM_TENSOR_NAMES).
const std::pair<const char*, const char*> kLayerNames[] = {
    {"input_layernorm", "attn_norm"},          {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},            {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},       {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},       {"post_attention_layernorm", "ffn_norm"},
    {"post_feedforward_layernorm", "post_ffw_norm"}, {"pre_feedforward_layernorm", "ffn_norm"},
    {"post_self_attn_layernorm", "post_attention_norm"}, {"post_mlp_layernorm", "post_ffw_norm"},  // GLM-4
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},                 {"mlp.down_proj", "ffn_down"},
    {"mlp.gate", "ffn_gate_inp"},  // the MoE router
    {"mlp.router", "ffn_gate_inp"},  // GPT-OSS's router (weight and bias)
    // Phi-3's fused projections ([q; k; v] and [gate; up] rows, as in its HF checkpoint)
    {"self_attn.qkv_proj", "attn_qkv"},        {"mlp.gate_up_proj", "ffn_up"},
    // Qwen2-MoE's shared expert and its gate ([1, hidden] in HF, [hidden] in the file)
    {"mlp.shared_expert.gate_proj", "ffn_gate_shexp"}, {"mlp.shared_expert.up_proj", "ffn_up_shexp"},
    {"mlp.shared_expert.down_proj", "ffn_down_shexp"}, {"mlp.shared_expert_gate", "ffn_gate_inp_shexp"},
    // HunYuan's q/k norms; HunYuan-MoE's router and shared MLP
    {"self_attn.query_layernorm", "attn_q_norm"},  {"self_attn.key_layernorm", "attn_k_norm"},
    {"mlp.gate.wg", "ffn_gate_inp"},               {"mlp.shared_mlp.gate_proj", "ffn_gate_shexp"},
    {"mlp.shared_mlp.up_proj", "ffn_up_shexp"},    {"mlp.shared_mlp.down_proj", "ffn_down_shexp"},
    // LFM2: its own module names, and the short-convolution layers (conv.conv [H, 1, L] stored squeezed)
    {"operator_norm", "attn_norm"},            {"ffn_norm", "ffn_norm"},
    {"self_attn.q_layernorm", "attn_q_norm"},  {"self_attn.k_layernorm", "attn_k_norm"},
    {"self_attn.out_proj", "attn_output"},     {"feed_forward.w1", "ffn_gate"},
    {"feed_forward.w3", "ffn_up"},             {"feed_forward.w2", "ffn_down"},
    {"feed_forward.gate", "ffn_gate_inp"},  // LFM2-MoE's router
    {"conv.in_proj", "shortconv.in_proj"},     {"conv.conv", "shortconv.conv"},
    {"conv.out_proj", "shortconv.out_proj"},
    // DeepSeek's MLA (kv_b_proj as one attn_kv_b in files before April 2025; split: read_kv_b) and shared experts
    {"self_attn.q_a_proj", "attn_q_a"},        {"self_attn.q_a_layernorm", "attn_q_a_norm"},
    {"self_attn.q_b_proj", "attn_q_b"},        {"self_attn.kv_a_proj_with_mqa", "attn_kv_a_mqa"},
    {"self_attn.kv_a_layernorm", "attn_kv_a_norm"}, {"self_attn.kv_b_proj", "attn_kv_b"},
    {"mlp.shared_experts.gate_proj", "ffn_gate_shexp"}, {"mlp.shared_experts.up_proj", "ffn_up_shexp"},
    {"mlp.shared_experts.down_proj", "ffn_down_shexp"},
};
constexpr const char* kKvBSuffix = ".self_attn.kv_b_proj.weight";

// transformers 5's stacked experts, the names DecoderModel::load_moe asks for: llama.cpp stores
// [E, I, hidden] ffn_gate_exps and ffn_up_exps (interleaved per expert into gate_up on read) and
// [E, hidden, I] ffn_down_exps.
constexpr const char* kGateUpSuffix = ".mlp.experts.gate_up_proj";
constexpr const char* kDownSuffix = ".mlp.experts.down_proj";
// GPT-OSS's expert biases: [E, 2I] = [gate | up] per expert (ffn_{gate,up}_exps.bias), [E, hidden].
constexpr const char* kGateUpBiasSuffix = ".mlp.experts.gate_up_proj_bias";
constexpr const char* kDownBiasSuffix = ".mlp.experts.down_proj_bias";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "model.layers.N<suffix>" -> "N"; "" when `hf` is not that. A ".mlp." suffix also matches LFM2-MoE's
// ".feed_forward." spelling of the same tensor.
std::string stacked_layer(const std::string& hf, const std::string& suffix) {
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) != 0) return "";
  if (ends_with(hf, suffix)) return hf.substr(prefix.size(), hf.size() - suffix.size() - prefix.size());
  if (suffix.rfind(".mlp.", 0) == 0) return stacked_layer(hf, ".feed_forward." + suffix.substr(5));
  return "";
}

std::string shape_string(const std::vector<int64_t>& s) { return Tensor(nullptr, DType::kF32, s).shape_str(); }

bool is_float_type(uint32_t t) { return t == 0 || t == 1 || t == 30; }  // F32, F16, BF16
constexpr uint32_t kMxfp4 = static_cast<uint32_t>(GgmlType::kMXFP4);
constexpr int64_t kMxfp4BlockBytes = 17;  // {u8 e; u8 qs[16]} per 32 values

}  // namespace

std::string gguf_tensor_name(const std::string& hf, bool post_attention_norm) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  if (hf == "model.embedding_norm.weight") return "token_embd_norm.weight";  // LFM2's final norm, as llama.cpp names it
  if (const std::string l = stacked_layer(hf, kDownSuffix); !l.empty()) return "blk." + l + ".ffn_down_exps.weight";
  if (const std::string l = stacked_layer(hf, kDownBiasSuffix); !l.empty()) return "blk." + l + ".ffn_down_exps.bias";
  if (const std::string l = stacked_layer(hf, ".self_attn.sinks"); !l.empty()) return "blk." + l + ".attn_sinks.weight";
  if (const std::string l = stacked_layer(hf, ".mlp.gate.e_score_correction_bias"); !l.empty())
    return "blk." + l + ".exp_probs_b.bias";  // DeepSeek-V3's router score bias
  if (const std::string l = stacked_layer(hf, ".mlp.moe_statics.e_score_correction_bias"); !l.empty())
    return "blk." + l + ".exp_probs_b.bias";  // ERNIE 4.5 MoE's ([1, E] or squeezed)
  if (const std::string l = stacked_layer(hf, ".feed_forward.expert_bias"); !l.empty())
    return "blk." + l + ".exp_probs_b.bias";  // LFM2-MoE's
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) != 0) return "";
  const size_t dot = hf.find('.', prefix.size());
  const size_t last = hf.rfind('.');
  if (dot == std::string::npos || last <= dot) return "";
  const std::string layer = hf.substr(prefix.size(), dot - prefix.size());
  const std::string module = hf.substr(dot + 1, last - dot - 1), suffix = hf.substr(last);  // ".weight"/".bias"
  for (const auto& [from, to] : kLayerNames) {
    if (module != from) continue;
    const std::string name = post_attention_norm && module == "post_attention_layernorm" ? "post_attention_norm" : to;
    return "blk." + layer + "." + name + suffix;
  }
  return "";
}

GgufWeights::GgufWeights(std::unique_ptr<GgufShards> files, const ModelConfig& c)
    : files_(std::move(files)),
      post_attention_norm_(c.architecture == "Olmo2ForCausalLM" || c.architecture == "Olmo3ForCausalLM" ||
                           c.architecture == "Gemma3ForCausalLM" ||
                           c.architecture == "Gemma2ForCausalLM" || c.architecture == "GptOssForCausalLM" ||
                           c.architecture == "Exaone4ForCausalLM" || c.linear_attn.num_k_heads > 0),
      // convert_hf_to_gguf.py's LlamaModel interleaves the two rotary halves of each Q/K head so
      // that ggml's GPT-J-style RoPE matches HF's rotate_half; Qwen, OLMo-2 and Gemma files use NeoX RoPE.
      llama_(c.architecture == "LlamaForCausalLM" || c.architecture == "MixtralForCausalLM" ||  // "llama" in the file
             c.architecture == "GraniteForCausalLM" ||  // GraniteModel (and GraniteMoeModel) convert as LlamaModel
             c.architecture == "GraniteMoeForCausalLM" ||
             c.architecture == "SmolLM3ForCausalLM"),  // SmolLM3Model converts as LlamaModel too
      norms_include_one_(c.architecture == "Gemma3ForCausalLM" || c.architecture == "Gemma2ForCausalLM" ||
                         c.architecture == "GemmaForCausalLM"),
      num_heads_(c.num_attention_heads),
      num_kv_heads_(c.num_key_value_heads) {
  if (!c.linear_layers.empty() && c.linear_attn.num_k_heads > 0) {  // Qwen3-Next / Qwen3.5 (zero-centred norms stored 1 + w)
    gdn_ = c.architecture == "Qwen3NextForCausalLM" ? 1 : 2;
    norms_include_one_ = true;
    gdn_nk_ = c.linear_attn.num_k_heads, gdn_nv_ = c.linear_attn.num_v_heads;
    gdn_dk_ = c.linear_attn.head_k_dim, gdn_dv_ = c.linear_attn.head_v_dim;
  }
}

bool GgufWeights::has(const std::string& name) const {
  if (bool found = false; gdn_has(name, found)) return found;
  for (auto [suffix, kind] : {std::pair{kGateUpSuffix, ".weight"}, std::pair{kGateUpBiasSuffix, ".bias"}})
    if (const std::string l = stacked_layer(name, suffix); !l.empty())
      return files_->find_tensor("blk." + l + ".ffn_gate_up_exps" + kind).info ||
             (files_->find_tensor("blk." + l + ".ffn_gate_exps" + kind).info &&
              files_->find_tensor("blk." + l + ".ffn_up_exps" + kind).info);
  if (const std::string l = stacked_layer(name, kKvBSuffix); !l.empty() && kv_b_split(l)) return true;
  const std::string g = gguf_tensor_name(name, post_attention_norm_);
  return !g.empty() && files_->find_tensor(g).info != nullptr;
}

bool GgufWeights::kv_b_split(const std::string& layer) const {
  return !files_->find_tensor("blk." + layer + ".attn_kv_b.weight").info &&
         files_->find_tensor("blk." + layer + ".attn_k_b.weight").info &&
         files_->find_tensor("blk." + layer + ".attn_v_b.weight").info;
}

void GgufWeights::read_kv_b(const std::string& layer, const std::vector<int64_t>& expected, DType dtype,
                            void* dst) const {
  const std::string hf = "model.layers." + layer + kKvBSuffix;
  const GgufShards::Found k = files_->find_tensor("blk." + layer + ".attn_k_b.weight");
  const GgufShards::Found v = files_->find_tensor("blk." + layer + ".attn_v_b.weight");
  const std::vector<int64_t> ks = k.info->shape(), vs = v.info->shape();  // [heads, r, nope], [heads, dv, r]
  if (expected.size() != 2 || ks.size() != 3 || vs.size() != 3 || ks[0] != vs[0] || ks[1] != vs[2] ||
      ks[1] != expected[1] || ks[0] * (ks[2] + vs[1]) != expected[0])
    throw Error(k.file->path() + ": attn_k_b " + shape_string(ks) + " and attn_v_b " + shape_string(vs) +
                " of layer " + layer + " do not make kv_b_proj " + shape_string(expected));
  find_gguf("blk." + layer + ".attn_k_b.weight", hf, ks);  // dequantizable types
  find_gguf("blk." + layer + ".attn_v_b.weight", hf, vs);
  const int64_t heads = ks[0], r = ks[1], dn = ks[2], dv = vs[1];
  std::vector<float> kb(static_cast<size_t>(k.info->numel())), vb(static_cast<size_t>(v.info->numel()));
  dequantize(k.info->type, k.data(), kb.data(), k.info->numel());
  dequantize(v.info->type, v.data(), vb.data(), v.info->numel());
  std::vector<float> w(static_cast<size_t>(expected[0] * r));  // per head: nope rows (k_b transposed), then v rows
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t c = 0; c < r; ++c) {
      for (int64_t d = 0; d < dn; ++d) w[(h * (dn + dv) + d) * r + c] = kb[(h * r + c) * dn + d];
      for (int64_t j = 0; j < dv; ++j) w[(h * (dn + dv) + dn + j) * r + c] = vb[(h * dv + j) * r + c];
    }
  store_f32_as(w.data(), static_cast<int64_t>(w.size()), dtype, dst);
}

GgufShards::Found GgufWeights::find(const std::string& name, const std::vector<int64_t>& expected) const {
  return find_gguf(gguf_tensor_name(name, post_attention_norm_), name, expected);
}

GgufShards::Found GgufWeights::find_gguf(const std::string& g, const std::string& name,
                                         const std::vector<int64_t>& expected) const {
  const GgufShards::Found f = files_->find_tensor(g);
  if (g.empty() || !f.info)
    throw Error(files_->first().path() + ": missing tensor '" + (g.empty() ? name : g) + "' (for " + name + ")");
  const GgufTensorInfo* t = f.info;
  // Dims of size 1 do not change the layout, and the converter squeezes some (Qwen2-MoE's shared expert
  // gate [1, hidden] -> [hidden]; LFM2's conv [H, 1, L] -> [H, L]).
  auto squeezed = [](std::vector<int64_t> s) {
    s.erase(std::remove(s.begin(), s.end(), int64_t{1}), s.end());
    return s;
  };
  if (t->shape() != expected && squeezed(t->shape()) != squeezed(expected))
    throw Error(f.file->path() + ": tensor '" + g + "' has shape " + shape_string(t->shape()) + ", expected " +
                shape_string(expected));
  if (!ggml_can_dequantize(t->type))
    throw Error(f.file->path() + ": tensor '" + g + "' has type " + ggml_type_name(t->type) +
                ", which Vireo cannot load (supported: " + ggml_dequantizable_types() + ")");
  return f;
}

std::string GgufWeights::expert_layer(const std::string& name, bool gate_up) {
  return stacked_layer(name, gate_up ? kGateUpSuffix : kDownSuffix);
}

int GgufWeights::permuted_heads(const std::string& name) const {
  if (!llama_) return 0;
  if (name.find("self_attn.q_proj.") != std::string::npos) return num_heads_;
  if (name.find("self_attn.k_proj.") != std::string::npos) return num_kv_heads_;
  return 0;
}

std::optional<Tensor> GgufWeights::view(const std::string& name, const std::vector<int64_t>& expected) const {
  if (!stacked_layer(name, kGateUpSuffix).empty() || !stacked_layer(name, kGateUpBiasSuffix).empty())
    return std::nullopt;  // two tensors, interleaved by read()
  if (const std::string l = stacked_layer(name, kKvBSuffix); !l.empty() && kv_b_split(l)) return std::nullopt;
  if (bool found = false; gdn_has(name, found)) return std::nullopt;  // rebuilt by read()
  const GgufShards::Found f = find(name, expected);
  const GgufTensorInfo& t = *f.info;
  if (!is_float_type(t.type) || permuted_heads(name) > 0) return std::nullopt;
  const DType dt = t.type == 0 ? DType::kF32 : t.type == 1 ? DType::kF16 : DType::kBF16;
  return Tensor(const_cast<uint8_t*>(f.data()), dt, expected);  // find() checked it holds `expected`
}

void GgufWeights::read(const std::string& name, const std::vector<int64_t>& expected, DType dtype, void* dst) const {
  for (auto [suffix, kind] : {std::pair{kGateUpSuffix, ".weight"}, std::pair{kGateUpBiasSuffix, ".bias"}})
    if (const std::string l = stacked_layer(name, suffix); !l.empty()) {
      read_gate_up(l, kind, expected, dtype, dst);
      return;
    }
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16)  // checked before any thread starts
    throw Error("GGUF weights: cannot store " + name + " as " + std::string(dtype_name(dtype)));
  if (const std::string l = stacked_layer(name, kKvBSuffix); !l.empty() && kv_b_split(l))
    return read_kv_b(l, expected, dtype, dst);
  if (gdn_read(name, expected, dtype, dst)) return;
  const GgufShards::Found f = find(name, expected);
  const GgufTensorInfo& t = *f.info;
  const int64_t row = t.ne[0], rows = t.numel() / row;
  const size_t row_bytes = static_cast<size_t>(t.nbytes / rows), es = dtype_size(dtype);
  auto* out = static_cast<uint8_t*>(dst);
  const int heads = permuted_heads(name);
  if (heads == 0) {
    // Threads take chunks of < 2^20 values (dequantize stays on the calling thread below that), so
    // the float scratch stays small and the dtype conversion runs in parallel too.
    const int64_t chunk = std::max<int64_t>(1, ((int64_t{1} << 20) - 1) / row);
    const int64_t num_chunks = (rows + chunk - 1) / chunk;
    const int nt = static_cast<int>(std::clamp<int64_t>(num_chunks, 1, std::max(1u, std::thread::hardware_concurrency())));
    auto work = [&](int64_t first) {
      std::vector<float> tmp(static_cast<size_t>(std::min(rows, chunk) * row));
      for (int64_t c = first; c < num_chunks; c += nt) {
        const int64_t r = c * chunk, n = std::min(chunk, rows - r);
        dequantize(t.type, f.data() + r * row_bytes, tmp.data(), n * row);
        store_f32_as(tmp.data(), n * row, dtype, out + r * row * es);
      }
    };
    std::vector<std::thread> threads;
    for (int i = 1; i < nt; ++i) threads.emplace_back(work, i);
    work(0);
    for (auto& th : threads) th.join();
    return;
  }
  // Biases (one value per row) move as their rows do.
  const int64_t prow = t.ne.size() == 1 ? 1 : row, prows = t.numel() / prow;
  std::vector<float> src(static_cast<size_t>(t.numel())), hf(src.size());
  dequantize(t.type, f.data(), src.data(), t.numel());
  unpermute_rows(reinterpret_cast<const uint8_t*>(src.data()), prows, prow * sizeof(float), heads,
                 reinterpret_cast<uint8_t*>(hf.data()), f.file->path(), name);
  store_f32_as(hf.data(), t.numel(), dtype, dst);
}

// Within each head of D rows, file row 2i + s holds HF row s * D/2 + i (s = 0, 1 picks the rotary half).
void GgufWeights::unpermute_rows(const uint8_t* src, int64_t rows, size_t row_bytes, int heads, uint8_t* dst,
                                 const std::string& path, const std::string& name) {
  if (rows % (2 * heads) != 0)
    throw Error(path + ": tensor for " + name + " has " + std::to_string(rows) + " rows, not " +
                std::to_string(heads) + " heads of an even size");
  const int64_t D = rows / heads, half = D / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t s = 0; s < 2; ++s)
        std::memcpy(dst + (h * D + s * half + i) * row_bytes, src + (h * D + 2 * i + s) * row_bytes, row_bytes);
}

// gate_up [E, 2I, hidden]: expert e's rows are ffn_gate_exps[e] ([I, hidden]) then ffn_up_exps[e]; the
// biases [E, 2I] likewise from [E, I] each. Each expert's slice of a GGUF tensor is whole rows, so
// quantized blocks never straddle experts. A fused ffn_gate_up_exps (the converter's fuse_gate_up_exps)
// already has this layout.
void GgufWeights::read_gate_up(const std::string& layer, const std::string& kind, const std::vector<int64_t>& expected,
                               DType dtype, void* dst) const {
  const bool bias = kind == ".bias";
  if (expected.size() != (bias ? 2u : 3u) || expected[1] % 2 != 0)
    throw Error("GGUF weights: gate_up of layer " + layer + " must be [E, 2I" + (bias ? "]" : ", hidden]"));
  const int64_t E = expected[0], I = expected[1] / 2, H = bias ? 1 : expected[2];
  const std::string hf = "model.layers." + layer + (bias ? kGateUpBiasSuffix : kGateUpSuffix);
  if (const std::string fused = "blk." + layer + ".ffn_gate_up_exps" + kind; files_->find_tensor(fused).info) {
    const GgufShards::Found f = find_gguf(fused, hf, expected);
    std::vector<float> tmp(static_cast<size_t>(f.info->numel()));
    dequantize(f.info->type, f.data(), tmp.data(), f.info->numel());
    store_f32_as(tmp.data(), f.info->numel(), dtype, dst);
    return;
  }
  const std::vector<int64_t> part_shape = bias ? std::vector<int64_t>{E, I} : std::vector<int64_t>{E, I, H};
  const GgufShards::Found parts[2] = {find_gguf("blk." + layer + ".ffn_gate_exps" + kind, hf, part_shape),
                                      find_gguf("blk." + layer + ".ffn_up_exps" + kind, hf, part_shape)};
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16)
    throw Error("GGUF weights: cannot store " + hf + " as " + std::string(dtype_name(dtype)));
  const size_t es = dtype_size(dtype);
  auto* out = static_cast<uint8_t*>(dst);
  const int nt = static_cast<int>(std::clamp<int64_t>(E, 1, std::max(1u, std::thread::hardware_concurrency())));
  auto work = [&](int64_t first) {
    std::vector<float> tmp(static_cast<size_t>(I * H));
    for (int64_t e = first; e < E; e += nt)
      for (int half = 0; half < 2; ++half) {
        const GgufTensorInfo& t = *parts[half].info;
        const size_t expert_bytes = static_cast<size_t>(t.nbytes / E);
        dequantize(t.type, parts[half].data() + e * expert_bytes, tmp.data(), I * H);
        store_f32_as(tmp.data(), I * H, dtype, out + ((e * 2 + half) * I * H) * es);
      }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < nt; ++i) threads.emplace_back(work, i);
  work(0);
  for (auto& th : threads) th.join();
}

bool GgufWeights::stored_as_mxfp4(const std::string& name) const {
  auto mxfp4 = [&](const std::string& g) {
    const GgufShards::Found f = files_->find_tensor(g);
    return f.info && f.info->type == kMxfp4;
  };
  if (const std::string l = stacked_layer(name, kGateUpSuffix); !l.empty()) {
    const std::string b = "blk." + l + ".";
    if (files_->find_tensor(b + "ffn_gate_up_exps.weight").info) return mxfp4(b + "ffn_gate_up_exps.weight");
    return mxfp4(b + "ffn_gate_exps.weight") && mxfp4(b + "ffn_up_exps.weight");
  }
  if (!stacked_layer(name, kGateUpBiasSuffix).empty() || permuted_heads(name) > 0) return false;
  const std::string g = gguf_tensor_name(name, post_attention_norm_);
  return !g.empty() && mxfp4(g);
}

// Each piece is a run of whole ggml blocks that lands at one place of the output: the whole tensor, or (gate
// and up stored apart) expert e's gate rows at rows [2e I, 2e I + I) and its up rows after them, as
// read_gate_up places them. A block never straddles rows (rows are multiples of 32 values).
void GgufWeights::read_mxfp4(const std::string& name, const std::vector<int64_t>& expected, uint8_t* blocks,
                             uint8_t* scales) const {
  if (!stored_as_mxfp4(name)) throw Error(files_->first().path() + ": the tensor for " + name + " is not MXFP4");
  if (expected.empty() || expected.back() % 32 != 0)
    throw Error("GGUF weights: " + name + " as MXFP4 needs rows of a multiple of 32 values, got " +
                shape_string(expected));
  struct Piece {
    const uint8_t* src;
    int64_t num_blocks, first_block;  // first_block: where it goes in blocks / scales, in blocks
  };
  std::vector<Piece> pieces;
  const std::string l = stacked_layer(name, kGateUpSuffix);
  const std::string fused = "blk." + l + ".ffn_gate_up_exps.weight";
  if (!l.empty() && !files_->find_tensor(fused).info) {
    if (expected.size() != 3 || expected[1] % 2 != 0)
      throw Error("GGUF weights: gate_up of layer " + l + " must be [E, 2I, hidden]");
    const int64_t E = expected[0], I = expected[1] / 2, H = expected[2], per = I * H / 32;
    const std::vector<int64_t> part{E, I, H};
    const GgufShards::Found parts[2] = {find_gguf("blk." + l + ".ffn_gate_exps.weight", name, part),
                                        find_gguf("blk." + l + ".ffn_up_exps.weight", name, part)};
    for (int64_t e = 0; e < E; ++e)
      for (int half = 0; half < 2; ++half)
        pieces.push_back({parts[half].data() + e * per * kMxfp4BlockBytes, per, (2 * e + half) * per});
  } else {
    const GgufShards::Found f = l.empty() ? find(name, expected) : find_gguf(fused, name, expected);
    const int64_t total = f.info->numel() / 32, chunk = int64_t{1} << 16;  // chunks for the threads
    for (int64_t b = 0; b < total; b += chunk)
      pieces.push_back({f.data() + b * kMxfp4BlockBytes, std::min(chunk, total - b), b});
  }
  parallel_ranges(static_cast<int64_t>(pieces.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Piece& p = pieces[i];
      repack_ggml_mxfp4(p.src, p.num_blocks, blocks + p.first_block * 16, scales + p.first_block);
    }
  });
}

}  // namespace vireo
