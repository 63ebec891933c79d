// --reasoning-parser (vLLM's names): splits a chat completion's text into the model's reasoning
// (inside <think>...</think>) and the answer. One parser per choice; it is fed the generated text
// piece by piece as it streams and says what can be released now; text that might still turn
// out to be a tag is held back until the next piece or finish(). Feeding the whole text at once
// gives the same result as any split of it (parse_all is feed + finish).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace vireo::server {

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
  void append(const ReasoningDelta& d) {
    reasoning += d.reasoning;
    content += d.content;
  }
};

class ReasoningParser {
 public:
  virtual ~ReasoningParser() = default;
  virtual ReasoningDelta feed(std::string_view text) = 0;
  virtual ReasoningDelta finish() = 0;  // end of output: releases what was held back
  ReasoningDelta parse_all(std::string_view text);
};

// By --reasoning-parser name; throws vireo::Error for an unknown name. tool_parser: the request's
// --tool-call-parser ("" none); openai_gptoss hands tool-call messages on to "openai" (else drops them).
std::unique_ptr<ReasoningParser> make_reasoning_parser(const std::string& name, const std::string& tool_parser = "");
std::vector<std::string> reasoning_parser_names();

}  // namespace vireo::server
