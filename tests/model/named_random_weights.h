// Random weights for the tiny test models: deterministic per tensor name (a hash of the name seeds a
// normal stream), each value offset + scale * r of a standard normal r, (offset, scale) chosen by the
// model family per tensor name (norms around 1 or 0, biases, special tensors).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "model/weight_source.h"

namespace vireo::testing {

class NamedRandomWeights final : public WeightSource {
 public:
  using Rule = std::function<std::pair<float, float>(const std::string& name)>;  // (offset, scale)
  explicit NamedRandomWeights(Rule rule) : rule_(std::move(rule)) {}
  bool has(const std::string&) const override { return true; }
  std::optional<Tensor> view(const std::string&, const std::vector<int64_t>&) const override { return std::nullopt; }
  void read(const std::string& name, const std::vector<int64_t>& shape, DType dtype, void* dst) const override {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(name)));
    std::normal_distribution<float> d(0.f, 1.f);
    const auto [offset, scale] = rule_(name);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = offset + scale * d(rng);
    store_f32_as(v.data(), n, dtype, dst);
  }

 private:
  Rule rule_;
};

}  // namespace vireo::testing
