// vLLM's --compilation-config / -O (engine/compilation_config.h): the CUDA-graph settings take effect,
// everything else is accepted without effect, malformed values are refused with the flag's name.
#include "engine/compilation_config.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace vireo {
namespace {

EngineConfig applied(const std::string& value, EngineConfig c = {}) {
  apply_compilation_config(value, c);
  return c;
}

TEST(CompilationConfig, OptimizationLevels) {
  EXPECT_TRUE(applied("0").enforce_eager);  // -O0: no cudagraphs
  for (const char* level : {"1", "2", "3"}) {
    const EngineConfig c = applied(level);
    EXPECT_FALSE(c.enforce_eager) << level;
    EXPECT_EQ(c.max_cuda_graph_size, 0) << level;
  }
  EXPECT_FALSE(applied("").enforce_eager);
}

TEST(CompilationConfig, CudagraphModes) {
  EXPECT_TRUE(applied(R"({"cudagraph_mode": "NONE"})").enforce_eager);
  EXPECT_TRUE(applied(R"({"cudagraph_mode": "none"})").enforce_eager);
  for (const char* m : {"FULL", "FULL_DECODE_ONLY", "PIECEWISE", "FULL_AND_PIECEWISE"})
    EXPECT_FALSE(applied(std::string(R"({"cudagraph_mode": ")") + m + "\"}").enforce_eager) << m;
  EXPECT_TRUE(applied(".cudagraph_mode=NONE").enforce_eager);
  EXPECT_THROW(applied(R"({"cudagraph_mode": "SOMETIMES"})"), Error);
  EXPECT_THROW(applied(R"({"cudagraph_mode": 0})"), Error);
}

TEST(CompilationConfig, CaptureSizesCapTheLargestGraph) {
  EXPECT_EQ(applied(R"({"cudagraph_capture_sizes": [1, 2, 4, 64, 32]})").max_cuda_graph_size, 64);
  EXPECT_EQ(applied(R"({"max_cudagraph_capture_size": 128})").max_cuda_graph_size, 128);
  EXPECT_EQ(applied(R"({"max_capture_size": 16})").max_cuda_graph_size, 16);
  EXPECT_EQ(applied(".max_cudagraph_capture_size=48").max_cuda_graph_size, 48);
  // Only ever restricts: the smaller of both caps; an empty list means no graphs.
  EngineConfig c;
  c.max_cuda_graph_size = 32;
  EXPECT_EQ(applied(R"({"max_cudagraph_capture_size": 128})", c).max_cuda_graph_size, 32);
  EXPECT_EQ(applied(R"({"cudagraph_capture_sizes": [8]})", c).max_cuda_graph_size, 8);
  EXPECT_TRUE(applied(R"({"cudagraph_capture_sizes": []})").enforce_eager);
  EXPECT_THROW(applied(R"({"cudagraph_capture_sizes": 8})"), Error);
  EXPECT_THROW(applied(R"({"max_cudagraph_capture_size": "big"})"), Error);
}

TEST(CompilationConfig, TorchCompileSettingsHaveNoEffect) {
  const EngineConfig c = applied(R"({"mode": 3, "level": 3, "custom_ops": ["none"], "pass_config": {"fuse_norm_quant": true}})");
  EXPECT_FALSE(c.enforce_eager);
  EXPECT_EQ(c.max_cuda_graph_size, 0);
}

TEST(CompilationConfig, MalformedValuesNameTheFlag) {
  for (const char* v : {"4", "fast", "[1, 2]", "{\"cudagraph_mode\": ", ".=x", ".cudagraph_mode"}) {
    try {
      applied(v);
      ADD_FAILURE() << v << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--compilation-config"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace vireo
