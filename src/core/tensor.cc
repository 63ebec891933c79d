#include "core/tensor.h"

namespace vireo {

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  int64_t row = numel() / (shape.empty() || shape[0] == 0 ? 1 : shape[0]);
  std::vector<int64_t> s = shape;
  s[0] = end - begin;
  Tensor t(static_cast<char*>(data) + static_cast<int64_t>(dtype_row_bytes(dtype, row)) * begin, dtype, s, device);
  // Scales follow the rows: a first-dimension row holds row / last-dim scaled vectors.
  if (row_scale) t.row_scale = row_scale + (shape.empty() || shape.back() == 0 ? 0 : row / shape.back()) * begin;
  return t;
}

std::string Tensor::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace vireo
