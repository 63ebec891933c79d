// Sparse MoE MLP on CUDA: the choice between the two expert paths, and the host entry points of the
// grouped path's kernels (moe_sort.cu, moe_grouped_gemm.cu, moe_combine.cu). Plain C++ (host only).
//
// Per-slot ("decode") path (moe_decode.cu): per block a group of <= 16 tokens and a chunk of weight rows;
// each distinct expert's rows are streamed once for all the group's slots that chose it; right for a few
// tokens (decode), where a GEMM's tiles would be mostly empty:
//   route    ids, weights [S = T * k]                 (moe.cu)
//   gate_up  act [S, I] in slot order                 (launch_moe_gate_up_decode)
//   down     out [T, hidden], the ordered weighted sum inside the kernel (launch_moe_down_decode)
// Grouped path: the T * k slots sorted by expert, then per expert one GEMM over its slots, so every
// expert's weights are read once per call (per chunk of kMoeGroupedChunkTokens tokens):
//   route    ids, weights [S = T * k]                 (moe.cu, shared with the per-slot path)
//   sort     sorted_slot [S], row_of_slot [S], tiles [<= max_tiles], num_tiles   (moe_sort.cu)
//   gate_up  act [S, I] in sorted order                 (moe_grouped_gemm.cu, tensor cores)
//   down     y [S, hidden] in sorted order, rounded     (moe_grouped_gemm.cu)
//   combine  out [T, hidden]: a token's k rows of y summed in ascending expert id (moe_combine.cu)
// GPT-OSS's extras (MoeParams router_b, gate_up_b, down_b, swiglu_*) ride along: router_b in route,
// the expert biases and the clamped SwiGLU in the gate_up / down epilogues of both paths (MoeExtras).
// Every launch is stream-ordered with host-known grid sizes (upper bounds; blocks past the work the
// device found exit early), so the path is CUDA-graph capturable; no float atomics, so deterministic.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/op_params.h"
#include "core/dtype.h"

namespace vireo::cuda {

// Which expert path launch_moe takes. kAuto: by size (moe_use_grouped). Process-wide; starts from
// VIREO_MOE_GROUPED (read once: "0" per-slot, "1" grouped, unset or anything else auto); tests and
// benchmarks override it with set_moe_path. Captured graphs keep the path they were captured with.
enum class MoePath : int { kAuto = -1, kPerSlot = 0, kGrouped = 1 };
MoePath moe_path();
void set_moe_path(MoePath path);

// Auto threshold: the grouped path from this many slots (T * top_k) on. The per-slot path reads an
// expert's weights once per slot that chose it, the grouped path once per call, at the cost of three
// more launches (sort, combine, the GEMMs' tile overheads). Measured on the H200 (moe_bench.cc,
// Qwen3-30B-A3B layer, session 8): 64 slots (8 tokens of top-8) per-slot 276 us vs grouped 299 us;
// 512 slots 914 vs 461 us. So the switch sits between, at 128 slots (16 tokens of top-8), where about
// a third of the per-slot reads already repeat an expert. Re-tune with tests/cuda_bench/moe_bench.cc.
constexpr int64_t kMoeGroupedMinSlots = 128;
// The grouped path takes at most this many tokens per pass (route, sort, GEMMs, combine), so its
// scratch stays bounded (S * (hidden + inter) activations: 4096 tokens of Qwen3-30B-A3B, 185 MB); a
// longer call runs passes one after the other, each reading the weights once more.
constexpr int64_t kMoeGroupedChunkTokens = 4096;
// Sorted rows per GEMM tile (moe_grouped_gemm.cu's BM): an expert with c slots has ceil(c / 128)
// tiles, so a pass has at most ceil(S / 128) + min(E, S) tiles.
constexpr int kMoeTileRows = 128;

// The grouped kernels take bf16 / f16 with rows of 16-byte multiples (cp.async); else per-slot.
inline bool moe_grouped_supported(DType dt, int64_t hidden, int64_t inter, bool aligned16) {
  return (dt == DType::kBF16 || dt == DType::kF16) && hidden % 8 == 0 && inter % 8 == 0 && aligned16;
}
inline bool moe_use_grouped(MoePath path, int64_t tokens, int top_k, bool supported) {
  if (!supported || path == MoePath::kPerSlot) return false;
  return path == MoePath::kGrouped || tokens * top_k >= kMoeGroupedMinSlots;
}
inline int64_t moe_max_tiles(int64_t slots, int64_t num_experts) {
  return (slots + kMoeTileRows - 1) / kMoeTileRows + (num_experts < slots ? num_experts : slots);
}

// GPT-OSS's expert extras (MoeParams gate_up_b, down_b, swiglu_alpha, swiglu_limit) for the expert
// launches below; biases are device pointers in the activation dtype, null when absent. The default
// (no biases, limit 0) is the plain silu(g) * u MLP, bit for bit what the launches did without it.
struct MoeExtras {
  const void* gate_up_b = nullptr;  // [E, 2 * inter]: expert e's gate biases, then its up biases
  const void* down_b = nullptr;     // [E, hidden]
  float alpha = 1.702f, limit = 0.0f;  // limit > 0: the clamped SwiGLU instead of silu(g) * u
};
inline MoeExtras moe_extras(const MoeParams& p) {
  return {p.gate_up_b.empty() ? nullptr : p.gate_up_b.data, p.down_b.empty() ? nullptr : p.down_b.data,
          p.swiglu_alpha, p.swiglu_limit};
}

// ---- routing (moe.cu; shared by both expert paths) ----
// Large-T kernel: one block per 8 tokens reads the whole router (each router row once per 8 tokens).
// Small-T kernels (T <= kMoeRouteSmallMaxTokens, the default there): the router logits as a GEMV over
// ceil(E / 4) x ceil(T / 8) blocks (router rows loaded before the PDL wait) into an fp32 scratch [T, E],
// then one warp per token selects. Both compute every logit as the same fp32 chain (plus router_b[e]
// when given, before the kSoftmax rounding) and select with the same code, so ids and weights are
// bitwise equal (MoeRouteTest.SmallAndLargeTPathsAgreeBitwise).
// VIREO_MOE_ROUTE_SMALL=0 keeps the large-T kernel at every T (kAuto only).
enum class MoeRoutePath : int { kAuto = -1, kSmallT = 0, kLargeT = 1 };
constexpr int64_t kMoeRouteSmallMaxTokens = 64;
// Floats of logits scratch launch_moe_route needs for `tokens` tokens on the kAuto path (0: none).
inline int64_t moe_route_scratch_floats(int64_t tokens, int64_t num_experts) {
  return tokens <= kMoeRouteSmallMaxTokens ? tokens * num_experts : 0;
}
// Routing of `tokens` rows of x (device, p.x's dtype and width; p gives the router and the routing
// settings) into ids / weights [tokens, top_k]. logits: device scratch of tokens * E floats, or null
// (then the large-T kernel). kSmallT uses the small-T kernels at any T when logits is given and rows
// fit (hidden * dtype size and E * 4 bytes <= 48 KiB), else the large-T kernel. For tests and benchmarks;
// launch_moe calls it with kAuto.
void launch_moe_route(const MoeParams& p, const void* x, int64_t tokens, int* ids, float* weights, float* logits,
                      MoeRoutePath path, cudaStream_t stream);

// ---- decode-path launches (moe_decode.cu; device pointers, `dt` bf16, f16 or f32; any hidden / inter,
// 16-byte loads where rows and pointers allow) ----
// act[s, i] = round(glu(g, u)), g = round(x[t] . gate_e[i]), u = round(x[t] . up_e[i]), e = ids[s],
// t = s / top_k; with gate_up_b, g = round(g + b_gate[e, i]) and likewise u; glu: silu(g) * u, or the
// clamped SwiGLU when extras.limit > 0 (activation.cuh moe_glu); act [tokens * top_k, inter].
void launch_moe_gate_up_decode(DType dt, const void* x, const void* gate_up_w, const int* ids, int64_t tokens,
                               int top_k, int64_t hidden, int64_t inter, void* act, cudaStream_t stream,
                               const MoeExtras& extras = {});
// out[t, j] = over the token's slots in ascending expert id: acc = round(acc + round(y * weights[s])),
// y = round(act[s] . down_e[j]) (with down_b: y = round(y + b_down[e, j])). Reads ids before its PDL
// wait: they must be complete before the previous kernel of the stream started (launch_moe: route, then
// gate_up, then this).
void launch_moe_down_decode(DType dt, const void* act, const void* down_w, const int* ids, const float* weights,
                            int64_t tokens, int top_k, int64_t hidden, int64_t inter, void* out, cudaStream_t stream,
                            const MoeExtras& extras = {});

// ---- MXFP4 decode-path launches (moe_decode_mxfp4.cu; bf16 activations, hidden and inter multiples of
// 32, weights / scales as MoeParams gate_up_w / gate_up_scales with MXFP4): the same results as the two
// launches above on the dequantized weights, up to the fp32 summation order (tensor-core dot products). ----
void launch_moe_gate_up_decode_mxfp4(const void* x, const void* gate_up_w, const void* gate_up_s, const int* ids,
                                     int64_t tokens, int top_k, int64_t hidden, int64_t inter, void* act,
                                     cudaStream_t stream, const MoeExtras& extras = {});
void launch_moe_down_decode_mxfp4(const void* act, const void* down_w, const void* down_s, const int* ids,
                                  const float* weights, int64_t tokens, int top_k, int64_t hidden, int64_t inter,
                                  void* out, cudaStream_t stream, const MoeExtras& extras = {});

// ---- grouped-path launches (device pointers; `dt` the activation dtype, bf16 or f16) ----
// Tile i of the sorted rows: expert, first sorted row, rows (<= kMoeTileRows).
struct MoeTile {
  int expert, row0, rows, pad;
};
// ids [S] (S = tokens * top_k, values in [0, E)) -> sorted_slot [S] (slots grouped by expert in
// ascending expert id, ascending slot within an expert), row_of_slot [S] (its inverse), tiles and
// *num_tiles (tiles beyond it are not written).
void launch_moe_sort(const int* ids, int64_t slots, int64_t num_experts, int* sorted_slot, int* row_of_slot,
                     MoeTile* tiles, int* num_tiles, cudaStream_t stream);
// act[r, i] for sorted row r (slot s = sorted_slot[r], token t = s / top_k, expert e of its tile) as
// launch_moe_gate_up_decode's act[s, i] (biases, glu, roundings); act [S, inter].
// w_scales: MXFP4 weights (bf16 only; hidden and inter multiples of 32): gate_up_w packed as MoeParams
// says, its k tiles dequantized into shared memory as they arrive; null: weights in `dt`.
void launch_moe_gate_up_grouped(DType dt, const void* x, const void* gate_up_w, const int* sorted_slot, int top_k,
                                const MoeTile* tiles, const int* num_tiles, int64_t max_tiles, int64_t hidden,
                                int64_t inter, void* act, cudaStream_t stream, const MoeExtras& extras = {},
                                const void* w_scales = nullptr);
// y[r, j] = round(act[r] . down_e[j]), with down_b round(that + b_down[e, j]); y [S, hidden].
void launch_moe_down_grouped(DType dt, const void* act, const void* down_w, const MoeTile* tiles, const int* num_tiles,
                             int64_t max_tiles, int64_t hidden, int64_t inter, void* y, cudaStream_t stream,
                             const MoeExtras& extras = {}, const void* w_scales = nullptr);
// out[t] = the token's k rows of y (row_of_slot) in ascending expert id: acc = round(acc + round(y * w)).
void launch_moe_combine(DType dt, const void* y, const int* ids, const float* weights, const int* row_of_slot,
                        int64_t tokens, int top_k, int64_t hidden, void* out, cudaStream_t stream);

}  // namespace vireo::cuda
