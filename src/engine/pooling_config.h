// --runner pooling: which pooler a model gets (vLLM's PoolerConfig resolution, for embedding models).
#pragma once
#include <string>

#include "engine/engine_config.h"

namespace vireo {

// The pooler for `model_dir` (may be "" or a built-in name); disabled unless runner is pooling, or auto with
// --pooler-config or a base model's architecture ("Qwen2Model"). Then: --pooler-config JSON when given
// ({"pooling_type": "LAST" | "MEAN" | "CLS", "normalize": bool}), else the folder's sentence-transformers
// modules (modules.json: a Pooling module's config pooling_mode_lasttoken / mean_tokens / cls_token, a
// Normalize module), else LAST and normalised (vLLM's default for decoder models). Throws vireo::Error
// naming the flag or file on a bad value.
PoolingSpec resolve_pooling(const std::string& runner, const std::string& pooler_config, const std::string& model_dir);

}  // namespace vireo
