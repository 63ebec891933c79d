// with_fp8_dequant and checkpoint_fp8_layout (fp8_weights.h).
#include "model/fp8_weights.h"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/parallel_ranges.h"
#include "core/fp8.h"

namespace vireo {
namespace {

using nlohmann::json;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string shape_str(const std::vector<int64_t>& s) { return Tensor(nullptr, DType::kF32, s).shape_str(); }

// [b0, b1] of positive integers, else throws naming `what`.
Fp8Layout block_of(const json& v, const std::string& what) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer() ||
      v[0].get<int64_t>() <= 0 || v[1].get<int64_t>() <= 0)
    throw Error(what + ": expected [rows, cols] of positive integers, got " + v.dump());
  return {v[0].get<int64_t>(), v[1].get<int64_t>()};
}

// compressed-tensors: every config group's weights must be 8-bit floats (strategy tensor, channel or block).
Fp8Layout compressed_tensors_layout(const json& q, const std::string& where) {
  const std::string format = lower(q.value("format", std::string()));
  if (!format.empty() && format != "float-quantized" && format != "naive-quantized")
    throw Error(where + ": compressed-tensors format '" + format +
                "' is not supported (vireo reads float-quantized FP8 checkpoints; GGUF files for integer "
                "quantizations)");
  Fp8Layout layout;
  const auto groups = q.find("config_groups");
  if (groups == q.end() || !groups->is_object() || groups->empty())
    throw Error(where + ": compressed-tensors config without config_groups");
  for (const auto& [gname, g] : groups->items()) {
    const json w = g.is_object() ? g.value("weights", json()) : json();
    if (!w.is_object()) throw Error(where + ": config group '" + gname + "' has no weights scheme");
    const int bits = w.value("num_bits", 0);
    const std::string type = lower(w.value("type", std::string()));
    if (bits != 8 || type != "float")
      throw Error(where + ": config group '" + gname + "' quantizes weights to " + std::to_string(bits) + "-bit " +
                  type + ": not supported (8-bit float only)");
    const std::string strategy = lower(w.value("strategy", std::string("tensor")));
    if (strategy == "block") {
      layout = block_of(w.value("block_structure", json()), where + ": config group '" + gname + "' block_structure");
    } else if (strategy != "tensor" && strategy != "channel") {
      throw Error(where + ": config group '" + gname + "' weight strategy '" + strategy +
                  "' is not supported (tensor, channel, block)");
    }
  }
  return layout;
}

class Fp8Weights final : public WeightSource {
 public:
  Fp8Weights(std::unique_ptr<Checkpoint> ckpt, Fp8Layout layout) : ckpt_(std::move(ckpt)), layout_(layout) {}
  bool has(const std::string& name) const override { return ckpt_->has(name); }
  std::optional<Tensor> view(const std::string& name, const std::vector<int64_t>& expected) const override {
    return ckpt_->view(name, expected);  // nullopt for FP8 tensors
  }
  std::optional<std::vector<int64_t>> shape(const std::string& name) const override { return ckpt_->shape(name); }
  void read(const std::string& name, const std::vector<int64_t>& expected, DType dtype, void* dst) const override {
    if (!ckpt_->is_fp8(name)) return ckpt_->read(name, expected, dtype, dst);
    std::vector<float> out;
    dequantize(name, expected, out);
    store_f32_as(out.data(), static_cast<int64_t>(out.size()), dtype, dst);
  }

 private:
  // out = the tensor's values: expected [..., rows, cols] is a stack of matrices, each with its scales.
  void dequantize(const std::string& name, const std::vector<int64_t>& expected, std::vector<float>& out) const {
    const Tensor w = ckpt_->get(name, expected);  // the raw bytes, shape checked
    const std::string sname = ckpt_->has(name + "_scale_inv") ? name + "_scale_inv" : name + "_scale";
    if (!ckpt_->has(sname))
      throw Error(ckpt_->dir() + ": FP8 tensor '" + name + "' has no '" + name + "_scale_inv' or '" + name +
                  "_scale' beside it");
    const std::vector<int64_t> sshape = *ckpt_->shape(sname);
    const Tensor st = ckpt_->get(sname, sshape);
    if (st.dtype != DType::kF32 && st.dtype != DType::kBF16 && st.dtype != DType::kF16)
      throw Error(ckpt_->dir() + ": scale tensor '" + sname + "' is not F32/BF16/F16");
    std::vector<float> scale(st.numel());
    convert_to_f32(st.data, st.dtype, scale.data(), scale.size());

    const int64_t cols = expected.empty() ? 1 : expected.back();
    const int64_t rows = expected.size() >= 2 ? expected[expected.size() - 2] : 1;
    const int64_t num = rows * cols == 0 ? 0 : w.numel() / (rows * cols);
    Fp8Matrix m;
    m.rows = rows, m.cols = cols, m.e5m2 = ckpt_->stored_dtype(name) == "F8_E5M2";
    int64_t scale_stride = 0;  // scales a matrix
    const int64_t br = layout_.block_rows ? layout_.block_rows : 128, bc = layout_.block_cols ? layout_.block_cols : 128;
    const int64_t sr = (rows + br - 1) / br, sc = (cols + bc - 1) / bc;
    const bool blocks = sshape.size() >= 2 && sshape[sshape.size() - 2] == sr && sshape.back() == sc &&
                        static_cast<int64_t>(scale.size()) == num * sr * sc;
    if (scale.size() == 1) {
      m.block_rows = rows, m.block_cols = cols;
    } else if (blocks) {
      m.block_rows = br, m.block_cols = bc, scale_stride = sr * sc;
    } else if (static_cast<int64_t>(scale.size()) == num * rows && (sshape.size() == 1 || sshape.back() == 1)) {
      m.block_rows = 1, m.block_cols = cols, scale_stride = rows;
    } else {
      throw Error(ckpt_->dir() + ": scale tensor '" + sname + "' " + shape_str(sshape) + " fits neither one scale, " +
                  "one a row of " + shape_str(expected) + ", nor blocks of " + std::to_string(br) + " x " +
                  std::to_string(bc) + " ([" + std::to_string(sr) + ", " + std::to_string(sc) + "] a matrix)");
    }
    out.resize(static_cast<size_t>(w.numel()));
    if (out.empty()) return;
    // Whole scale-row bands per thread (an 8B checkpoint is ~8 G values to decode at load).
    const int64_t band = m.block_rows, num_bands = (rows + band - 1) / band;
    const int64_t scale_cols = (cols + m.block_cols - 1) / m.block_cols;  // scales a band
    parallel_ranges(num * num_bands, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t b = i / num_bands, band_index = i % num_bands, r0 = band_index * band;
        Fp8Matrix part = m;
        part.rows = std::min(band, rows - r0);
        part.w = static_cast<const uint8_t*>(w.data) + (b * rows + r0) * cols;
        part.scale = scale.data() + b * scale_stride + band_index * scale_cols;
        fp8_dequantize(part, out.data() + (b * rows + r0) * cols);
      }
    });
  }

  std::unique_ptr<Checkpoint> ckpt_;
  Fp8Layout layout_;
};

}  // namespace

std::optional<Fp8Layout> checkpoint_fp8_layout(const json& config, const std::string& source) {
  const auto it = config.find("quantization_config");
  if (it == config.end() || it->is_null()) return std::nullopt;
  const std::string where = source + ": quantization_config";
  if (!it->is_object()) throw Error(where + " is not an object");
  const std::string method = lower(it->value("quant_method", std::string()));
  if (method == "mxfp4") return std::nullopt;  // GPT-OSS's experts (decoder_gpt_oss.cc)
  if (method == "fp8") {
    const std::string fmt = lower(it->value("fmt", std::string("e4m3")));
    if (fmt != "e4m3" && fmt != "e5m2") throw Error(where + ": fp8 fmt '" + fmt + "' is not supported (e4m3, e5m2)");
    const json block = it->value("weight_block_size", json());
    return block.is_null() ? Fp8Layout{} : block_of(block, where + ".weight_block_size");
  }
  if (method == "compressed-tensors") return compressed_tensors_layout(*it, where);
  throw Error(where + ".quant_method '" + method +
              "' is not supported (vireo reads FP8 checkpoints: fp8, compressed-tensors float8; GPT-OSS's mxfp4; "
              "GGUF files for integer quantizations)");
}

std::unique_ptr<WeightSource> with_fp8_dequant(std::unique_ptr<Checkpoint> ckpt, const Fp8Layout& layout) {
  return std::make_unique<Fp8Weights>(std::move(ckpt), layout);
}

}  // namespace vireo
