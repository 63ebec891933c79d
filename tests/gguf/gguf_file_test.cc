// GgufFile: every metadata value type, v2 and v3, general.alignment, tensor infos; and broken
// files (bad magic, version, truncation at every byte, offsets, types) fail with a vireo::Error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../gguf_util/gguf_writer.h"
#include "core/error.h"
#include "gguf/gguf_file.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;
using testing::GgufWriter;

class GgufFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("vireo_gguf_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A small valid file: a few metadata types and two F32 tensors.
  GgufWriter small() const {
    GgufWriter w;
    w.add_string("general.architecture", "llama");
    w.add_u32("llama.block_count", 2);
    w.add_string_array("tokenizer.ggml.tokens", {"a", "b", "c"});
    std::vector<float> v(64, 1.5f);
    w.add_tensor("a.weight", {16, 2}, testing::kGgmlF32, testing::encode_values(v.data(), 32, testing::kGgmlF32));
    w.add_tensor("b.weight", {32}, testing::kGgmlF32, testing::encode_values(v.data(), 32, testing::kGgmlF32));
    return w;
  }

  // Expects GgufFile(path) to throw a vireo::Error whose message contains `what`.
  static void expect_error(const std::string& p, const std::string& what) {
    try {
      GgufFile f(p);
      ADD_FAILURE() << "no error for " << p;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "message does not name the file: " << e.what();
    }
  }

  fs::path dir_;
};

TEST_F(GgufFileTest, ReadsEveryValueTypeInBothVersions) {
  for (uint32_t version : {2u, 3u}) {
    GgufWriter w;
    w.add_raw("u8", 0, GgufWriter::pod(uint8_t{200}));
    w.add_raw("i8", 1, GgufWriter::pod(int8_t{-100}));
    w.add_raw("u16", 2, GgufWriter::pod(uint16_t{60000}));
    w.add_raw("i16", 3, GgufWriter::pod(int16_t{-30000}));
    w.add_u32("u32", 4000000000u);
    w.add_i32("i32", -2000000000);
    w.add_f32("f32", 0.25f);
    w.add_bool("bool", true);
    w.add_string("string", "h\xC3\xA9llo");
    w.add_u64("u64", 1ull << 40);
    w.add_raw("i64", 11, GgufWriter::pod(int64_t{-(1ll << 40)}));
    w.add_f64("f64", 1e-300);
    w.add_i32_array("arr", {1, -2, 3});
    // An array of two arrays of u8.
    std::string nested = GgufWriter::pod(uint32_t{9}) + GgufWriter::pod(uint64_t{2});
    for (int k = 0; k < 2; ++k) nested += GgufWriter::pod(uint32_t{0}) + GgufWriter::pod(uint64_t{2}) + std::string{char(k), char(k + 1)};
    w.add_raw("nested", 9, nested);
    w.write(path("all.gguf"), version);
    GgufFile f(path("all.gguf"));
    EXPECT_EQ(f.version(), version);
    EXPECT_EQ(*f.get_int("u8"), 200);
    EXPECT_EQ(*f.get_int("i8"), -100);
    EXPECT_EQ(*f.get_int("u16"), 60000);
    EXPECT_EQ(*f.get_int("i16"), -30000);
    EXPECT_EQ(*f.get_int("u32"), 4000000000ll);
    EXPECT_EQ(*f.get_int("i32"), -2000000000);
    EXPECT_EQ(*f.get_float("f32"), 0.25);
    EXPECT_EQ(*f.get_bool("bool"), true);
    EXPECT_EQ(*f.get_string("string"), "h\xC3\xA9llo");
    EXPECT_EQ(*f.get_int("u64"), 1ll << 40);
    EXPECT_EQ(*f.get_int("i64"), -(1ll << 40));
    EXPECT_EQ(*f.get_float("f64"), 1e-300);
    EXPECT_EQ(*f.get_array("arr", GgufType::kI32), nlohmann::json({1, -2, 3}));
    EXPECT_EQ(f.find("nested")->value, nlohmann::json({{0, 1}, {1, 2}}));
    EXPECT_EQ(f.find("nested")->array_type, GgufType::kArray);
    EXPECT_FALSE(f.get_int("absent").has_value());
    EXPECT_THROW(f.get_string("u32"), Error);  // wrong type: an error naming the key
    EXPECT_THROW(f.get_array("arr", GgufType::kString), Error);
  }
}

TEST_F(GgufFileTest, TensorInfosAndAlignment) {
  for (uint64_t align : {32u, 64u, 256u}) {
    GgufWriter w = small();
    if (align != 32) w.add_u32("general.alignment", static_cast<uint32_t>(align));
    w.write(path("t.gguf"), 3, align);
    GgufFile f(path("t.gguf"));
    EXPECT_EQ(f.alignment(), align);
    ASSERT_EQ(f.tensors().size(), 2u);
    const GgufTensorInfo* a = f.find_tensor("a.weight");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->shape(), (std::vector<int64_t>{2, 16}));
    EXPECT_EQ(a->nbytes, 128u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(f.tensor_data(*a)) % align, 0u);
    float x;
    std::memcpy(&x, f.tensor_data(*f.find_tensor("b.weight")), 4);
    EXPECT_EQ(x, 1.5f);
  }
}

TEST_F(GgufFileTest, BadMagicAndVersion) {
  std::ofstream(path("bad.gguf"), std::ios::binary) << "GGML" << std::string(60, '\0');
  expect_error(path("bad.gguf"), "not a GGUF file");
  EXPECT_FALSE(GgufFile::is_gguf(path("bad.gguf")));
  small().write(path("v1.gguf"), 1);
  expect_error(path("v1.gguf"), "GGUF version 1 is not supported");
  small().write(path("be.gguf"), 0x03000000);
  expect_error(path("be.gguf"), "big-endian GGUF files (convert_hf_to_gguf.py --bigendian) are not supported");
  small().write(path("v4.gguf"), 4);
  expect_error(path("v4.gguf"), "GGUF version 4");
  expect_error(path("absent.gguf"), "cannot open");
}

TEST_F(GgufFileTest, EveryTruncationFailsCleanly) {
  small().write(path("full.gguf"));
  std::ifstream in(path("full.gguf"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_NO_THROW(GgufFile f(path("full.gguf")));
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::ofstream(path("cut.gguf"), std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(n));
    try {
      GgufFile f(path("cut.gguf"));
      ADD_FAILURE() << "a file cut to " << n << " of " << bytes.size() << " bytes loaded";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_TRUE(m.find("truncated") != std::string::npos || m.find("outside the data section") != std::string::npos)
          << n << ": " << m;
    }
  }
}

TEST_F(GgufFileTest, TensorOffsetOutOfRange) {
  GgufWriter w = small();
  w.set_offset_override(1, 1 << 20);
  w.write(path("off.gguf"));
  expect_error(path("off.gguf"), "tensor 'b.weight' data [1048576, 1048704) lies outside the data section");
  GgufWriter m = small();
  m.set_offset_override(1, 8);  // not a multiple of the alignment
  m.write(path("misaligned.gguf"));
  expect_error(path("misaligned.gguf"), "tensor 'b.weight' offset 8 is not a multiple of the alignment 32");
}

TEST_F(GgufFileTest, UnknownTypesAndBadHeaders) {
  GgufWriter w;
  w.add_tensor("x.weight", {32}, 99, std::string(128, '\0'));
  w.write(path("type.gguf"));
  expect_error(path("type.gguf"), "tensor 'x.weight' has unknown ggml type id 99");

  GgufWriter v;
  v.add_raw("weird", 77, GgufWriter::pod(uint32_t{1}));
  v.write(path("vtype.gguf"));
  expect_error(path("vtype.gguf"), "metadata 'weird' has unknown value type 77");

  GgufWriter q;
  q.add_tensor("q.weight", {48}, testing::kGgmlQ8_0, std::string(51, '\0'));
  q.write(path("block.gguf"));
  expect_error(path("block.gguf"), "row length 48 is not a multiple of the Q8_0 block size 32");

  GgufWriter big;  // an array claiming 2^40 strings in a tiny file
  big.add_raw("huge", 9, GgufWriter::pod(uint32_t{8}) + GgufWriter::pod(uint64_t{1} << 40));
  big.write(path("huge.gguf"));
  expect_error(path("huge.gguf"), "claims 1099511627776 elements");

  GgufWriter al = small();
  al.add_u32("general.alignment", 24);
  al.write(path("align.gguf"));
  expect_error(path("align.gguf"), "'general.alignment' must be a u32 power of two");

  GgufWriter dup;
  dup.add_u32("k", 1);
  dup.add_u32("k", 2);
  dup.write(path("dup.gguf"));
  expect_error(path("dup.gguf"), "duplicate metadata key 'k'");
}

}  // namespace
}  // namespace vireo
