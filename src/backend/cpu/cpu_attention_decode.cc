// Decode rows of paged_attention: exact two-pass softmax in fp32, K and V read block by block through
// the block table, in place: BF16 rows are widened to fp32 inside the dot and axpy loops (F16 and FP8
// rows are widened into a block-sized buffer first). Gathering the whole context into contiguous fp32
// every step cost as much as the attention itself (~45 ms of a 90 ms Qwen3-0.6B step at 1k context on
// the 2-core VM).
//
// Per query head, the same sums in the same order as the gathered loops before (commit 1968d39):
//   score[j] = scale * (tree(8 partial sums over d) + tail)   (dot of q and key j)
//   out[d]   = (sum over j in key order of p[j] * v[j, d]) / sum_j p[j]
// Several keys are handled a pass (independent dot chains; one load/store of out[d] for 4 keys), which
// leaves each sum's order unchanged. The AVX2 clone fuses each multiply-add (one rounding, not two),
// so there the last bits differ from the old baseline-only loops; on one machine a row's result is
// fixed whatever its batch.
#include "backend/cpu/cpu_attention_decode.h"

#include <algorithm>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_softmax.h"
#include "core/dtype.h"

namespace vireo::cpu {
namespace {

constexpr int kLanes = 8;  // partial sums per dot
constexpr int kKeys = 4;   // keys per pass

// A cache element as fp32: float as is, uint16_t as BF16 bits (F16 caches are widened to float first).
inline float widen(float x) { return x; }
inline float widen(uint16_t b) { return bf16_to_f32(b); }

// The loops below run over fixed chunks of kLanes with `#pragma GCC unroll`: GCC 12 at -O2 vectorises
// only such straight-line code (its very-cheap cost model leaves loops of unknown trip count scalar).

// sc[r] = scale * q . k[r] for kN keys k[r] = k + r * ldk (each [D]).
template <int kN, typename T>
__attribute__((always_inline)) inline void dots(const float* q, const T* k, int64_t ldk, int D, float scale,
                                                float* sc) {
  const int d_main = D / kLanes * kLanes;
  float acc[kN][kLanes] = {};
  for (int d = 0; d < d_main; d += kLanes)
#pragma GCC unroll 4
    for (int r = 0; r < kN; ++r)
#pragma GCC unroll 8
      for (int u = 0; u < kLanes; ++u) acc[r][u] += q[d + u] * widen(k[r * ldk + d + u]);
  for (int r = 0; r < kN; ++r) {
    float tail = 0.f;
    for (int d = d_main; d < D; ++d) tail += q[d] * widen(k[r * ldk + d]);
    for (int w = kLanes / 2; w > 0; w /= 2)  // a fixed pairwise tree over the lanes
      for (int u = 0; u < w; ++u) acc[r][u] += acc[r][u + w];
    sc[r] = scale * (acc[r][0] + tail);
  }
}

// Scores of nh query heads against n keys: sc[h * ld_sc + j] = scale * q[h] . k[j].
// q: [nh, D]; k: [n, D] at row stride ldk.
template <typename T>
__attribute__((target_clones("arch=x86-64-v3", "default"))) void qk_block(const float* q, int nh, int D, const T* k,
                                                                          int64_t ldk, int n, float scale, float* sc,
                                                                          int64_t ld_sc) {
  for (int h = 0; h < nh; ++h) {
    const float* qh = q + static_cast<int64_t>(h) * D;
    float* sh = sc + h * ld_sc;
    int j = 0;
    for (; j + kKeys <= n; j += kKeys) dots<kKeys>(qh, k + j * ldk, ldk, D, scale, sh + j);
    for (; j < n; ++j) dots<1>(qh, k + j * ldk, ldk, D, scale, sh + j);
  }
}

// out[h, :] += sum_j p[h * ld_p + j] * v[j, :] for nh heads, one key after another (a running sum).
// out: [nh, D]; v: [n, D] at row stride ldv.
template <typename T>
__attribute__((target_clones("arch=x86-64-v3", "default"))) void pv_block(const float* p, int64_t ld_p, int nh,
                                                                          const T* v, int64_t ldv, int n, int D,
                                                                          float* out) {
  const int d_main = D / kLanes * kLanes;
  for (int h = 0; h < nh; ++h) {
    const float* ph = p + h * ld_p;
    float* o = out + static_cast<int64_t>(h) * D;
    int j = 0;
    for (; j + kKeys <= n; j += kKeys) {
      const float p0 = ph[j], p1 = ph[j + 1], p2 = ph[j + 2], p3 = ph[j + 3];
      const T *v0 = v + j * ldv, *v1 = v0 + ldv, *v2 = v1 + ldv, *v3 = v2 + ldv;
      for (int d = 0; d < d_main; d += kLanes) {
        float acc[kLanes];
#pragma GCC unroll 8
        for (int u = 0; u < kLanes; ++u)
          acc[u] = (((o[d + u] + p0 * widen(v0[d + u])) + p1 * widen(v1[d + u])) + p2 * widen(v2[d + u])) +
                   p3 * widen(v3[d + u]);
#pragma GCC unroll 8
        for (int u = 0; u < kLanes; ++u) o[d + u] = acc[u];
      }
      for (int d = d_main; d < D; ++d)
        o[d] = (((o[d] + p0 * widen(v0[d])) + p1 * widen(v1[d])) + p2 * widen(v2[d])) + p3 * widen(v3[d]);
    }
    for (; j < n; ++j) {
      const float pj = ph[j];
      const T* vj = v + j * ldv;
      for (int d = 0; d < d_main; d += kLanes) {
        float acc[kLanes];
#pragma GCC unroll 8
        for (int u = 0; u < kLanes; ++u) acc[u] = o[d + u] + pj * widen(vj[d + u]);
#pragma GCC unroll 8
        for (int u = 0; u < kLanes; ++u) o[d + u] = acc[u];
      }
      for (int d = d_main; d < D; ++d) o[d] += pj * widen(vj[d]);
    }
  }
}

// One work item: query heads [h0, h0 + nh) of KV head kvh's group, for decode sequence s.
struct Item {
  int s, kvh, h0, nh;
};

class DecodeRows {
 public:
  explicit DecodeRows(const AttentionParams& p)
      : p_(p), row_stride_(static_cast<int64_t>(p.num_kv_heads) * p.head_dim) {}

  void run(const Item& it) {
    const int D = p_.head_dim, bs = p_.block_size, H = p_.num_heads, group = H / p_.num_kv_heads;
    const int len = p_.seq_lens.ptr<int32_t>()[it.s];
    const int32_t* table = p_.block_tables.ptr<int32_t>() + static_cast<int64_t>(it.s) * p_.max_blocks_per_seq;
    const int64_t head0 = static_cast<int64_t>(p_.query_start.ptr<int32_t>()[it.s]) * H + it.kvh * group + it.h0;
    const float* q = p_.q.ptr<float>() + head0 * D;  // [nh, D]
    float* out = p_.out.ptr<float>() + head0 * D;    // [nh, D]
    sc_.resize(static_cast<size_t>(it.nh) * len);     // scores, then numerators: [nh, len]
    const int nb = (len + bs - 1) / bs;
    // Keys [lo, len): all of them, or the sliding window's; blocks from b0 (its keys before lo get p = 0).
    const int lo = window_start(len - 1, p_.window), b0 = lo / bs;
    for (int b = b0; b < nb; ++b) {
      const int n = std::min(bs, len - b * bs);
      with_block(p_.k_cache, table[b], it.kvh, n, [&](const auto* k, int64_t ld) {
        qk_block(q, it.nh, D, k, ld, n, p_.scale, sc_.data() + b * bs, len);
      });
    }
    inv_.resize(it.nh);
    for (int h = 0; h < it.nh; ++h) {
      float* sh = sc_.data() + static_cast<int64_t>(h) * len;
      std::fill(sh + b0 * bs, sh + lo, 0.0f);
      softcap_scores(sh + lo, len - lo, p_.softcap);
      inv_[h] = 1.0f / softmax_numerators(sh + lo, len - lo, sink_of(p_, it.kvh * group + it.h0 + h));
    }
    std::fill(out, out + static_cast<int64_t>(it.nh) * D, 0.0f);
    for (int b = b0; b < nb; ++b) {
      const int n = std::min(bs, len - b * bs);
      with_block(p_.v_cache, table[b], it.kvh, n, [&](const auto* v, int64_t ld) {
        pv_block(sc_.data() + b * bs, len, it.nh, v, ld, n, D, out);
      });
    }
    for (int h = 0; h < it.nh; ++h)
      for (int d = 0; d < D; ++d) out[h * D + d] *= inv_[h];
  }

 private:
  // f(rows, ld) on rows [0, n) of KV head kvh in cache block `block`: [n, D] at row stride ld, read in
  // place as float (F32) or uint16_t BF16 bits (BF16); an F16 or F8_E4M3 block is widened into buf_ first.
  template <typename F>
  void with_block(const Tensor& cache, int32_t block, int kvh, int n, F&& f) {
    const int D = p_.head_dim;
    const int64_t off = static_cast<int64_t>(block) * p_.block_size * row_stride_ + static_cast<int64_t>(kvh) * D;
    if (cache.dtype == DType::kF32) return f(cache.ptr<float>() + off, row_stride_);
    if (cache.dtype == DType::kBF16) return f(cache.ptr<uint16_t>() + off, row_stride_);
    buf_.resize(static_cast<size_t>(n) * D);  // F16, F8_E4M3
    for (int i = 0; i < n; ++i) {
      float* row = buf_.data() + static_cast<size_t>(i) * D;
      if (cache.dtype == DType::kF8E4M3) {
        fp8_e4m3_widen(cache.ptr<uint8_t>() + off + i * row_stride_, D, 1.f, row);
        continue;
      }
      for (int d = 0; d < D; ++d) row[d] = load_elem(cache.data, cache.dtype, off + i * row_stride_ + d);
    }
    f(static_cast<const float*>(buf_.data()), static_cast<int64_t>(D));
  }

  const AttentionParams& p_;
  const int64_t row_stride_;  // elements between a KV head's consecutive rows: Hkv * D
  std::vector<float> sc_, inv_, buf_;
};

}  // namespace

void paged_attention_decode(ThreadPool& pool, const AttentionParams& p, const std::vector<int32_t>& seqs) {
  if (seqs.empty()) return;
  // Items: (sequence, KV head), each doing its whole query-head group over one read of its K/V. With
  // fewer items than 2 per thread (one long sequence, few KV heads), the groups are split in head ranges.
  const int Hkv = p.num_kv_heads, group = p.num_heads / Hkv;
  const int64_t base = static_cast<int64_t>(seqs.size()) * Hkv;
  const int want = 2 * pool.num_threads();
  const int splits = base >= want ? 1 : static_cast<int>(std::min<int64_t>(group, (want + base - 1) / base));
  std::vector<Item> items;
  items.reserve(base * splits);
  for (int32_t s : seqs)
    for (int kvh = 0; kvh < Hkv; ++kvh)
      for (int i = 0; i < splits; ++i) {
        const int h0 = group * i / splits, h1 = group * (i + 1) / splits;
        items.push_back({s, kvh, h0, h1 - h0});
      }
  pool.parallel_for(static_cast<int64_t>(items.size()), [&](int64_t b, int64_t e) {
    DecodeRows rows(p);
    for (int64_t i = b; i < e; ++i) rows.run(items[i]);
  }, 1);
}

}  // namespace vireo::cpu
