// vLLM's human-readable token counts (core/human_int.h), as `--max-model-len 32k` takes them.
#include "core/human_int.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace vireo {
namespace {

TEST(HumanInt, DecimalAndBinarySuffixesAsVllm) {
  EXPECT_EQ(parse_human_int("4096"), 4096);
  EXPECT_EQ(parse_human_int("32k"), 32000);
  EXPECT_EQ(parse_human_int("32K"), 32768);
  EXPECT_EQ(parse_human_int("25.6k"), 25600);
  EXPECT_EQ(parse_human_int("1m"), 1000000);
  EXPECT_EQ(parse_human_int("1M"), 1048576);
  EXPECT_EQ(parse_human_int(" 128k "), 128000);
  for (const char* bad : {"", "k", "1.5K", "1.5", "12q", "-5", "3g", "1T", "0x10", "auto"})
    EXPECT_THROW(parse_human_int(bad), Error) << bad;
}

}  // namespace
}  // namespace vireo
