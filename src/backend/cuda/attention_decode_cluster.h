// The cluster decode attention (attention_decode_cluster.cu): decode-shape steps with few
// (sequence, KV head) pairs, latency first. Included by attention_mma.cu, which picks it.
#pragma once
#include "backend/cuda/cuda_kernels.h"

namespace vireo::cuda {

struct QkvArgs;

// Blocks a (sequence, KV head) pair gets (the cluster size, <= 16), or 0 when the kernel does not apply
// (rows > 16, not bf16/f16 with head dim 64/128, more than num_sms / 16 pairs, or a planned context over
// 4096 keys: there the split kernel measured faster). Chosen from the planned context (p.max_seq_len):
// the fewest blocks that keep each block's tiles few (a measured cost model, see the .cu). want: 0 never,
// n > 0 cluster size n wherever the kernel applies, -1 per VIREO_DECODE_CLUSTER (same meanings; unset:
// chosen).
int decode_cluster_size(const AttentionParams& p, const DeviceInfo& dev, int want);
// The planned context a decode graph of this shape (query length 1) should use for steps whose longest
// context is max_len: the end of max_len's bucket (128 keys up to 2,048, then 256), since the cluster
// size follows the planned context (graphs fix it); 0 where the kernel does not apply or
// VIREO_DECODE_CLUSTER fixes the size.
int decode_cluster_context_bucket(int num_seqs, int num_heads, int num_kv_heads, int head_dim, int max_len,
                                  const DeviceInfo& dev);
// Whether the kernel should also do qkv_prepare's work: when a block's preparation items (its q rows,
// then the new token's k and v) fit its 4 warps in one round. With more (Qwen3-8B's 4 q heads a KV
// head) the separate qkv_prepare kernel measured faster (8B layer attention 10.2 vs 11.4 us).
bool decode_cluster_fuses_prepare(const AttentionParams& p);
// prep: fused q/k preparation from the raw qkv rows (q_out is not written), or nullptr (q given).
void launch_decode_cluster(const AttentionParams& p, const QkvArgs* prep, int cluster, cudaStream_t stream);

}  // namespace vireo::cuda
