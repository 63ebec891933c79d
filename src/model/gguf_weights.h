// The weights of a GGUF file under HF names: blk.N.attn_q.weight serves
// model.layers.N.self_attn.q_proj.weight, dequantized to the model's dtype, and for the llama
// architecture with the Q/K row permutation of llama.cpp's converter undone.
#pragma once
#include <memory>
#include <string>

#include "gguf/gguf_shards.h"
#include "model/model_config.h"
#include "model/weight_source.h"

namespace vireo {

// llama.cpp's tensor name for an HF one ("lm_head.weight" -> "output.weight"); "" when there is none.
// OLMo-2, Gemma 2/3 and GPT-OSS (post_attention_norm set) name their post-attention norm post_attention_norm where the
// others use ffn_norm (Gemma 3's ffn_norm is its pre_feedforward_layernorm).
std::string gguf_tensor_name(const std::string& hf_name, bool post_attention_norm);

class GgufWeights final : public WeightSource {
 public:
  GgufWeights(std::unique_ptr<GgufShards> files, const ModelConfig& config);

  bool has(const std::string& name) const override;
  std::optional<Tensor> view(const std::string& name, const std::vector<int64_t>& expected) const override;
  void read(const std::string& name, const std::vector<int64_t>& expected, DType dtype, void* dst) const override;
  bool norms_include_one() const override { return norms_include_one_; }
  bool experts_as_rows() const override { return true; }
  // MXFP4 tensors (GPT-OSS's experts) repacked into the HF layout (gguf/gguf_mxfp4.h) instead of dequantized.
  bool stored_as_mxfp4(const std::string& name) const override;
  void read_mxfp4(const std::string& name, const std::vector<int64_t>& expected, uint8_t* blocks,
                  uint8_t* scales) const override;
  // Q4_0 ... Q6_K linear weights as stored (llama's permuted Q/K rows put back in HF order).
  std::optional<DType> packed_dtype(const std::string& name, const std::vector<int64_t>& expected) const override;
  void read_packed(const std::string& name, const std::vector<int64_t>& expected, void* dst) const override;
  std::optional<Tensor> view_packed(const std::string& name, const std::vector<int64_t>& expected) const override;

 private:
  // The GGUF tensor behind `name`, checked for presence, shape and a type we can dequantize.
  GgufShards::Found find(const std::string& name, const std::vector<int64_t>& expected) const;
  // The same for a GGUF name `g` serving HF `name` (errors name both).
  GgufShards::Found find_gguf(const std::string& g, const std::string& name, const std::vector<int64_t>& expected) const;
  // A sparse layer's [E, 2I, hidden] gate_up (kind ".weight") or [E, 2I] biases (".bias") from
  // ffn_gate_exps and ffn_up_exps, or from one ffn_gate_up_exps where the file has it fused.
  void read_gate_up(const std::string& layer, const std::string& kind, const std::vector<int64_t>& expected, DType dtype,
                    void* dst) const;
  // DeepSeek's kv_b_proj [heads * (nope + v), kv_lora] rebuilt from llama.cpp's split attn_k_b (per head
  // transposed: [heads, kv_lora, nope]) and attn_v_b ([heads, v, kv_lora]).
  void read_kv_b(const std::string& layer, const std::vector<int64_t>& expected, DType dtype, void* dst) const;
  bool kv_b_split(const std::string& layer) const;
  // Qwen3-Next / Qwen3.5 DeltaNet tensors (gguf_weights_gdn.cc) under the HF names the loader asks for
  // (linear_attn.in_proj_qkvz, in_proj_qkv, conv1d, A_log, ...): false when `name` is not one of them.
  bool gdn_has(const std::string& name, bool& found) const;
  bool gdn_read(const std::string& name, const std::vector<int64_t>& expected, DType dtype, void* dst) const;
  // The GGUF tensor `g` dequantized to F32, checked to hold `numel` values (errors name HF `name`).
  std::vector<float> dequantized(const std::string& g, const std::string& name, int64_t numel) const;
  // Heads whose rows the converter interleaved (q: attention heads, k: KV heads); 0: not permuted.
  int permuted_heads(const std::string& name) const;
  // Undoes the converter's permute() of `heads` heads: rows rows of row_bytes each from src (file order) to
  // dst (HF order). Throws (naming `path` and `name`) unless the heads have an even number of rows.
  static void unpermute_rows(const uint8_t* src, int64_t rows, size_t row_bytes, int heads, uint8_t* dst,
                             const std::string& path, const std::string& name);
  // The layer ("3") of a stacked expert weight's HF name: transformers 5's mlp.experts.gate_up_proj when
  // gate_up, else mlp.experts.down_proj; "" for any other name.
  static std::string expert_layer(const std::string& name, bool gate_up);

  std::unique_ptr<GgufShards> files_;
  bool post_attention_norm_ = false, llama_ = false, norms_include_one_ = false;
  int num_heads_ = 0, num_kv_heads_ = 0;
  // DeltaNet layout: 0 none, 1 Qwen3-Next (HF's grouped value heads), 2 Qwen3.5 (value heads tiled by the
  // converter: HF head g * r + t at t * nk + g); heads and head dims.
  int gdn_ = 0;
  int64_t gdn_nk_ = 0, gdn_nv_ = 0, gdn_dk_ = 0, gdn_dv_ = 0;
};

}  // namespace vireo
