// Arguments of the persistent decode-stack kernel (decode_stack_kernel.cuh), filled by decode_stack.cu.
// One launch runs every layer of a dense pre-norm decoder for a decode step of T <= 8 tokens: a grid of
// one block per SM, phases separated by grid-wide barriers instead of kernel boundaries, and a producer
// warp per block that streams the block's share of every weight matrix through a ring of shared-memory
// stages, running ahead across phases and layers (the weights do not depend on the activations).
#pragma once
#include <cstdint>

#include "backend/cuda/qkv_head.cuh"

namespace vireo::cuda {

constexpr int kStackMaxLayers = 128;  // the layer table travels in the kernel parameters (< 32 KiB)
constexpr int kStackMaxTokens = 8;
constexpr int kStackConsumerWarps = 8;  // one 8-row group of a matrix: a row (or gate/up row pair) a warp
constexpr int kStackThreads = (kStackConsumerWarps + 1) * 32;  // + the producer warp
constexpr int kStackStageBytes = 32 << 10;
constexpr int kStackMaxGqa = 8;  // query heads per KV head

struct StackLayerArgs {
  const void* input_norm;  // [hidden]
  const void* qkv_w;       // [(H + 2 Hkv) D, hidden]
  const void* qkv_b;       // [(H + 2 Hkv) D] or null
  const void* q_norm;      // [D] or null
  const void* k_norm;      // [D] or null
  const void* o_w;         // [hidden, H D]
  const void* post_norm;   // [hidden]
  const void* gate_up_w;   // [2 inter, hidden]
  const void* down_w;      // [hidden, inter]
  void* k_cache;           // [blocks, block_size, Hkv, D]
  void* v_cache;
};

struct StackArgs {
  StackLayerArgs layers[kStackMaxLayers];
  int num_layers;
  void* residual;     // [T, hidden]
  void* qkv;          // [T, (H + 2 Hkv) D] scratch
  void* attn;         // [T, H D] scratch
  void* act;          // [T, inter] scratch
  float* part;        // [T, H, J, 2 + D]: split partials (max, sum, unnormalised acc)
  unsigned* counters;  // [0] grid barrier, [1] exits, [2 + t Hkv + g] split arrivals; zero between launches
  const int* seq_lens;      // [T]
  const int* block_tables;  // [T, max_blocks_per_seq]
  QkvArgs qa;         // positions, rope, slots, norm dtypes, dims; per-layer pointers patched in the kernel
  int max_blocks_per_seq, block_size;
  int T, hidden, inter, H, Hkv, D, J;
  float eps, scale;
  int stages;         // ring stages of kStackStageBytes
  int gate_attention;  // 1: the producer issues no copy while the consumers are in the attention phase
  unsigned long long* prof;  // null, or [G, num_layers, kStackStamps] %globaltimer stamps (VIREO_STACK_PROFILE=1)
};

// Per layer and block: the layer's start, then for each of the 5 phases the block's arrival at the
// barrier after it and its release from that barrier; then, for a block's first attention item, the
// end of its pages, of its partial's write and arrival, and of its merge.
constexpr int kStackStamps = 16;

}  // namespace vireo::cuda
