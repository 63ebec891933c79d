// The fixture the CPU op tests share: a CPU backend, a seeded generator, and host vectors viewed as tensors.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.h"

namespace vireo {

template <unsigned kSeed>
struct CpuOpFixture : ::testing::Test {
  std::unique_ptr<Backend> be = create_backend("cpu");
  std::mt19937 rng{kSeed};
  std::vector<float> randn(size_t n, float scale = 1.0f) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
  }
  static Tensor view(std::vector<float>& v, std::vector<int64_t> shape) { return Tensor(v.data(), DType::kF32, shape); }
  static Tensor view(std::vector<int32_t>& v, std::vector<int64_t> shape) { return Tensor(v.data(), DType::kI32, shape); }
  static Tensor view16(std::vector<uint16_t>& v, DType t, std::vector<int64_t> shape) { return Tensor(v.data(), t, shape); }
};

}  // namespace vireo
