#include "engine/stop_strings.h"

#include <gtest/gtest.h>

namespace vireo {
namespace {

TEST(StopStrings, FindsEarliestMatchInNewText) {
  std::vector<std::string> stops{"END", "ab"};
  auto m = find_stop_string("xxabyyEND", 0, stops);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->pos, 2u);
  EXPECT_EQ(m->stop, 1u);
  // A match straddling the already-checked boundary is found.
  m = find_stop_string("hello EN" "D", 7, stops);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->pos, 6u);
  EXPECT_FALSE(find_stop_string("no match here", 0, stops));
}

TEST(StopStrings, HoldbackIsLongestSuffixThatStartsAStop) {
  std::vector<std::string> stops{"###", "STOP"};
  EXPECT_EQ(stop_holdback("hello", stops), 0u);
  EXPECT_EQ(stop_holdback("hello #", stops), 1u);
  EXPECT_EQ(stop_holdback("hello ##", stops), 2u);
  EXPECT_EQ(stop_holdback("hello ST", stops), 2u);
  EXPECT_EQ(stop_holdback("hello STO", stops), 3u);
  EXPECT_EQ(stop_holdback("hello SO", stops), 0u);
  EXPECT_EQ(stop_holdback("S", stops), 1u);
}

}  // namespace
}  // namespace vireo
