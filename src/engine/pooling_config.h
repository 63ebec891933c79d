// --runner pooling: which pooler a model gets (vLLM's PoolerConfig resolution, for embedding models).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "engine/engine_config.h"

namespace vireo {

// The pooler for `model_dir` (may be "" or a built-in name); disabled unless runner is pooling, or auto with
// --pooler-config or a base model's architecture ("Qwen2Model"). Then: --pooler-config JSON when given
// ({"pooling_type": "LAST" | "MEAN" | "CLS", "normalize": bool}), else the folder's sentence-transformers
// modules (modules.json: a Pooling module's config pooling_mode_lasttoken / mean_tokens / cls_token, a
// Normalize module), else LAST and normalised (vLLM's default for decoder models). Throws vireo::Error
// naming the flag or file on a bad value.
//
// A *ForSequenceClassification architecture (after --hf-overrides) classifies with the checkpoint's
// score.weight, or, with vLLM's "classifier_from_token" (the original Qwen3-Reranker recipe: ["no", "yes"]),
// with the lm_head rows of those tokens: one label scored by row(yes) - row(no) (the two-way softmax as a
// sigmoid), or by the row of a single token. token_id looks tokens up in the tokenizer.
PoolingSpec resolve_pooling(const std::string& runner, const std::string& pooler_config, const std::string& model_dir,
                            const std::string& hf_overrides = "",
                            const std::function<std::optional<int32_t>(const std::string&)>& token_id = {});

}  // namespace vireo
