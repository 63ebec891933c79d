// The enums of the GGUF container (llama.cpp's format): metadata value types and ggml tensor
// types, with the block geometry every ggml type stores its values in.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"

namespace vireo {

// Metadata value types (gguf.h: enum gguf_type).
enum class GgufType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// Tensor element types (ggml.h: enum ggml_type); the ids are the on-disk values.
enum class GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ8_1 = 9,
  kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15, kIQ4_NL = 20, kIQ4_XS = 23, kBF16 = 30,
  kMXFP4 = 39,
};

// Values per block and bytes per block of a ggml type id (F32: 1 and 4; Q4_K: 256 and 144).
struct GgmlTypeTraits {
  const char* name = nullptr;  // nullptr: an id this reader does not know
  int64_t block_size = 0;
  int64_t type_size = 0;
};
GgmlTypeTraits ggml_type_traits(uint32_t type_id);
std::string ggml_type_name(uint32_t type_id);  // "Q4_K", or "type 99" for unknown ids
std::string gguf_type_name(GgufType t);        // "u32", "string", "array", ...
// The DType of a ggml block type a backend may keep packed (Q4_0 ... Q6_K); nullopt for the others.
std::optional<DType> ggml_block_dtype(uint32_t type_id);

}  // namespace vireo
