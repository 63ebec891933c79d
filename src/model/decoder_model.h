// The generic decoder-only transformer every registered architecture maps onto.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/arch_spec.h"
#include "model/model.h"
#include "model/safetensors.h"

namespace vireo {

// Device weights of one decoder layer (HF module names in comments). Empty tensors are absent.
struct DecoderLayerWeights {
  Tensor input_norm;       // input_layernorm.weight [hidden] (pre-norm only)
  Tensor qkv_w, qkv_b;     // self_attn.{q,k,v}_proj fused: [(H + 2*Hkv) * D, hidden], bias [(H + 2*Hkv) * D]
  Tensor q_norm, k_norm;   // self_attn.q_norm/k_norm: [D] per head or [H*D] / [Hkv*D] full width
  Tensor o_w, o_b;         // self_attn.o_proj: [hidden, H*D]
  Tensor post_attn_norm;   // post_attention_layernorm.weight [hidden]
  Tensor post_ffn_norm;    // post_feedforward_layernorm.weight [hidden] (post-norm only)
  Tensor gate_up_w, gate_up_b;  // mlp.{gate,up}_proj fused: [2 * inter, hidden]
  Tensor down_w, down_b;   // mlp.down_proj: [hidden, inter]
};

// Per-step scratch, grown when a step needs more rows than the last one.
struct DecoderWorkspace {
  int64_t token_cap = 0, logit_cap = 0, int_cap = 0;
  Tensor ints;                  // I32 packed step inputs
  Tensor residual, hidden, branch;  // [T, hidden]
  Tensor qkv;                   // [T, (H + 2*Hkv) * D]
  Tensor q, attn;               // [T, H * D]
  Tensor gate_up;               // [T, 2 * inter]
  Tensor act;                   // [T, inter]
  Tensor rows;                  // [M, hidden] (logits rows)
  Tensor logits;                // [M, vocab]
};

class DecoderModel final : public Model {
 public:
  // checkpoint == nullptr means dummy weights from opts.seed.
  DecoderModel(ModelConfig config, const ArchSpec& spec, std::unique_ptr<Backend> backend,
                std::unique_ptr<Checkpoint> checkpoint, const LoadOptions& opts);
  ~DecoderModel() override;

  const ModelConfig& config() const override { return cfg_; }
  Backend& backend() override { return *be_; }
  KvCache allocate_kv_cache(int num_blocks, int block_size) override;
  void free_kv_cache(KvCache& kv) override;
  size_t kv_block_bytes(int block_size) const override;
  void forward(const StepInput& in, KvCache& kv, std::vector<float>& logits) override;

 private:
  struct Part {
    std::string name;
    std::vector<int64_t> shape;
  };
  // Loads parts (concatenated along dim 0) onto the device. stddev: dummy init (0 = ones).
  Tensor load(const std::string& fused_name, const std::vector<Part>& parts, float stddev);
  void load_weights();
  void ensure_workspace(int64_t tokens, int64_t logit_rows, int64_t ints);
  void free_workspace();

  ModelConfig cfg_;
  ArchSpec spec_;
  std::unique_ptr<Backend> be_;
  std::unique_ptr<Checkpoint> ckpt_;  // mmaps stay alive: CPU weights may be views into them
  LoadOptions opts_;
  DType wdtype_;
  Tensor embed_, final_norm_, lm_head_, rope_;
  std::vector<DecoderLayerWeights> layers_;
  std::vector<Tensor> owned_;  // every device tensor to free on destruction
  DecoderWorkspace ws_;
};

}  // namespace vireo
