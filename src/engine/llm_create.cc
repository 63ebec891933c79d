// Kept apart from llm.cc so code that only aggregates outputs does not pull in model loading.
#include "engine/llm.h"

namespace vireo {

LLM::LLM(const EngineConfig& config) : engine_(AsyncEngine::create(config)) {}

}  // namespace vireo
