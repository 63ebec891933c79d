// What the engine sees of a model: a config, a paged KV cache, and forward(step) -> logits.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model_config.h"

namespace vireo {

struct LoraAdapter;

// Host-side inputs of one engine step: a flat batch of T tokens from S sequences, each
// sequence's tokens contiguous (chunked prefill and decode rows mixed freely).
struct StepInput {
  std::vector<int32_t> token_ids;        // [T]
  std::vector<int32_t> positions;        // [T]
  std::vector<int32_t> slot_mapping;     // [T] block_id * block_size + offset in the KV cache
  std::vector<int32_t> query_start;      // [S + 1] cumulative token offsets
  std::vector<int32_t> seq_lens;         // [S] context length after this step
  std::vector<int32_t> block_tables;     // [S * max_blocks_per_seq], padded with 0
  int max_blocks_per_seq = 0;
  std::vector<int32_t> logits_indices;   // rows of T whose logits are wanted (e.g. last of each seq)
  // Models with recurrent state (Model::num_state_slots() > 0): the state slot of each sequence, in
  // [0, num_state_slots()); the engine gives each running request its own. Empty: slot s for
  // sequence s (tests and single-batch tools).
  std::vector<int32_t> state_slots;      // [S]
  // LoRA adapter of each sequence (Model::add_lora ids; 0: the base model). Empty: none anywhere.
  std::vector<int32_t> lora_ids;         // [S]
  // Async scheduling (launch_sample with tokens_from_last): token i's id is row ids_from_last[i] of the
  // previously launched step's samples, for i < ids_from_last.size(); empty: row i for every token.
  std::vector<int32_t> ids_from_last;
};

// Per-layer K and V pages: [num_blocks, block_size, num_kv_heads, head_dim] each. A short-convolution
// layer (LFM2) keeps its state the same way: k[l] holds bx of every token, [num_blocks, block_size,
// hidden], addressed by the same block tables and slots, and v[l] is empty.
struct KvCache {
  std::vector<Tensor> k, v;
  int num_blocks = 0;
  int block_size = 16;
};

struct LoadOptions {
  std::string load_format = "auto";  // "auto" (by path) | "safetensors" | "gguf" | "dummy" (random, seeded)
  uint64_t seed = 0;                 // dummy weights
  // vLLM --dtype. Weights and the KV cache are stored in backend.activation_dtype() (F32 on the
  // CPU; the CUDA backend picks it from --dtype when created), so this is informational here.
  std::string dtype = "auto";
  // CUDA graphs for decode-only steps (every sequence one token) on backends that support them:
  // batches up to max_graph_batch_size are padded to the next capture size (1, 2, 4, 8, 16, 24, ...)
  // and replayed. enforce_eager (vLLM --enforce-eager) keeps every step eager.
  bool enforce_eager = false;
  int max_graph_batch_size = 256;  // min(--max-num-seqs, 512), as vLLM's capture sizes
  int max_num_seqs = 256;          // --max-num-seqs: the recurrent-state slots of hybrid models
  int max_model_len = 0;           // block-table width of the graphs; 0: max_position_embeddings
  // vLLM --hf-overrides: fields merged into config.json before it is parsed (objects merged key by key,
  // anything else replaced); null or {}: none.
  nlohmann::json hf_overrides;
  // MXFP4 experts (GPT-OSS checkpoints and its dummy weights) stay packed where the backend's moe takes
  // them (Backend::supports_mxfp4_moe), a quarter of the bytes of BF16; true, or a backend without them:
  // dequantized to the weight dtype at load (VIREO_MXFP4=dequantize; for A/B runs).
  bool dequantize_mxfp4 = false;
  // GGUF linear weights in a ggml block type (Q4_0 ... Q6_K) stay packed where the backend's linear takes
  // them (Backend::supports_packed_linear: the CPU); true (VIREO_GGUF=dequantize): dequantized at load.
  bool dequantize_gguf = false;
  // Dummy weights only: the linear weights in this block type (VIREO_DUMMY_QUANT=Q4_K, ...) where the
  // backend takes it, for speed runs of packed weights at real sizes; kF32: the weight dtype as usual.
  DType dummy_block_dtype = DType::kF32;
  // --runner pooling: the lm_head is never run, so a checkpoint without one (a base model's) loads, the
  // embeddings standing in for it.
  bool pooling = false;
  // vLLM --quantization: "" (the checkpoint's own), gguf, mxfp4, or fp8 / compressed-tensors. An FP8
  // checkpoint's weights are dequantized at load; with "fp8" the layers' dense projections are then
  // (re)quantized to FP8 per row (fp8_linears), as are a BF16 checkpoint's or dummy weights (vLLM's online
  // FP8).
  std::string quantization;
  // Set by load_model from quantization: the projections in FP8 E4M3 with one scale per output row, run
  // by FP8 GEMMs where the backend has them (Backend::supports_fp8_linear), else stored back dequantized.
  bool fp8_linears = false;
  // vLLM --kv-cache-dtype: "auto" (the activation dtype) or "fp8" / "fp8_e4m3": attention layers' K and V
  // stored as E4M3 codes (value = code, scale 1) where the backend takes them (supports_fp8_kv_cache).
  std::string kv_cache_dtype = "auto";
};

// Host-side sampling inputs of a step: one SamplingRow (backend/op_params.h) per logits row.
struct SamplingBatch {
  std::vector<SamplingRow> rows;         // [M]
  std::vector<int32_t> penalty_tokens;   // [E, 2] (token id, times in the output)
  std::vector<int32_t> mask_tokens;      // [E2]
  std::vector<int32_t> bias_entries;     // [E3, 3] (row, token id, bias bits): logit_bias, added first
  int num_top_logprobs = 0;              // N, the largest any row asks for
  // Structured outputs: bitmask_rows[g] is the sampling row whose next token is limited to the set
  // bits of token_bitmask row g (bit v % 32 of word v / 32 set = token v allowed). A row has
  // bitmask_words = ceil(V / 32) words, V the logits width (the model's vocab_size). Applied before
  // logit_bias and the penalties: a token outside the mask gets -inf (never sampled, logprob -inf).
  std::vector<int32_t> bitmask_rows;     // [G], distinct, ascending
  std::vector<uint32_t> token_bitmask;   // [G, bitmask_words]
  // Or, when set (token_bitmask then empty), the rows are written by this into [G, bitmask_words] words
  // once the step's forward has been issued: the host computes the masks while the device runs it.
  std::function<void(uint32_t* words)> fill_token_bitmask;
};

// What comes back to the host per logits row: the token and N + 1 logprobs.
struct SampledRows {
  int num_top_logprobs = 0;       // N
  std::vector<int32_t> tokens;    // [M]
  std::vector<float> logprobs;    // [M, 1 + N]: the token's raw logprob, then the top-N
  std::vector<int32_t> top_ids;   // [M, N]
  std::vector<int32_t> ranks;     // [M] the token's rank in its raw row (SampleParams::out_ranks) when a
                                  // row is forced (prompt logprobs), else empty
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual Backend& backend() = 0;

  // Allocates the KV cache for num_blocks blocks on the model's backend.
  virtual KvCache allocate_kv_cache(int num_blocks, int block_size) = 0;
  virtual void free_kv_cache(KvCache& kv) = 0;
  // Bytes one KV block takes over all layers (to size the cache from free memory).
  virtual size_t kv_block_bytes(int block_size) const = 0;
  // Per-sequence recurrent state slots the model holds (Qwen3.5's Gated DeltaNet layers): 0 for
  // attention-only models. When > 0 (LoadOptions::max_graph_batch_size slots, i.e. --max-num-seqs),
  // every StepInput names each sequence's slot, a slot's state is reset by the sequence's first step at
  // position 0, and the engine turns prefix caching off (a cached prefix has no saved state).
  virtual int num_state_slots() const { return 0; }

  // Runs the step; writes logits [logits_indices.size(), vocab_size] (F32, row-major) to host.
  virtual void forward(const StepInput& in, KvCache& kv, std::vector<float>& logits) = 0;
  // Pooling models (--runner pooling): runs the step like forward() but writes, for each logits_indices
  // row, the final hidden state model.norm(h) instead of its logits: [M, hidden_size] F32 to host. The
  // default throws (the model has no such path).
  virtual void forward_hidden(const StepInput& in, KvCache& kv, std::vector<float>& hidden);
  // Runs the step and samples every logits row where the logits are (the device), so only
  // tokens and logprobs come back. The default runs forward() and samples on the host with the
  // CPU reference (for test models).
  virtual void forward_sample(const StepInput& in, KvCache& kv, const SamplingBatch& batch, SampledRows& out);

  // Async scheduling (--async-scheduling): launch_sample issues the step and its sampling and returns
  // without waiting; finish_sample, called in launch order, returns that step's rows. With
  // tokens_from_last the step's first input token ids are tokens the previously launched step samples
  // (in.ids_from_last says which rows; those in.token_ids are ignored): a step issued before the
  // previous one's tokens are back on the host. supports_async_sampling() says whether tokens_from_last
  // is available; the defaults run forward_sample at launch.
  virtual bool supports_async_sampling() const { return false; }
  virtual int launch_sample(const StepInput& in, KvCache& kv, const SamplingBatch& batch, bool tokens_from_last);
  virtual void finish_sample(int ticket, SampledRows& out);
  // launch_sample in two calls, for a continuation whose rows have structured-output masks (they need the
  // previous step's tokens on the host): launch_forward issues the step alone, launch_sampling its
  // sampling later, with nothing launched in between. Where supports_async_sampling().
  virtual void launch_forward(const StepInput& in, KvCache& kv, bool tokens_from_last);
  virtual int launch_sampling(const SamplingBatch& batch);
  // LoRA adapters (vLLM's --enable-lora): add_lora puts an adapter on the device under id > 0, used by
  // the sequences whose StepInput::lora_ids name it; remove_lora frees it. Throws (naming the module)
  // where the model cannot apply the adapter; the defaults throw: the model takes no adapters.
  virtual void add_lora(int32_t id, const LoraAdapter& adapter);
  virtual void remove_lora(int32_t id);
  // Drops launched steps whose results will not be collected (after an error).
  virtual void discard_pending_samples() { finished_.clear(); }
  // Start-up work on the engine's KV cache once it exists: decode CUDA graphs of every capture size
  // (DecoderModel on a backend with graphs). Changes no cache contents. The default does nothing.
  virtual void capture_graphs(KvCache& /*kv*/) {}

 private:
  std::vector<SampledRows> finished_;  // the defaults' results, in launch order
};

// The attention layers' KV cache dtype for vLLM's --kv-cache-dtype on `backend`: auto (or the activation
// dtype's own name) -> the activation dtype; fp8 / fp8_e4m3 -> F8_E4M3 where the backend takes it. Throws
// vireo::Error with the accepted values otherwise (fp8_e5m2, another float dtype).
DType kv_cache_dtype(const std::string& name, const Backend& backend);

// Builds the model named by config.architectures[0] from the registry, loads its weights
// (model_dir's safetensors, a .gguf file, or dummy), on `backend`.
std::unique_ptr<Model> load_model(const std::string& model_dir, std::unique_ptr<Backend> backend,
                                  const LoadOptions& opts);
// Same, from an already parsed config (used by the built-in default model).
std::unique_ptr<Model> load_model(const ModelConfig& config, const std::string& model_dir,
                                  std::unique_ptr<Backend> backend, const LoadOptions& opts);

}  // namespace vireo
