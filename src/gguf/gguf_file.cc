#include "gguf/gguf_file.h"


#include <cstring>
#include <fstream>
#include <limits>

#include "core/error.h"

namespace vireo {
namespace {

using nlohmann::json;

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int kMaxDims = 4;              // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;        // arrays of arrays: deeper is surely corrupt

// Bounds-checked little-endian cursor over the mapping; `what` names the field being read.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* p, size_t size) : path_(path), p_(p), size_(size) {}

  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const std::string& what) {
    const uint64_t n = read<uint64_t>(what + " (string length)");
    need(n, what);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), n);
    pos_ += n;
    return s;
  }
  // Throws unless n more bytes exist.
  void need(uint64_t n, const std::string& what) const {
    if (n > size_ - pos_)
      throw Error(path_ + ": truncated GGUF file: " + what + " needs " + std::to_string(n) + " bytes at offset " +
                  std::to_string(pos_) + ", the file has " + std::to_string(size_) + " bytes");
  }
  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

 private:
  const std::string& path_;
  const uint8_t* p_;
  size_t size_, pos_ = 0;
};

size_t min_value_bytes(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kBool: return 1;
    case GgufType::kU16: case GgufType::kI16: return 2;
    case GgufType::kU32: case GgufType::kI32: case GgufType::kF32: return 4;
    default: return 8;  // u64, i64, f64, and the u64 length of a string or array
  }
}

json read_value(Cursor& c, GgufType t, const std::string& what, const std::string& path, int depth,
                GgufType* array_type) {
  switch (t) {
    case GgufType::kU8: return c.read<uint8_t>(what);
    case GgufType::kI8: return c.read<int8_t>(what);
    case GgufType::kU16: return c.read<uint16_t>(what);
    case GgufType::kI16: return c.read<int16_t>(what);
    case GgufType::kU32: return c.read<uint32_t>(what);
    case GgufType::kI32: return c.read<int32_t>(what);
    case GgufType::kF32: return c.read<float>(what);
    case GgufType::kU64: return c.read<uint64_t>(what);
    case GgufType::kI64: return c.read<int64_t>(what);
    case GgufType::kF64: return c.read<double>(what);
    case GgufType::kBool: {
      const uint8_t b = c.read<uint8_t>(what);
      if (b > 1) throw Error(path + ": " + what + ": bool value " + std::to_string(b) + " is not 0 or 1");
      return b == 1;
    }
    case GgufType::kString: return c.read_string(what);
    case GgufType::kArray: {
      if (depth >= kMaxArrayDepth) throw Error(path + ": " + what + ": arrays nested too deeply");
      const uint32_t et = c.read<uint32_t>(what + " (array element type)");
      if (et > static_cast<uint32_t>(GgufType::kF64))
        throw Error(path + ": " + what + ": unknown array element type " + std::to_string(et));
      const uint64_t n = c.read<uint64_t>(what + " (array length)");
      // Each element takes at least min_value_bytes: a huge count in a short file is corrupt.
      if (n > c.remaining() / min_value_bytes(static_cast<GgufType>(et)))
        throw Error(path + ": truncated GGUF file: " + what + " claims " + std::to_string(n) + " elements, only " +
                    std::to_string(c.remaining()) + " bytes remain");
      if (array_type) *array_type = static_cast<GgufType>(et);
      json arr = json::array();
      arr.get_ref<json::array_t&>().reserve(n);
      for (uint64_t i = 0; i < n; ++i)
        arr.push_back(read_value(c, static_cast<GgufType>(et), what, path, depth + 1, nullptr));
      return arr;
    }
  }
  throw Error(path + ": " + what + ": unknown value type " + std::to_string(static_cast<uint32_t>(t)));
}

}  // namespace

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (auto d : ne) n *= d;
  return n;
}

std::vector<int64_t> GgufTensorInfo::shape() const { return {ne.rbegin(), ne.rend()}; }

bool GgufFile::is_gguf(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[4] = {};
  return f && f.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

GgufFile::GgufFile(const std::string& path) : path_(path), file_(path, 8, "GGUF") {
  map_ = file_.data();
  size_ = file_.size();
  parse();
}

GgufFile::~GgufFile() = default;

void GgufFile::parse() {
  const auto* base = static_cast<const uint8_t*>(map_);
  Cursor c(path_, base, size_);
  if (c.read<uint32_t>("magic") != kMagic) throw Error(path_ + ": not a GGUF file (bad magic)");
  version_ = c.read<uint32_t>("version");
  if (version_ == 0x02000000 || version_ == 0x03000000)
    throw Error(path_ + ": big-endian GGUF files (convert_hf_to_gguf.py --bigendian) are not supported");
  if (version_ != 2 && version_ != 3)
    throw Error(path_ + ": GGUF version " + std::to_string(version_) + " is not supported (2, 3)");
  const uint64_t num_tensors = c.read<uint64_t>("tensor count");
  const uint64_t num_kv = c.read<uint64_t>("metadata count");
  // A key/value takes >= 8 + 4 + 1 bytes and a tensor info >= 8 + 4 + 8 + 4 + 8.
  if (num_kv > c.remaining() / 13 || num_tensors > c.remaining() / 32)
    throw Error(path_ + ": truncated GGUF file: header claims " + std::to_string(num_kv) + " metadata entries and " +
                std::to_string(num_tensors) + " tensors in " + std::to_string(size_) + " bytes");
  for (uint64_t i = 0; i < num_kv; ++i) {
    const std::string key = c.read_string("metadata key #" + std::to_string(i));
    const uint32_t t = c.read<uint32_t>("type of metadata '" + key + "'");
    if (t > static_cast<uint32_t>(GgufType::kF64))
      throw Error(path_ + ": metadata '" + key + "' has unknown value type " + std::to_string(t));
    GgufValue v;
    v.type = static_cast<GgufType>(t);
    v.value = read_value(c, v.type, "metadata '" + key + "'", path_, 0, &v.array_type);
    if (!metadata_.emplace(key, std::move(v)).second) throw Error(path_ + ": duplicate metadata key '" + key + "'");
  }
  if (auto a = find("general.alignment")) {
    if (a->type != GgufType::kU32 || a->value.get<uint64_t>() == 0 ||
        (a->value.get<uint64_t>() & (a->value.get<uint64_t>() - 1)) != 0)
      throw Error(path_ + ": metadata 'general.alignment' must be a u32 power of two, got " + a->value.dump());
    alignment_ = a->value.get<uint64_t>();
  }
  tensors_.reserve(num_tensors);
  for (uint64_t i = 0; i < num_tensors; ++i) {
    GgufTensorInfo t;
    t.name = c.read_string("tensor info #" + std::to_string(i) + " name");
    const std::string what = "tensor '" + t.name + "'";
    const uint32_t nd = c.read<uint32_t>(what + " dimension count");
    if (nd == 0 || nd > kMaxDims)
      throw Error(path_ + ": " + what + " has " + std::to_string(nd) + " dimensions (1 to 4 allowed)");
    int64_t numel = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      const uint64_t n = c.read<uint64_t>(what + " dimensions");
      if (n == 0 || n > (1ull << 40) || static_cast<uint64_t>(numel) > (1ull << 50) / n)
        throw Error(path_ + ": " + what + " has a bad dimension " + std::to_string(n));
      t.ne.push_back(static_cast<int64_t>(n));
      numel *= static_cast<int64_t>(n);
    }
    t.type = c.read<uint32_t>(what + " type");
    t.offset = c.read<uint64_t>(what + " offset");
    const GgmlTypeTraits tr = ggml_type_traits(t.type);
    if (!tr.name) throw Error(path_ + ": " + what + " has unknown ggml type id " + std::to_string(t.type));
    if (t.ne[0] % tr.block_size != 0)
      throw Error(path_ + ": " + what + " row length " + std::to_string(t.ne[0]) + " is not a multiple of the " +
                  tr.name + " block size " + std::to_string(tr.block_size));
    t.nbytes = static_cast<uint64_t>(numel / tr.block_size * tr.type_size);
    if (t.offset % alignment_ != 0)
      throw Error(path_ + ": " + what + " offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                  std::to_string(alignment_));
    if (!tensor_index_.emplace(t.name, tensors_.size()).second)
      throw Error(path_ + ": duplicate tensor '" + t.name + "'");
    tensors_.push_back(std::move(t));
  }
  // The data section starts at the next multiple of the alignment after the tensor infos.
  const uint64_t data_start = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t data_size = data_start <= size_ ? size_ - data_start : 0;
  if (!tensors_.empty() && data_start > size_)
    throw Error(path_ + ": truncated GGUF file: no data section after the tensor infos");
  data_ = base + std::min<uint64_t>(data_start, size_);
  for (const auto& t : tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      throw Error(path_ + ": tensor '" + t.name + "' data [" + std::to_string(t.offset) + ", " +
                  std::to_string(t.offset + t.nbytes) + ") lies outside the data section of " +
                  std::to_string(data_size) + " bytes (truncated file?)");
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::optional<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->value.is_number_integer() || v->type == GgufType::kBool)
    throw Error(path_ + ": metadata '" + key + "' must be an integer, got " + gguf_type_name(v->type));
  if (v->value.is_number_unsigned() && v->value.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    throw Error(path_ + ": metadata '" + key + "' value " + v->value.dump() + " is out of range");
  return v->value.get<int64_t>();
}

std::optional<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->value.is_number() || v->type == GgufType::kBool)
    throw Error(path_ + ": metadata '" + key + "' must be a number, got " + gguf_type_name(v->type));
  return v->value.get<double>();
}

std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::kBool)
    throw Error(path_ + ": metadata '" + key + "' must be a bool, got " + gguf_type_name(v->type));
  return v->value.get<bool>();
}

std::optional<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::kString)
    throw Error(path_ + ": metadata '" + key + "' must be a string, got " + gguf_type_name(v->type));
  return v->value.get<std::string>();
}

const nlohmann::json* GgufFile::get_array(const std::string& key, GgufType elem) const {
  const GgufValue* v = find(key);
  if (!v) return nullptr;
  if (v->type != GgufType::kArray || v->array_type != elem)
    throw Error(path_ + ": metadata '" + key + "' must be an array of " + gguf_type_name(elem) + ", got " +
                gguf_type_name(v->type) + (v->type == GgufType::kArray ? " of " + gguf_type_name(v->array_type) : ""));
  return &v->value;
}

}  // namespace vireo
