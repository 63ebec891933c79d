// Helpers of the CUDA op tests: the CPU backend is the oracle. Inputs are drawn fresh (seed printed
// on failure), rounded to the GPU's activation dtype, and fed to both backends (CPU in F32).
// Outputs are poisoned with NaN first; every element is checked.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/fp8.h"

namespace vireo::testing {

inline bool gpu_present() {
  static const bool present = cuda_available();
  return present;
}

#define VIREO_REQUIRE_GPU() \
  if (!::vireo::testing::gpu_present()) GTEST_SKIP() << "no CUDA GPU visible: CUDA op tests skipped"

inline float round_to(DType t, float v) {
  switch (t) {
    case DType::kBF16: return bf16_to_f32(f32_to_bf16(v));
    case DType::kF16: return f16_to_f32(f32_to_f16(v));
    default: return v;
  }
}

struct Tolerance {
  float atol, rtol;
};
inline Tolerance tol_for(DType t) {
  switch (t) {
    case DType::kBF16: return {1e-2f, 1.6e-2f};
    case DType::kF16: return {2e-3f, 4e-3f};
    default: return {1e-4f, 1e-4f};
  }
}

class CudaOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    VIREO_REQUIRE_GPU();
    seed_ = std::random_device{}();
    rng_.seed(seed_);
    cpu_ = create_backend("cpu", "float32");
  }
  void use_dtype(DType act) {
    if (gpu_)
      for (auto& t : owned_) gpu_->free(t);
    owned_.clear();
    act_ = act;
    const char* name = act == DType::kBF16 ? "bfloat16" : act == DType::kF16 ? "float16" : "float32";
    gpu_ = create_backend("cuda", name);
    ASSERT_EQ(gpu_->activation_dtype(), act);
  }

  // Uniform values in [lo, hi), rounded to dtype t.
  std::vector<float> rand_vec(size_t n, float lo, float hi, DType t) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = round_to(t, u(rng_));
    return v;
  }
  int rand_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  // Host float data -> CPU tensor (F32, owned by the fixture) and GPU tensor of dtype t.
  Tensor cpu_f32(const std::vector<float>& v, std::vector<int64_t> shape) {
    keep_f_.push_back(v);
    return Tensor(keep_f_.back().data(), DType::kF32, std::move(shape));
  }
  Tensor cpu_i32(const std::vector<int>& v, std::vector<int64_t> shape) {
    keep_i_.push_back(v);
    return Tensor(keep_i_.back().data(), DType::kI32, std::move(shape));
  }
  Tensor gpu_from(const std::vector<float>& v, std::vector<int64_t> shape, DType t) {
    return gpu_own(gpu_->upload(cpu_f32(v, std::move(shape)), t));
  }
  // An F8_E4M3 GPU tensor (a --kv-cache-dtype fp8 cache) of the codes of v (nearest, saturating); v's
  // values become the codes' values, so a CPU reference over v sees what the GPU reads.
  Tensor gpu_fp8(std::vector<float>& v, std::vector<int64_t> shape) {
    std::vector<uint8_t> codes(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      codes[i] = f32_to_fp8_e4m3(v[i]);
      v[i] = fp8_e4m3_to_f32(codes[i]);
    }
    return gpu_own(gpu_->upload(Tensor(codes.data(), DType::kF8E4M3, std::move(shape)), DType::kF8E4M3));
  }
  Tensor gpu_i32(const std::vector<int>& v, std::vector<int64_t> shape) {
    return gpu_own(gpu_->upload(cpu_i32(v, std::move(shape)), DType::kI32));
  }
  // A GPU output filled with NaN.
  Tensor gpu_poisoned(std::vector<int64_t> shape, DType t) {
    Tensor out = gpu_own(gpu_->alloc(std::move(shape), t));
    std::vector<uint8_t> bytes(out.nbytes());
    const size_t es = dtype_size(t);
    for (size_t i = 0; i < bytes.size(); i += es) {
      if (t == DType::kF32) {
        const uint32_t nan = 0x7fc00000u;
        std::memcpy(&bytes[i], &nan, 4);
      } else if (t == DType::kF8E4M3) {
        bytes[i] = 0x7f;  // E4M3's NaN
      } else {
        const uint16_t nan = t == DType::kBF16 ? 0x7fc0 : 0x7e00;
        std::memcpy(&bytes[i], &nan, 2);
      }
    }
    gpu_->copy_from_host(bytes.data(), out);
    return out;
  }
  Tensor cpu_poisoned(std::vector<int64_t> shape) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    return cpu_f32(std::vector<float>(n, std::nanf("")), std::move(shape));
  }
  std::vector<float> to_host(const Tensor& t) {
    std::vector<float> out(t.numel());
    if (t.device == DeviceKind::kCPU) {
      convert_to_f32(t.data, t.dtype, out.data(), out.size());
      return out;
    }
    std::vector<uint8_t> raw(t.nbytes());
    gpu_->copy_to_host(t, raw.data());
    convert_to_f32(raw.data(), t.dtype, out.data(), out.size());
    return out;
  }
  Tensor gpu_own(Tensor t) {
    owned_.push_back(t);
    return t;
  }
  void TearDown() override {
    if (gpu_)
      for (auto& t : owned_) gpu_->free(t);
    owned_.clear();
  }

  // Every element: finite and |got - want| <= atol + rtol * |want|. Reports the first few misses.
  void expect_close(const std::vector<float>& got, const std::vector<float>& want, Tolerance tol,
                    const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    size_t bad = 0;
    std::string first;
    double max_err = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const float g = got[i], w = want[i];
      const float err = std::fabs(g - w);
      const bool ok = std::isfinite(g) && std::isfinite(w) && err <= tol.atol + tol.rtol * std::fabs(w);
      if (std::isfinite(err)) max_err = std::max<double>(max_err, err);
      if (!ok) {
        if (bad < 5) first += " [" + std::to_string(i) + "] got " + std::to_string(g) + " want " + std::to_string(w) + ";";
        ++bad;
      }
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements off (max err " << max_err
                       << ", seed " << seed_ << "):" << first;
  }

  DType act_ = DType::kBF16;
  unsigned seed_ = 0;
  std::mt19937 rng_;
  std::unique_ptr<Backend> cpu_, gpu_;
  std::deque<std::vector<float>> keep_f_;
  std::deque<std::vector<int>> keep_i_;
  std::vector<Tensor> owned_;
};

}  // namespace vireo::testing
