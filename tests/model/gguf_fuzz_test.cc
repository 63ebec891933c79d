// Corrupt GGUF files never crash: random bytes of a converted fixture's header (metadata and
// tensor infos) are overwritten, and loading the model and its tokenizer must either work or
// throw vireo::Error, never another exception.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "../gguf_util/hf_to_gguf.h"
#include "backend/backend.h"
#include "core/error.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

TEST(GgufFuzz, CorruptHeadersFailWithVireoErrors) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("vireo_gguf_fuzz_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string src = (dir / "ok.gguf").string(), bad = (dir / "bad.gguf").string();
  testing::ConvertOptions o;
  o.extra_metadata = [](testing::GgufWriter& w) {  // enough for a tokenizer to load too
    w.add_string("tokenizer.ggml.pre", "qwen2");
    w.add_string_array("tokenizer.ggml.merges", {});
    w.add_string("tokenizer.chat_template", "{{ messages }}");
  };
  testing::convert_model_fixture(std::string(VIREO_SOURCE_DIR) + "/tests/fixtures/model/qwen3", src, o);
  std::string bytes;
  {
    std::ifstream in(src, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // The writer ends the file with the last tensor, so the data section is the last max(offset + nbytes) bytes.
  size_t header_end = 0;
  {
    GgufFile f(src);
    uint64_t data_size = 0;
    for (const auto& t : f.tensors()) data_size = std::max<uint64_t>(data_size, t.offset + t.nbytes);
    header_end = bytes.size() - data_size;
    ASSERT_NO_THROW(Tokenizer::from_dir(src));
  }
  std::mt19937 rng(1234);
  int loaded = 0, errors = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string b = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t at = rng() % header_end;
      // Bytes that make lengths and counts huge, tiny or odd are the interesting ones.
      const uint8_t values[] = {0x00, 0xff, 0x7f, 0x80, 0x01, static_cast<uint8_t>(rng())};
      b[at] = static_cast<char>(values[rng() % 6]);
    }
    std::ofstream(bad, std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size()));
    try {
      load_model(bad, create_backend("cpu"), LoadOptions{});
      ++loaded;
    } catch (const Error&) {
      ++errors;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "trial " << trial << ": not a vireo::Error: " << e.what();
    }
    try {
      Tokenizer::from_dir(bad);
    } catch (const Error&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "trial " << trial << " (tokenizer): not a vireo::Error: " << e.what();
    }
  }
  EXPECT_GT(errors, 0);
  std::printf("corrupt headers: %d loaded, %d vireo::Error\n", loaded, errors);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vireo
