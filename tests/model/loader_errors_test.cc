// Bad checkpoints and configs fail with a vireo::Error that names the file (and field/tensor).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "core/error.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "safetensors_util.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kQwen3 = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/qwen3";

using testing::RawTensor;
using testing::write_safetensors;
std::map<std::string, RawTensor> read_all(const fs::path& path) { return testing::read_safetensors(path); }

class LoaderErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("vireo_loader_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy_file(kQwen3 / "config.json", dir_ / "config.json");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Loads dir_ and returns the error message (fails the test when loading succeeds).
  std::string load_error() {
    try {
      load_model(dir_.string(), create_backend("cpu"), LoadOptions{});
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "loading " << dir_ << " succeeded";
    return "";
  }
  void write_config(const json& j) { std::ofstream(dir_ / "config.json") << j.dump(); }
  json config() { return json::parse(std::ifstream(dir_ / "config.json")); }

  fs::path dir_;
};

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

TEST_F(LoaderErrors, ValidCopyLoads) {
  fs::copy_file(kQwen3 / "model.safetensors", dir_ / "model.safetensors");
  EXPECT_NO_THROW(load_model(dir_.string(), create_backend("cpu"), LoadOptions{}));
}

TEST_F(LoaderErrors, MissingConfig) {
  fs::remove(dir_ / "config.json");
  std::string m = load_error();
  EXPECT_HAS(m, "config.json");
}

TEST_F(LoaderErrors, MissingSafetensors) {
  std::string m = load_error();
  EXPECT_HAS(m, dir_.string());
  EXPECT_HAS(m, "safetensors");
}

TEST_F(LoaderErrors, MalformedConfigJson) {
  std::ofstream(dir_ / "config.json") << "{\"architectures\": [\"Qwen3ForCausalLM\"], \"hidden_size\": ";
  std::string m = load_error();
  EXPECT_HAS(m, "config.json");
  EXPECT_HAS(m, "malformed JSON");
}

TEST_F(LoaderErrors, MissingConfigFieldNamesIt) {
  json j = config();
  j.erase("hidden_size");
  write_config(j);
  std::string m = load_error();
  EXPECT_HAS(m, "config.json");
  EXPECT_HAS(m, "hidden_size");
}

TEST_F(LoaderErrors, UnknownArchitectureListsSupported) {
  json j = config();
  j["architectures"] = {"GPTNeoXForCausalLM"};
  write_config(j);
  fs::copy_file(kQwen3 / "model.safetensors", dir_ / "model.safetensors");
  std::string m = load_error();
  EXPECT_HAS(m, "GPTNeoXForCausalLM");
  EXPECT_HAS(m, "Qwen3ForCausalLM");
  EXPECT_HAS(m, "LlamaForCausalLM");
}

TEST_F(LoaderErrors, TruncatedFile) {
  std::ifstream in(kQwen3 / "model.safetensors", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(dir_ / "model.safetensors", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  std::string m = load_error();
  EXPECT_HAS(m, "model.safetensors");
  EXPECT_HAS(m, "truncated");
}

TEST_F(LoaderErrors, AbsurdHeaderLength) {
  std::ofstream f(dir_ / "model.safetensors", std::ios::binary);
  uint64_t n = uint64_t{1} << 40;
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << "{}";
  f.close();
  std::string m = load_error();
  EXPECT_HAS(m, "model.safetensors");
  EXPECT_HAS(m, "header length");
}

TEST_F(LoaderErrors, MalformedHeaderJson) {
  std::ofstream f(dir_ / "model.safetensors", std::ios::binary);
  std::string h = "{\"a\": [1, 2";
  uint64_t n = h.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << h;
  f.close();
  std::string m = load_error();
  EXPECT_HAS(m, "model.safetensors");
  EXPECT_HAS(m, "malformed");
}

TEST_F(LoaderErrors, WrongShapeNamesTensorAndShapes) {
  auto t = read_all(kQwen3 / "model.safetensors");
  auto& w = t.at("model.layers.1.mlp.down_proj.weight");  // [64, 128] -> [128, 64]
  std::swap(w.shape[0], w.shape[1]);
  write_safetensors(dir_ / "model.safetensors", t);
  std::string m = load_error();
  EXPECT_HAS(m, "model.safetensors");
  EXPECT_HAS(m, "model.layers.1.mlp.down_proj.weight");
  EXPECT_HAS(m, "[128, 64]");
  EXPECT_HAS(m, "[64, 128]");
}

TEST_F(LoaderErrors, WrongDtype) {
  auto t = read_all(kQwen3 / "model.safetensors");
  auto& w = t.at("model.layers.0.self_attn.q_norm.weight");  // F32 [32] -> I64 [32]
  w.dtype = "I64";
  w.bytes += w.bytes;
  write_safetensors(dir_ / "model.safetensors", t);
  std::string m = load_error();
  EXPECT_HAS(m, "model.safetensors");
  EXPECT_HAS(m, "model.layers.0.self_attn.q_norm.weight");
  EXPECT_HAS(m, "I64");
}

TEST_F(LoaderErrors, MissingTensor) {
  auto t = read_all(kQwen3 / "model.safetensors");
  t.erase("model.layers.1.self_attn.k_norm.weight");
  write_safetensors(dir_ / "model.safetensors", t);
  std::string m = load_error();
  EXPECT_HAS(m, "model.layers.1.self_attn.k_norm.weight");
  EXPECT_HAS(m, "model.safetensors");
}

TEST_F(LoaderErrors, UntiedModelNeedsLmHead) {
  json j = config();
  j["tie_word_embeddings"] = false;
  write_config(j);
  fs::copy_file(kQwen3 / "model.safetensors", dir_ / "model.safetensors");
  std::string m = load_error();
  EXPECT_HAS(m, "lm_head.weight");
}

TEST_F(LoaderErrors, ShardMissingFromIndex) {
  const fs::path src = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/qwen3_bf16_sharded";
  for (const auto& e : fs::directory_iterator(src))
    fs::copy_file(e.path(), dir_ / e.path().filename(), fs::copy_options::overwrite_existing);
  EXPECT_NO_THROW(load_model(dir_.string(), create_backend("cpu"), LoadOptions{}));
  fs::remove(dir_ / "model-00003-of-00005.safetensors");
  std::string m = load_error();
  EXPECT_HAS(m, "model-00003-of-00005.safetensors");
}

TEST_F(LoaderErrors, UnknownLoadFormat) {
  LoadOptions o;
  o.load_format = "pt";  // vLLM's, not ours
  try {
    load_model(dir_.string(), create_backend("cpu"), o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()), "load-format");
  }
}

}  // namespace
}  // namespace vireo
