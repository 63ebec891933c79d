// paged_attention on the CPU: exact two-pass softmax in fp32 over each query row's keys
// [0, position], gathering K/V rows through the block table (see AttentionParams).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace vireo::cpu {

void paged_attention(ThreadPool& pool, const AttentionParams& p) {
  require_f32(p.q, "paged_attention q");
  require_f32(p.out, "paged_attention out");
  require_float(p.k_cache, "paged_attention k_cache");
  if (p.v_cache.dtype != p.k_cache.dtype) throw Error("cpu paged_attention: k_cache and v_cache dtypes differ");
  require_i32(p.query_start, "paged_attention query_start");
  require_i32(p.seq_lens, "paged_attention seq_lens");
  require_i32(p.block_tables, "paged_attention block_tables");
  const int H = p.num_heads, Hkv = p.num_kv_heads, D = p.head_dim, bs = p.block_size, S = p.num_seqs;
  if (H <= 0 || Hkv <= 0 || D <= 0 || H % Hkv != 0 || bs <= 0) throw Error("cpu paged_attention: bad head counts");
  const int32_t* qs = p.query_start.ptr<int32_t>();
  const int32_t* lens = p.seq_lens.ptr<int32_t>();
  const int32_t* tables = p.block_tables.ptr<int32_t>();
  const int64_t num_blocks = p.k_cache.dim(0);
  const int64_t T = qs[S];
  if (p.q.numel() < T * H * D) throw Error("cpu paged_attention: q has fewer than query_start[S] rows");

  // Row t -> (sequence, position); validate the block table entries each sequence reads.
  std::vector<int32_t> row_seq(T), row_pos(T);
  for (int s = 0; s < S; ++s) {
    const int q_len = qs[s + 1] - qs[s];
    if (q_len < 0 || lens[s] < q_len)
      throw Error("cpu paged_attention: sequence " + std::to_string(s) + " has seq_len " + std::to_string(lens[s]) +
                  " < query length " + std::to_string(q_len));
    const int nb = (lens[s] + bs - 1) / bs;
    if (nb > p.max_blocks_per_seq)
      throw Error("cpu paged_attention: sequence " + std::to_string(s) + " needs " + std::to_string(nb) +
                  " blocks, block table has " + std::to_string(p.max_blocks_per_seq));
    for (int b = 0; b < nb; ++b) {
      const int32_t id = tables[static_cast<int64_t>(s) * p.max_blocks_per_seq + b];
      if (id < 0 || id >= num_blocks)
        throw Error("cpu paged_attention: block id " + std::to_string(id) + " outside the cache of " +
                    std::to_string(num_blocks) + " blocks");
    }
    for (int j = 0; j < q_len; ++j) {
      row_seq[qs[s] + j] = s;
      row_pos[qs[s] + j] = lens[s] - q_len + j;
    }
  }

  const DType cdt = p.k_cache.dtype;
  const int group = H / Hkv;
  pool.parallel_for(T * H, [&](int64_t b, int64_t e) {
    std::vector<float> scores, acc(D);
    for (int64_t item = b; item < e; ++item) {
      const int64_t t = item / H;
      const int h = static_cast<int>(item % H), kvh = h / group;
      const int s = row_seq[t], last = row_pos[t];
      const int32_t* table = tables + static_cast<int64_t>(s) * p.max_blocks_per_seq;
      const float* q = p.q.ptr<float>() + (t * H + h) * D;
      scores.resize(last + 1);
      // Element offset of key i's head kvh: [block, offset, kv_head, d].
      auto kv_offset = [&](int i) {
        return ((static_cast<int64_t>(table[i / bs]) * bs + i % bs) * Hkv + kvh) * D;
      };
      float mx = -std::numeric_limits<float>::infinity();
      for (int i = 0; i <= last; ++i) {
        const int64_t off = kv_offset(i);
        float dot = 0.0f;
        if (cdt == DType::kF32) {
          const float* k = p.k_cache.ptr<float>() + off;
          for (int d = 0; d < D; ++d) dot += q[d] * k[d];
        } else {
          for (int d = 0; d < D; ++d) dot += q[d] * load_elem(p.k_cache.data, cdt, off + d);
        }
        scores[i] = dot * p.scale;
        mx = std::max(mx, scores[i]);
      }
      float sum = 0.0f;
      for (int i = 0; i <= last; ++i) {
        scores[i] = std::exp(scores[i] - mx);
        sum += scores[i];
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int i = 0; i <= last; ++i) {
        const int64_t off = kv_offset(i);
        const float w = scores[i];
        if (cdt == DType::kF32) {
          const float* v = p.v_cache.ptr<float>() + off;
          for (int d = 0; d < D; ++d) acc[d] += w * v[d];
        } else {
          for (int d = 0; d < D; ++d) acc[d] += w * load_elem(p.v_cache.data, cdt, off + d);
        }
      }
      float* out = p.out.ptr<float>() + (t * H + h) * D;
      const float inv = 1.0f / sum;
      for (int d = 0; d < D; ++d) out[d] = acc[d] * inv;
    }
  });
}

}  // namespace vireo::cpu
