// A non-owning view of a dense row-major tensor in some device's memory.
// Ownership stays with whoever allocated it (a Backend, an mmapped file, a std::vector).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace vireo {

enum class DeviceKind : uint8_t { kCPU, kCUDA };

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  DeviceKind device = DeviceKind::kCPU;
  // FP8 weights (DType::kF8E4M3) only: one F32 scale per row (per last-dimension vector), in the same
  // device's memory, value = fp8 x row_scale[row]. Null for every other tensor.
  float* row_scale = nullptr;

  Tensor() = default;
  Tensor(void* d, DType t, std::vector<int64_t> s, DeviceKind dev = DeviceKind::kCPU)
      : data(d), dtype(t), shape(std::move(s)), device(dev) {}

  int ndim() const { return static_cast<int>(shape.size()); }
  int64_t dim(int i) const { return shape[i < 0 ? shape.size() + i : i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    return n;
  }
  size_t nbytes() const { return dtype_row_bytes(dtype, numel()); }  // block types: whole blocks
  bool empty() const { return data == nullptr; }
  template <typename T>
  T* ptr() const { return static_cast<T*>(data); }

  // Same memory, new shape with the same number of elements.
  Tensor view(std::vector<int64_t> new_shape) const {
    Tensor t(data, dtype, std::move(new_shape), device);
    t.row_scale = row_scale;
    return t;
  }
  // Rows [begin, end) of the first dimension.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  std::string shape_str() const;  // "[2, 3, 4]"
};

}  // namespace vireo
