// paged_attention on the CPU: exact two-pass softmax in fp32 over each query row's keys
// [0, position], gathering K/V rows through the block table (see AttentionParams). The dot products
// are OpenBLAS GEMMs over blocks of query rows, so a 32k-token prefill takes minutes, not hours.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace vireo::cpu {
namespace {

// Four floats at a time (GCC/Clang vector extensions; SSE2 on any x86-64): the softmax's exp is most of
// the CPU time of a long prefill next to the GEMMs, and the scalar std::exp does not vectorize.
typedef float F4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));

// e^x for x <= 0 (a score minus its row's max), ~1e-7 relative error (Cephes expf): x = n ln2 + r with
// n = round(x / ln2), |r| <= ln2/2, e^r by its degree-7 minimax polynomial, 2^n built in the exponent
// bits. x < -87.3 (e^x < 1.2e-38, beside the row max's e^0 = 1) gives exactly 0.
inline F4 exp_nonpositive(F4 x) {
  const F4 zero{0, 0, 0, 0};
  const I4 under = x < -87.3f;  // lanes of all ones where e^x is taken as 0
  x = under ? zero : x;
  const F4 n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest (|.| < 2^22)
  const F4 r = x - n * 0.693359375f - n * -2.12194440e-4f;               // x - n ln2, ln2 in two parts
  F4 p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const F4 er = p * r * r + r + 1.0f;
  const I4 bits = (__builtin_convertvector(n, I4) + 127) << 23;  // 2^n, n in [-126, 0]
  F4 two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return under ? zero : er * two_n;
}

// sc[0, n) <- e^(sc - max(sc)); returns their sum.
float softmax_numerators(float* sc, int n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < n; ++i) mx = std::max(mx, sc[i]);
  F4 acc{0, 0, 0, 0};
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    F4 v;
    std::memcpy(&v, sc + i, sizeof v);
    v = exp_nonpositive(v - mx);
    std::memcpy(sc + i, &v, sizeof v);
    acc += v;
  }
  float sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  if (i < n) {  // the last 1-3 scores, padded with the max (e^0, not added)
    F4 v = F4{0, 0, 0, 0} + mx;
    std::memcpy(&v, sc + i, (n - i) * sizeof(float));
    v = exp_nonpositive(v - mx);
    for (int j = 0; i + j < n; ++j) sum += (sc[i + j] = v[j]);
  }
  return sum;
}

// One query row over keys [0, len): scores, exact softmax, P V. q, out: [D]; kc, vc: [len, D].
// Each dot is 8 partial sums over d (vectorisable), then a fixed pairwise tree.
void decode_row(const float* q, const float* kc, const float* vc, int len, int D, float scale, float* sc, float* out) {
  constexpr int kL = 8;
  const int d_main = D / kL * kL;
  for (int j = 0; j < len; ++j) {
    const float* kr = kc + static_cast<int64_t>(j) * D;
    float acc[kL] = {};
#pragma GCC unroll 8
    for (int d = 0; d < d_main; d += kL)
#pragma GCC unroll 8
      for (int u = 0; u < kL; ++u) acc[u] += q[d + u] * kr[d + u];
    float tail = 0.f;
    for (int d = d_main; d < D; ++d) tail += q[d] * kr[d];
    for (int w = kL / 2; w > 0; w /= 2)
      for (int u = 0; u < w; ++u) acc[u] += acc[u + w];
    sc[j] = scale * (acc[0] + tail);
  }
  const float inv = 1.0f / softmax_numerators(sc, len);
  std::fill(out, out + D, 0.0f);
  for (int j = 0; j < len; ++j) {
    const float pj = sc[j];
    const float* vr = vc + static_cast<int64_t>(j) * D;
    for (int d = 0; d < D; ++d) out[d] += pj * vr[d];
  }
  for (int d = 0; d < D; ++d) out[d] *= inv;
}

}  // namespace

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

  // Per sequence and KV head: gather its keys/values [0, len) into contiguous fp32 [len, D] (through the
  // block table), then per query head and block of kQueryBlock query rows:
  //   scores[rows, kend] = scale * Q[rows] K[0, kend)^T             (cblas_sgemm)
  //   row r (position pos_r): softmax over keys [0, pos_r], exact zeros for keys > pos_r (causal mask)
  //   out[rows] = P[rows, kend] V[0, kend) / rowsum                 (cblas_sgemm)
  // where kend = position of the block's last row + 1. Same math as one row at a time; the GEMMs only
  // change the fp32 summation order.
  constexpr int kQueryBlock = 64;
  const DType cdt = p.k_cache.dtype;
  const int group = H / Hkv;
  const int64_t ld_q = static_cast<int64_t>(H) * D;
  std::vector<float> kc, vc, scores, rowsum(kQueryBlock);
  for (int s = 0; s < S; ++s) {
    const int q_len = qs[s + 1] - qs[s], len = lens[s], first_pos = len - q_len;
    if (q_len == 0) continue;
    const int32_t* table = tables + static_cast<int64_t>(s) * p.max_blocks_per_seq;
    kc.resize(static_cast<size_t>(len) * D);
    vc.resize(static_cast<size_t>(len) * D);
    scores.resize(static_cast<size_t>(q_len == 1 ? group : std::min(q_len, kQueryBlock)) * len);
    for (int kvh = 0; kvh < Hkv; ++kvh) {
      // kc/vc[i, :] = cache[table[i / bs], i % bs, kvh, :]
      pool.parallel_for(len, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const int64_t off = ((static_cast<int64_t>(table[i / bs]) * bs + i % bs) * Hkv + kvh) * D;
          if (cdt == DType::kF32) {
            std::copy_n(p.k_cache.ptr<float>() + off, D, kc.data() + i * D);
            std::copy_n(p.v_cache.ptr<float>() + off, D, vc.data() + i * D);
          } else {
            for (int d = 0; d < D; ++d) {
              kc[i * D + d] = load_elem(p.k_cache.data, cdt, off + d);
              vc[i * D + d] = load_elem(p.v_cache.data, cdt, off + d);
            }
          }
        }
      }, 256);
      if (q_len == 1) {  // a decode row: plain loops, the group's heads in parallel (sgemm calls of one row
                         // cost more than their work)
        pool.parallel_for(group, [&](int64_t b, int64_t e) {
          for (int64_t g = b; g < e; ++g) {
            const int64_t th = static_cast<int64_t>(qs[s]) * H + kvh * group + g;
            decode_row(p.q.ptr<float>() + th * D, kc.data(), vc.data(), len, D, p.scale, scores.data() + g * len,
                       p.out.ptr<float>() + th * D);
          }
        }, 1);
        continue;
      }
      for (int h = kvh * group; h < (kvh + 1) * group; ++h) {
        for (int r0 = 0; r0 < q_len; r0 += kQueryBlock) {
          const int rows = std::min(kQueryBlock, q_len - r0);
          const int kend = first_pos + r0 + rows;  // keys [0, kend) are visible to some row of the block
          const float* q = p.q.ptr<float>() + (static_cast<int64_t>(qs[s] + r0) * H + h) * D;  // rows at stride ld_q
          float* out = p.out.ptr<float>() + (static_cast<int64_t>(qs[s] + r0) * H + h) * D;
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, kend, D, p.scale, q, ld_q, kc.data(), D, 0.0f,
                      scores.data(), kend);
          pool.parallel_for(rows, [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
              float* sc = scores.data() + r * kend;
              const int last = first_pos + r0 + static_cast<int>(r);  // this row's position
              rowsum[r] = softmax_numerators(sc, last + 1);
              std::fill(sc + last + 1, sc + kend, 0.0f);
            }
          });
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, D, kend, 1.0f, scores.data(), kend, vc.data(), D,
                      0.0f, out, ld_q);
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
