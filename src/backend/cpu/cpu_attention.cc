// paged_attention on the CPU: exact two-pass softmax in fp32 over each query row's keys [0, position]
// (the last `window` of them with a sliding window), K/V rows addressed through the block table (see
// AttentionParams). Decode rows (query length 1) go to cpu_attention_decode.cc, which reads the paged
// cache in place. Longer query chunks gather their sequence's K/V into contiguous fp32 once and take
// OpenBLAS GEMMs over blocks of query rows, so a 32k-token prefill takes minutes, not hours.
#include <cblas.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cpu/cpu_attention_decode.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_softmax.h"
#include "core/error.h"

namespace vireo::cpu {

void paged_attention(ThreadPool& pool, const AttentionParams& p) {
  require_f32(p.q, "paged_attention q");
  require_f32(p.out, "paged_attention out");
  require_kv_cache(p.k_cache, "paged_attention k_cache");
  if (p.v_cache.dtype != p.k_cache.dtype) throw Error("cpu paged_attention: k_cache and v_cache dtypes differ");
  require_i32(p.query_start, "paged_attention query_start");
  require_i32(p.seq_lens, "paged_attention seq_lens");
  require_i32(p.block_tables, "paged_attention block_tables");
  const int H = p.num_heads, Hkv = p.num_kv_heads, D = p.head_dim, bs = p.block_size, S = p.num_seqs;
  if (H <= 0 || Hkv <= 0 || D <= 0 || H % Hkv != 0 || bs <= 0) throw Error("cpu paged_attention: bad head counts");
  if (!p.sinks.empty() && (p.sinks.dtype != DType::kF32 || p.sinks.numel() != H))
    throw Error("cpu paged_attention: sinks must be F32 [num_heads]");
  const int32_t* qs = p.query_start.ptr<int32_t>();
  const int32_t* lens = p.seq_lens.ptr<int32_t>();
  const int32_t* tables = p.block_tables.ptr<int32_t>();
  const int64_t num_blocks = p.k_cache.dim(0);
  const int64_t T = qs[S];
  if (p.q.numel() < T * H * D) throw Error("cpu paged_attention: q has fewer than query_start[S] rows");

  // Validate the block table entries each sequence reads; sort the sequences into decode rows and chunks.
  std::vector<int32_t> decode_seqs;
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
    if (q_len == 1) decode_seqs.push_back(s);
  }
  paged_attention_decode(pool, p, decode_seqs);

  // Per sequence of more than one query row and KV head: gather its keys/values [0, len) into
  // contiguous fp32 [len, D] (through the block table), then per query head and block of kQueryBlock
  // query rows:
  //   scores[rows, kbeg..kend) = scale * Q[rows] K[kbeg, kend)^T    (cblas_sgemm)
  //   row r (position pos_r): softmax over keys [lo_r, pos_r] (soft-capped first with p.softcap), exact
//   zeros elsewhere (causal mask;
  //   lo_r = 0, or pos_r - window + 1 with a sliding window)
  //   out[rows] = P[rows, kbeg..kend) V[kbeg, kend) / rowsum        (cblas_sgemm)
  // where kend = position of the block's last row + 1 and kbeg = lo of its first row. Same math as one
  // row at a time; the GEMMs only change the fp32 summation order.
  constexpr int kQueryBlock = 64;
  const DType cdt = p.k_cache.dtype;
  const int group = H / Hkv;
  const int64_t ld_q = static_cast<int64_t>(H) * D;
  std::vector<float> kc, vc, scores, rowsum(kQueryBlock);
  for (int s = 0; s < S; ++s) {
    const int q_len = qs[s + 1] - qs[s], len = lens[s], first_pos = len - q_len;
    if (q_len <= 1) continue;  // none, or a decode row (done above)
    const int32_t* table = tables + static_cast<int64_t>(s) * p.max_blocks_per_seq;
    kc.resize(static_cast<size_t>(len) * D);
    vc.resize(static_cast<size_t>(len) * D);
    scores.resize(static_cast<size_t>(std::min(q_len, kQueryBlock)) * len);
    for (int kvh = 0; kvh < Hkv; ++kvh) {
      // kc/vc[i, :] = cache[table[i / bs], i % bs, kvh, :]
      pool.parallel_for(len, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const int64_t off = ((static_cast<int64_t>(table[i / bs]) * bs + i % bs) * Hkv + kvh) * D;
          if (cdt == DType::kF32) {
            std::copy_n(p.k_cache.ptr<float>() + off, D, kc.data() + i * D);
            std::copy_n(p.v_cache.ptr<float>() + off, D, vc.data() + i * D);
          } else if (cdt == DType::kF8E4M3) {
            fp8_e4m3_widen(p.k_cache.ptr<uint8_t>() + off, D, 1.f, kc.data() + i * D);
            fp8_e4m3_widen(p.v_cache.ptr<uint8_t>() + off, D, 1.f, vc.data() + i * D);
          } else {
            for (int d = 0; d < D; ++d) {
              kc[i * D + d] = load_elem(p.k_cache.data, cdt, off + d);
              vc[i * D + d] = load_elem(p.v_cache.data, cdt, off + d);
            }
          }
        }
      }, 256);
      for (int h = kvh * group; h < (kvh + 1) * group; ++h) {
        for (int r0 = 0; r0 < q_len; r0 += kQueryBlock) {
          const int rows = std::min(kQueryBlock, q_len - r0);
          const int kend = first_pos + r0 + rows;  // keys [kbeg, kend) are visible to some row of the block
          const int kbeg = window_start(first_pos + r0, p.window), nk = kend - kbeg;
          const float* q = p.q.ptr<float>() + (static_cast<int64_t>(qs[s] + r0) * H + h) * D;  // rows at stride ld_q
          float* out = p.out.ptr<float>() + (static_cast<int64_t>(qs[s] + r0) * H + h) * D;
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, nk, D, p.scale, q, ld_q,
                      kc.data() + static_cast<int64_t>(kbeg) * D, D, 0.0f, scores.data(), nk);
          pool.parallel_for(rows, [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
              float* sc = scores.data() + r * nk;  // sc[i]: key kbeg + i
              const int last = first_pos + r0 + static_cast<int>(r);  // this row's position
              const int lo = window_start(last, p.window) - kbeg;
              std::fill(sc, sc + lo, 0.0f);
              softcap_scores(sc + lo, last + 1 - kbeg - lo, p.softcap);
              rowsum[r] = softmax_numerators(sc + lo, last + 1 - kbeg - lo, sink_of(p, h));
              std::fill(sc + (last + 1 - kbeg), sc + nk, 0.0f);
            }
          });
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, D, nk, 1.0f, scores.data(), nk,
                      vc.data() + static_cast<int64_t>(kbeg) * D, D, 0.0f, out, ld_q);
          for (int r = 0; r < rows; ++r) {
            const float inv = 1.0f / rowsum[r];
            for (int d = 0; d < D; ++d) out[r * ld_q + d] *= inv;
          }
        }
      }
    }
  }
}

}  // namespace vireo::cpu
