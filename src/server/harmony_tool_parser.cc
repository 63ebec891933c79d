// --tool-call-parser openai (GPT-OSS, with --reasoning-parser openai_gptoss): the harmony reasoning
// parser hands each message addressed to a tool on in the content as
//   <|call_to|>functions.get_weather<|args|>{"city": "Paris"}<|call|>
// (harmony_reasoning_parser.cc); each such block becomes a call named after the recipient without its
// "functions." namespace, its arguments the message as written (JSON text, as OpenAI's
// function.arguments). Text outside the blocks is content. A block still open at the end (max_tokens)
// is a call with what was written; arguments that are not JSON are kept as they are, as vLLM does.
#include <memory>
#include <string>

#include "server/tagged_block_tool_parser.h"

namespace vireo::server {
namespace {

constexpr std::string_view kOpen = "<|call_to|>";
constexpr std::string_view kArgs = "<|args|>";
constexpr std::string_view kClose = "<|call|>";

class HarmonyToolParser : public TaggedBlockToolParser {
 public:
  HarmonyToolParser() : TaggedBlockToolParser(kOpen, kClose) {}

 private:
  void close_block(const std::string& body, bool /*closed*/, ToolDelta& out) const override {
    const size_t a = body.find(kArgs);
    std::string name = body.substr(0, a);
    if (name.rfind("functions.", 0) == 0) name.erase(0, 10);
    std::string args = a == std::string::npos ? "" : body.substr(a + kArgs.size());
    const size_t first = args.find_first_not_of(" \n\t"), last = args.find_last_not_of(" \n\t");
    args = first == std::string::npos ? "{}" : args.substr(first, last - first + 1);
    out.calls.push_back({std::move(name), std::move(args)});
  }
};

}  // namespace

std::unique_ptr<ToolParser> make_harmony_tool_parser() { return std::make_unique<HarmonyToolParser>(); }

}  // namespace vireo::server
