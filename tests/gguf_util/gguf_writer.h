// Test-only GGUF writer: metadata of every value type, tensors in F32/F16/BF16/Q8_0, v2 or v3,
// any alignment. Used to turn the tiny safetensors fixtures and tokenizer.json files into GGUF
// files at test time (hf_to_gguf.h), and to craft broken files.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace vireo::testing {

class GgufWriter {
 public:
  // Raw metadata entry: key, value type id, and the value's encoded bytes.
  void add_raw(const std::string& key, uint32_t type, const std::string& bytes) {
    kv_ += str(key) + pod(type) + bytes;
    ++num_kv_;
  }
  void add_u32(const std::string& k, uint32_t v) { add_raw(k, 4, pod(v)); }
  void add_i32(const std::string& k, int32_t v) { add_raw(k, 5, pod(v)); }
  void add_f32(const std::string& k, float v) { add_raw(k, 6, pod(v)); }
  void add_bool(const std::string& k, bool v) { add_raw(k, 7, pod(static_cast<uint8_t>(v))); }
  void add_string(const std::string& k, const std::string& v) { add_raw(k, 8, str(v)); }
  void add_u64(const std::string& k, uint64_t v) { add_raw(k, 10, pod(v)); }
  void add_f64(const std::string& k, double v) { add_raw(k, 12, pod(v)); }
  void add_string_array(const std::string& k, const std::vector<std::string>& v) {
    std::string b = pod(uint32_t{8}) + pod(static_cast<uint64_t>(v.size()));
    for (const auto& s : v) b += str(s);
    add_raw(k, 9, b);
  }
  void add_bool_array(const std::string& k, const std::vector<bool>& v) {
    std::string b = pod(uint32_t{7}) + pod(static_cast<uint64_t>(v.size()));
    for (bool x : v) b += pod(static_cast<uint8_t>(x));
    add_raw(k, 9, b);
  }
  void add_i32_array(const std::string& k, const std::vector<int32_t>& v) {
    std::string b = pod(uint32_t{5}) + pod(static_cast<uint64_t>(v.size()));
    for (auto x : v) b += pod(x);
    add_raw(k, 9, b);
  }

  // ne in ggml order (ne[0] = row length); data already encoded in `type`.
  void add_tensor(const std::string& name, const std::vector<int64_t>& ne, uint32_t type, const std::string& data) {
    tensors_.push_back({name, ne, type, data});
  }
  // Overrides the offset written for tensor i (for broken-file tests).
  void set_offset_override(size_t i, uint64_t offset) { overrides_.emplace_back(i, offset); }

  void write(const std::string& path, uint32_t version = 3, uint64_t alignment = 32) const {
    std::string infos, data;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const auto& t = tensors_[i];
      data.resize((data.size() + alignment - 1) / alignment * alignment, '\0');
      uint64_t off = data.size();
      for (auto [j, o] : overrides_)
        if (j == i) off = o;
      infos += str(t.name) + pod(static_cast<uint32_t>(t.ne.size()));
      for (auto d : t.ne) infos += pod(static_cast<uint64_t>(d));
      infos += pod(t.type) + pod(off);
      data += t.data;
    }
    std::string out = "GGUF" + pod(version) + pod(static_cast<uint64_t>(tensors_.size())) +
                      pod(static_cast<uint64_t>(num_kv_)) + kv_ + infos;
    out.resize((out.size() + alignment - 1) / alignment * alignment, '\0');
    out += data;
    std::ofstream(path, std::ios::binary).write(out.data(), static_cast<std::streamsize>(out.size()));
  }

  template <typename T>
  static std::string pod(T v) {
    return std::string(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  static std::string str(const std::string& s) { return pod(static_cast<uint64_t>(s.size())) + s; }

 private:
  struct T {
    std::string name;
    std::vector<int64_t> ne;
    uint32_t type;
    std::string data;
  };
  std::string kv_;
  size_t num_kv_ = 0;
  std::vector<T> tensors_;
  std::vector<std::pair<size_t, uint64_t>> overrides_;
};

// ggml type ids used by the tests.
constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ8_0 = 8, kGgmlQ4_K = 12, kGgmlQ5_K = 13,
                   kGgmlQ6_K = 14, kGgmlIQ4_NL = 20, kGgmlBF16 = 30, kGgmlMXFP4 = 39;

// Encodes n floats as F32, F16, BF16, Q8_0 (ggml's reference quantizer: d = amax / 127,
// q = round(x / d)), Q4_0 (ggml's reference quantizer) or MXFP4 (the nearest value at the smallest scale that holds the block's amax).
inline std::string encode_values(const float* x, int64_t n, uint32_t type) {
  std::string out;
  if (type == kGgmlF32) return std::string(reinterpret_cast<const char*>(x), n * 4);
  if (type == kGgmlF16 || type == kGgmlBF16) {
    for (int64_t i = 0; i < n; ++i) out += GgufWriter::pod(type == kGgmlF16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]));
    return out;
  }
  if (type == kGgmlMXFP4) {  // {u8 e; u8 qs[16]}: nearest of the doubled E2M1 values at scale 2^(e - 128)
    static constexpr float kv[8] = {0, 1, 2, 3, 4, 6, 8, 12};
    for (int64_t b = 0; b < n; b += 32) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[b + j]));
      const int e = amax > 0 ? static_cast<int>(std::ceil(std::log2(amax / 12.0f))) + 128 : 0;
      const float d = std::ldexp(1.0f, e - 128);
      uint8_t q[32];
      for (int j = 0; j < 32; ++j) {
        const float v = std::abs(x[b + j]) / d;
        int best = 0;
        for (int k = 1; k < 8; ++k)
          if (std::abs(v - kv[k]) < std::abs(v - kv[best])) best = k;
        q[j] = static_cast<uint8_t>(best | (x[b + j] < 0 && best ? 8 : 0));
      }
      out += static_cast<char>(std::clamp(e, 0, 255));
      for (int j = 0; j < 16; ++j) out += static_cast<char>(q[j] | (q[j + 16] << 4));
    }
    return out;
  }
  if (type == kGgmlIQ4_NL) {  // {half d; u8 qs[16]}: d = (the value of largest magnitude) / -127 (ggml's first
                              // guess, unrefined), each value the nearest codebook entry
    static constexpr int kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    for (int64_t b = 0; b < n; b += 32) {
      float amax = 0, max = 0;
      for (int j = 0; j < 32; ++j)
        if (std::abs(x[b + j]) > amax) amax = std::abs(x[b + j]), max = x[b + j];
      const float d = f16_to_f32(f32_to_f16(max / -127.0f));
      uint8_t q[32];
      for (int j = 0; j < 32; ++j) {
        int best = 0;
        for (int k = 1; k < 16; ++k)
          if (std::abs(x[b + j] - d * kv[k]) < std::abs(x[b + j] - d * kv[best])) best = k;
        q[j] = static_cast<uint8_t>(best);
      }
      out += GgufWriter::pod(f32_to_f16(d));
      for (int j = 0; j < 16; ++j) out += static_cast<char>(q[j] | (q[j + 16] << 4));
    }
    return out;
  }
  if (type == kGgmlQ4_0) {  // ggml's reference: d = (the value of largest magnitude) / -8, q = x / d + 8.5
    for (int64_t b = 0; b < n; b += 32) {
      float amax = 0, max = 0;
      for (int j = 0; j < 32; ++j)
        if (std::abs(x[b + j]) > amax) amax = std::abs(x[b + j]), max = x[b + j];
      const float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
      out += GgufWriter::pod(f32_to_f16(d));
      for (int j = 0; j < 16; ++j) {
        const int lo = std::min(15, static_cast<int>(x[b + j] * id + 8.5f));
        const int hi = std::min(15, static_cast<int>(x[b + 16 + j] * id + 8.5f));
        out += static_cast<char>(lo | (hi << 4));
      }
    }
    return out;
  }
  for (int64_t b = 0; b < n; b += 32) {  // Q8_0
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[b + j]));
    const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    out += GgufWriter::pod(f32_to_f16(d));
    for (int j = 0; j < 32; ++j) out += static_cast<char>(static_cast<int8_t>(std::lround(x[b + j] * id)));
  }
  return out;
}

}  // namespace vireo::testing
