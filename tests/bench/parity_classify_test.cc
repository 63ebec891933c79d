// Runs the parity tool's plain-python unit tests (tools/parity/test_classify.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

TEST(ParityTool, ClassificationUnitTests) {
  if (std::system("python3 --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not found";
  std::string cmd = "python3 " VIREO_SOURCE_DIR "/tools/parity/test_classify.py";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(ParityTool, HfBaselineSummaryUnitTests) {
  if (std::system("python3 --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not found";
  std::string cmd = "python3 " VIREO_SOURCE_DIR "/tools/bench/test_hf_generate.py";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}
