// Prompt-lookup drafts (ngram_proposer.h) and --speculative-config parsing.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/ngram_proposer.h"
#include "engine/speculative_config.h"

namespace vireo {
namespace {

using V = std::vector<int32_t>;

TEST(NgramProposer, ContinuesTheLatestLongestMatch) {
  // Suffix [7 8 9] occurs at 1 (followed by 1 2 3) and at 8 (followed by 4 5): the latest one wins.
  const V t = {0, 7, 8, 9, 1, 2, 3, 0, 7, 8, 9, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(propose_ngram(t, 1, 3, 2), (V{4, 5}));
  // k = 8: the latest has 6 tokens after it, the earlier one 8: the earlier one.
  EXPECT_EQ(propose_ngram(t, 1, 3, 8), (V{1, 2, 3, 0, 7, 8, 9, 4}));
  // A longer match beats a more recent shorter one: [5 9] at the end matches only as [9] recently.
  const V u = {1, 5, 9, 2, 3, 9, 4, 5, 9};
  EXPECT_EQ(propose_ngram(u, 1, 2, 2), (V{2, 3}));
  EXPECT_EQ(propose_ngram(u, 1, 1, 2), (V{4, 5}));  // max_n 1: the latest [9]
}

TEST(NgramProposer, NothingBelowMinN) {
  const V t = {1, 2, 3, 4, 9, 3, 4};
  EXPECT_EQ(propose_ngram(t, 2, 4, 3), (V{9, 3, 4}));
  EXPECT_TRUE(propose_ngram(t, 3, 4, 3).empty());  // only [3 4] recurs
  EXPECT_TRUE(propose_ngram(V{5}, 1, 3, 3).empty());
  EXPECT_TRUE(propose_ngram(V{}, 1, 3, 3).empty());
  EXPECT_TRUE(propose_ngram(t, 2, 4, 0).empty());
}

TEST(NgramProposer, LoopsDraftFromAnOccurrenceWithKTokensAfterIt) {
  // [3 3] ends at 2 (one token after it), at 1 (two): the one followed by most, up to k.
  EXPECT_EQ(propose_ngram(V{3, 3, 3, 3}, 2, 2, 4), (V{3, 3}));
  EXPECT_EQ(propose_ngram(V{3, 3, 3, 3, 3, 3, 3}, 2, 2, 3), (V{3, 3, 3}));  // the latest with 3 after it
  EXPECT_EQ(propose_ngram(V{1, 2, 1, 2, 1, 2}, 2, 4, 3), (V{1, 2}));  // the longest, [1 2 1 2], ends at 3
  EXPECT_EQ(propose_ngram(V{1, 2, 1, 2, 1, 2}, 2, 2, 3), (V{1, 2, 1}));  // [1 2]: at 0..1 three follow
}

TEST(SpeculativeConfig, ParsesVllmsNgramConfig) {
  EXPECT_FALSE(SpeculativeConfig::parse("").enabled());
  auto c = SpeculativeConfig::parse(R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3})");
  EXPECT_TRUE(c.enabled());
  EXPECT_EQ(c.num_speculative_tokens, 4);
  EXPECT_EQ(c.prompt_lookup_max, 3);
  EXPECT_EQ(c.prompt_lookup_min, 3);  // defaults to the other bound
  c = SpeculativeConfig::parse(
      R"({"method": "[ngram]", "num_speculative_tokens": 2, "prompt_lookup_min": 1, "prompt_lookup_max": 5,
          "disable_by_batch_size": 8})");
  EXPECT_EQ(c.prompt_lookup_min, 1);
  EXPECT_EQ(c.disable_by_batch_size, 8);
  EXPECT_TRUE(SpeculativeConfig::parse(R"({"model": "[ngram]", "num_speculative_tokens": 3})").enabled());
  c = SpeculativeConfig::parse(R"({"method": "ngram", "num_speculative_tokens": 3})");
  EXPECT_EQ(c.prompt_lookup_min, 5);
  EXPECT_EQ(c.prompt_lookup_max, 5);
  for (const char* bad : {"[1]", "{\"method\": \"eagle\", \"num_speculative_tokens\": 3}",
                          "{\"model\": \"some/draft\", \"num_speculative_tokens\": 3}",
                          "{\"method\": \"ngram\"}", "{\"method\": \"ngram\", \"num_speculative_tokens\": 0}",
                          "{\"method\": \"ngram\", \"num_speculative_tokens\": \"4\"}",
                          "{\"method\": \"ngram\", \"num_speculative_tokens\": 4, \"prompt_lookup_min\": 4, "
                          "\"prompt_lookup_max\": 2}",
                          "not json"})
    EXPECT_THROW(SpeculativeConfig::parse(bad), Error) << bad;
}

}  // namespace
}  // namespace vireo
