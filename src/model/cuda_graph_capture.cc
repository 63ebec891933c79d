// DecoderModel::capture_graphs: every decode graph size captured at start-up (vLLM's capture_model).
//
// Left to the first step of each size, a capture stalls the GPU mid-serving: that step runs its ops
// eagerly, the host synchronizes, captures and instantiates the graph while nothing else is queued. A
// 256-client benchmark meets ~30 new sizes as its last requests finish (H100, Qwen3-8B FP8: ~0.3-0.5 s of
// an 11.7 s run idle). Here each size runs once on a dummy step instead, largest first, so the step's
// workspaces reach their largest size before the smaller graphs are captured.
//
// Only the common key of each size is made: contexts up to kGraphShortContext (the dummy's length is 1),
// logits rows in token order, no sampling inside the graph. Steps with long contexts, a backend's finer
// context buckets (the CUDA cluster kernel at small batches) and batch-1 graphs that sample are still
// captured on first use (cuda_graph_step.cc).
#include <chrono>
#include <exception>
#include <numeric>

#include "core/error.h"
#include "core/log.h"
#include "model/cuda_graph_sizes.h"
#include "model/decoder_model.h"

namespace vireo {

void DecoderModel::capture_graphs(KvCache& kv) {
  // Pooling runners never decode (their steps read hidden states, never through graphs).
  if (opts_.enforce_eager || opts_.pooling || !be_->supports_graphs() || opts_.max_graph_batch_size <= 0 || kv.k.empty())
    return;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int> sizes = graph_capture_sizes(opts_.max_graph_batch_size);
  // Batches of 128 rows and more run their linears on the library GEMM (smaller ones: Vireo's GEMV and small
  // FP8 GEMM): their configurations are timed (VIREO_GEMM_TUNE) before the graphs fix them.
  std::vector<int> tune_rows;
  for (int n : sizes)
    if (n >= 128) tune_rows.push_back(n);
  be_->tune_gemms(tune_rows);
  try {
    for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
      const int n = *it;
      // n sequences of one token at position 0 that write nothing (slot -1, state slot -1) and read the
      // null block 0: the padding rows' form, so the outputs are ignored and no cache or state changes.
      StepInput in;
      in.token_ids.assign(n, 0);
      in.positions.assign(n, 0);
      in.slot_mapping.assign(n, -1);
      in.query_start.resize(n + 1);
      std::iota(in.query_start.begin(), in.query_start.end(), 0);
      in.seq_lens.assign(n, 1);
      in.max_blocks_per_seq = 1;
      in.block_tables.assign(n, 0);
      in.logits_indices.resize(n);
      std::iota(in.logits_indices.begin(), in.logits_indices.end(), 0);
      if (num_state_slots() > 0) in.state_slots.assign(n, -1);
      Tensor stats;
      run_step(in, kv, nullptr, &stats);
    }
    be_->synchronize();
  } catch (const std::exception& e) {  // e.g. out of memory: serving goes on, capturing on first use
    log_warn("cuda graphs: start-up capture stopped ({}); the remaining sizes are captured on first use", e.what());
    be_->synchronize();
    return;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log_info("cuda graphs: {} decode graphs captured at start-up (batch sizes {}..{}) in {:.2f} s", num_graphs(),
           sizes.front(), sizes.back(), s);
}

}  // namespace vireo
