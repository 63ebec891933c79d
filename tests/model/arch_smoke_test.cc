// Every family added without a transformers fixture in the tree yet runs on dummy weights, and its paged,
// chunked prefill gives the one-shot logits: sliding windows, NoPE layers, sparse layers and conv state
// survive block tables and chunk boundaries. (transformers' numbers: the model fixtures of
// tools/reference/make_model_fixtures.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model_test_util.h"
#include "tiny_family_configs.h"

namespace vireo {
namespace {

using nlohmann::json;

TEST(ArchSmoke, ChunkedPagedPrefillMatchesOneShot) {
  for (const json& j : testing::family_configs()) {
    SCOPED_TRACE(j["architectures"][0].get<std::string>());
    const ModelConfig cfg = ModelConfig::from_json(j, "smoke/config.json");
    LoadOptions opts;
    opts.load_format = "dummy";
    auto m = load_model(cfg, "", create_backend("cpu"), opts);
    const int64_t V = m->config().vocab_size;
    std::vector<int32_t> ids;
    for (int i = 0; i < 30; ++i) ids.push_back((i * 37 + 11) % static_cast<int32_t>(V));
    KvCache kv = m->allocate_kv_cache(16, 4);
    testing::SeqDriver one{*m, kv, testing::contiguous_table(8)};
    const std::vector<float> full = one.step(ids, true);
    ASSERT_EQ(full.size(), ids.size() * V);
    for (float x : full) ASSERT_TRUE(std::isfinite(x));
    testing::SeqDriver chunked{*m, kv, {15, 9, 8, 14, 10, 13, 11, 12}};
    for (size_t b = 0; b < ids.size(); b += 7) {
      std::vector<int32_t> chunk(ids.begin() + b, ids.begin() + std::min(ids.size(), b + 7));
      const auto lg = chunked.step(chunk, true);
      EXPECT_LT(testing::rel_max_err(lg.data(), full.data() + b * V, lg.size()), 1e-4) << "chunk at " << b;
    }
    m->free_kv_cache(kv);
  }
}

}  // namespace
}  // namespace vireo
