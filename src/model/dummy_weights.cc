#include "model/dummy_weights.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "core/error.h"

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

}  // namespace vireo
