// with_model_prefix: a WeightSource view that renames "model.X" to "<prefix>X" (multimodal wrappers).
#include <string>
#include <utility>

#include "model/weight_source.h"

namespace vireo {
namespace {

class PrefixedWeights final : public WeightSource {
 public:
  PrefixedWeights(std::unique_ptr<WeightSource> inner, std::string prefix)
      : inner_(std::move(inner)), prefix_(std::move(prefix)) {}
  bool has(const std::string& name) const override { return inner_->has(map(name)); }
  std::optional<Tensor> view(const std::string& name, const std::vector<int64_t>& expected) const override {
    return inner_->view(map(name), expected);
  }
  void read(const std::string& name, const std::vector<int64_t>& expected, DType dtype, void* dst) const override {
    inner_->read(map(name), expected, dtype, dst);
  }
  std::optional<std::vector<int64_t>> shape(const std::string& name) const override { return inner_->shape(map(name)); }
  bool norms_include_one() const override { return inner_->norms_include_one(); }
  bool experts_as_rows() const override { return inner_->experts_as_rows(); }
  bool stored_as_mxfp4(const std::string& name) const override { return inner_->stored_as_mxfp4(map(name)); }
  void read_mxfp4(const std::string& name, const std::vector<int64_t>& expected, uint8_t* blocks,
                  uint8_t* scales) const override {
    inner_->read_mxfp4(map(name), expected, blocks, scales);
  }

 private:
  std::string map(const std::string& name) const {
    if (name.rfind("model.", 0) == 0) return prefix_ + name.substr(6);
    // transformers 4's wrappers keep the untied head inside the text model: language_model.lm_head.
    if (name == "lm_head.weight" && prefix_ == "language_model.model." && !inner_->has(name)) return "language_model.lm_head.weight";
    return name;
  }
  std::unique_ptr<WeightSource> inner_;
  std::string prefix_;
};

}  // namespace

std::unique_ptr<WeightSource> with_model_prefix(std::unique_ptr<WeightSource> inner, const std::string& prefix) {
  return std::make_unique<PrefixedWeights>(std::move(inner), prefix);
}

}  // namespace vireo
