#include "model/dummy_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/quant_blocks.h"

namespace vireo {
namespace {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Counter-based: each block of 256 values seeds a xorshift64* stream from (key, block index), so a
// value depends only on its position. One 64-bit draw gives two 32-bit uniforms.
constexpr int64_t kBlock = 256;

template <typename Store>
void fill_range(int64_t begin, int64_t end, uint64_t key, float half_width, Store store) {
  const float scale = 2.0f * half_width * (1.0f / 4294967296.0f);
  for (int64_t blk = begin / kBlock; blk * kBlock < end; ++blk) {
    uint64_t s = splitmix64(key ^ (static_cast<uint64_t>(blk) * 0xd1b54a32d192ed03ull)) | 1;
    const int64_t b0 = blk * kBlock, lo = std::max(begin, b0), hi = std::min(end, b0 + kBlock);
    for (int64_t i = b0; i < hi; i += 2) {
      s ^= s >> 12;
      s ^= s << 25;
      s ^= s >> 27;
      const uint64_t h = s * 0x2545f4914f6cdd1dull;
      if (i >= lo) store(i, static_cast<float>(static_cast<uint32_t>(h)) * scale - half_width);
      if (i + 1 >= lo && i + 1 < hi) store(i + 1, static_cast<float>(static_cast<uint32_t>(h >> 32)) * scale - half_width);
    }
  }
}

}  // namespace

void fill_dummy(Tensor& out, uint64_t seed, const std::string& name, float stddev) {
  const int64_t n = out.numel();
  const uint64_t key = splitmix64(seed * 0x9e3779b97f4a7c15ull ^ fnv1a(name));
  const float half_width = stddev * std::sqrt(3.0f);  // uniform(-a, a) has std a / sqrt(3)
  const int nt = static_cast<int>(
      std::clamp<int64_t>(n / (1 << 20), 1, std::max(1u, std::thread::hardware_concurrency())));
  auto work = [&](int64_t b, int64_t e) {
    switch (out.dtype) {
      case DType::kF32: {
        float* p = out.ptr<float>();
        if (stddev == 0) std::fill(p + b, p + e, 1.0f);
        else fill_range(b, e, key, half_width, [p](int64_t i, float v) { p[i] = v; });
        break;
      }
      case DType::kBF16: {
        auto* p = out.ptr<uint16_t>();
        if (stddev == 0) std::fill(p + b, p + e, f32_to_bf16(1.0f));
        else fill_range(b, e, key, half_width, [p](int64_t i, float v) { p[i] = f32_to_bf16(v); });
        break;
      }
      case DType::kF16: {
        auto* p = out.ptr<uint16_t>();
        if (stddev == 0) std::fill(p + b, p + e, f32_to_f16(1.0f));
        else fill_range(b, e, key, half_width, [p](int64_t i, float v) { p[i] = f32_to_f16(v); });
        break;
      }
      default:
        break;
    }
  };
  if (out.dtype != DType::kF32 && out.dtype != DType::kBF16 && out.dtype != DType::kF16)
    throw Error("dummy weights: unsupported dtype " + std::string(dtype_name(out.dtype)) + " for " + name);
  if (nt == 1) {
    work(0, n);
    return;
  }
  std::vector<std::thread> threads;
  const int64_t chunk = ((n + nt - 1) / nt + kBlock - 1) / kBlock * kBlock;
  for (int t = 0; t < nt; ++t) {
    const int64_t b = t * chunk, e = std::min(n, b + chunk);
    if (b < e) threads.emplace_back(work, b, e);
  }
  for (auto& th : threads) th.join();
}

void fill_dummy_bytes(uint8_t* out, int64_t n, uint64_t seed, const std::string& name, int lo, int hi) {
  if (lo < 0 || hi > 255 || lo > hi) throw Error("dummy weights: bad byte range for " + name);
  const uint64_t key = splitmix64(seed * 0x9e3779b97f4a7c15ull ^ fnv1a(name));
  const float span = static_cast<float>(hi - lo + 1);
  auto work = [&](int64_t b, int64_t e) {  // uniform [-0.5, 0.5) -> lo + floor((u + 0.5) * span)
    fill_range(b, e, key, 0.5f, [&](int64_t i, float u) {
      out[i] = static_cast<uint8_t>(lo + std::min(hi - lo, static_cast<int>((u + 0.5f) * span)));
    });
  };
  const int nt = static_cast<int>(
      std::clamp<int64_t>(n / (1 << 20), 1, std::max(1u, std::thread::hardware_concurrency())));
  const int64_t chunk = ((n + nt - 1) / nt + kBlock - 1) / kBlock * kBlock;
  std::vector<std::thread> threads;
  for (int t = 1; t < nt; ++t) {
    const int64_t b = t * chunk, e = std::min(n, b + chunk);
    if (b < e) threads.emplace_back(work, b, e);
  }
  work(0, std::min(n, chunk));
  for (auto& th : threads) th.join();
}

namespace {

// Where a block type keeps its fp16 scale (d) and min (dmin / m; -1: none), and the spread of its
// quant integers times sub-block scales, so that d = stddev / spread gives values of about stddev.
struct BlockScales {
  int d_at, min_at;
  float spread, min_ratio;  // the min field = min_ratio * d
};

BlockScales block_scales(DType t) {
  switch (t) {
    case DType::kQ4_0: return {0, -1, 4.6f, 0};
    case DType::kQ4_1: return {0, 2, 4.6f, -7.5f};
    case DType::kQ5_0: return {0, -1, 9.2f, 0};
    case DType::kQ5_1: return {0, 2, 9.2f, -15.5f};
    case DType::kQ8_0: return {0, -1, 73.0f, 0};
    case DType::kQ2_K: return {80, 82, 10.0f, 0.2f};
    case DType::kQ3_K: return {108, -1, 40.0f, 0};
    case DType::kQ4_K: return {0, 2, 143.0f, 7.5f};
    case DType::kQ5_K: return {0, 2, 285.0f, 15.5f};
    case DType::kQ6_K: return {208, -1, 1332.0f, 0};
    default: throw Error("dummy weights: " + std::string(dtype_name(t)) + " is not a block type");
  }
}

}  // namespace

void fill_dummy_blocks(Tensor& out, uint64_t seed, const std::string& name, float stddev) {
  const BlockScales bs = block_scales(out.dtype);
  const qblocks::Format f = qblocks::format(out.dtype);
  const int64_t num_blocks = static_cast<int64_t>(out.nbytes()) / f.bytes;
  auto* p = out.ptr<uint8_t>();
  fill_dummy_bytes(p, static_cast<int64_t>(out.nbytes()), seed, name, 0, 255);
  const uint16_t d = f32_to_f16((stddev > 0 ? stddev : 0.02f) / bs.spread);
  const uint16_t m = f32_to_f16(bs.min_ratio * f16_to_f32(d));
  for (int64_t b = 0; b < num_blocks; ++b) {
    std::memcpy(p + b * f.bytes + bs.d_at, &d, 2);
    if (bs.min_at >= 0) std::memcpy(p + b * f.bytes + bs.min_at, &m, 2);
  }
}

}  // namespace vireo
