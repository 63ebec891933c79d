#include "server/reasoning_parser.h"

#include <utility>

#include "core/error.h"

namespace vireo::server {

// Defined in think_reasoning_parser.cc. The table is explicit, not self-registration: an object
// file of a static library that nothing references is dropped by the linker. Adding a parser is
// its file plus one line here.
std::unique_ptr<ReasoningParser> make_qwen3_reasoning_parser();
std::unique_ptr<ReasoningParser> make_deepseek_r1_reasoning_parser();
std::unique_ptr<ReasoningParser> make_seed_oss_reasoning_parser();
std::unique_ptr<ReasoningParser> make_openai_gptoss_reasoning_parser(bool keep_calls);  // harmony_reasoning_parser.cc

namespace {

using Factory = std::unique_ptr<ReasoningParser> (*)();
const std::pair<const char*, Factory> kParsers[] = {
    {"deepseek_r1", make_deepseek_r1_reasoning_parser},
    // DeepSeek-V3.1+: R1's parser when the request turns thinking on (chat_template_kwargs thinking /
    // enable_thinking), else none; chat_parsing_for decides per request (vLLM's DeepSeekV3ReasoningParser).
    {"deepseek_v3", make_deepseek_r1_reasoning_parser},
    // GLM-4.5 / 4.6 / 4.7: <think>...</think> written by the model, as Qwen3 (vLLM's Glm4MoeModelReasoningParser).
    {"glm45", make_qwen3_reasoning_parser},
    {"openai_gptoss", [] { return make_openai_gptoss_reasoning_parser(false); }},
    {"qwen3", make_qwen3_reasoning_parser},
    {"seed_oss", make_seed_oss_reasoning_parser},
};

}  // namespace

ReasoningDelta ReasoningParser::parse_all(std::string_view text) {
  ReasoningDelta out = feed(text);
  out.append(finish());
  return out;
}

std::unique_ptr<ReasoningParser> make_reasoning_parser(const std::string& name, const std::string& tool_parser) {
  if (name == "openai_gptoss" && tool_parser == "openai") return make_openai_gptoss_reasoning_parser(true);
  for (const auto& [n, make] : kParsers)
    if (name == n) return make();
  throw Error("unknown reasoning parser '" + name + "'");
}

std::vector<std::string> reasoning_parser_names() {
  std::vector<std::string> out;
  for (const auto& p : kParsers) out.push_back(p.first);
  return out;
}

}  // namespace vireo::server
