#include "model/weight_source.h"

#include <cstring>

#include "core/error.h"

namespace vireo {

void store_f32_as(const float* src, int64_t n, DType dtype, void* dst) {
  if (dtype == DType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
    return;
  }
  if (dtype != DType::kBF16 && dtype != DType::kF16)
    throw Error("weights: cannot store as " + std::string(dtype_name(dtype)));
  auto* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = dtype == DType::kBF16 ? f32_to_bf16(src[i]) : f32_to_f16(src[i]);
}

void store_as(const Tensor& src, DType dtype, void* dst) {
  if (src.dtype == dtype) {
    std::memcpy(dst, src.data, src.nbytes());
    return;
  }
  std::vector<float> tmp(src.numel());
  convert_to_f32(src.data, src.dtype, tmp.data(), tmp.size());
  store_f32_as(tmp.data(), src.numel(), dtype, dst);
}

void WeightSource::read_mxfp4(const std::string& name, const std::vector<int64_t>& expected, uint8_t* blocks,
                              uint8_t* scales) const {
  (void)expected, (void)blocks, (void)scales;
  throw Error("weights: " + name + " is not stored in MXFP4");
}

void WeightSource::read_packed(const std::string& name, const std::vector<int64_t>& expected, void* dst) const {
  (void)expected, (void)dst;
  throw Error("weights: " + name + " is not stored in a block-quantized type");
}

}  // namespace vireo
