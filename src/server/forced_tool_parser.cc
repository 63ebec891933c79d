#include "server/forced_tool_parser.h"

namespace vireo::server {
namespace {

class NamedToolParser : public ToolParser {
 public:
  explicit NamedToolParser(std::string function) : function_(std::move(function)) {}
  ToolDelta feed(std::string_view text) override {
    text_ += text;
    return {};
  }
  ToolDelta finish() override {
    ToolDelta d;
    d.calls.push_back({function_, std::move(text_)});
    text_.clear();
    return d;
  }

 private:
  std::string function_;
  std::string text_;
};

class RequiredToolParser : public ToolParser {
 public:
  ToolDelta feed(std::string_view text) override {
    text_ += text;
    return {};
  }
  ToolDelta finish() override {
    ToolDelta d;
    Json calls = Json::parse(text_, nullptr, /*allow_exceptions=*/false);
    bool ok = calls.is_array() && !calls.empty();
    for (const auto& c : calls) ok = ok && c.is_object() && c.contains("name") && c["name"].is_string();
    if (!ok) {
      d.content = std::move(text_);
    } else {
      for (const auto& c : calls) {
        const Json params = c.contains("parameters") ? c["parameters"] : Json::object();
        d.calls.push_back({c["name"].get<std::string>(), dump_json(params)});
      }
    }
    text_.clear();
    return d;
  }

 private:
  std::string text_;
};

}  // namespace

std::unique_ptr<ToolParser> make_forced_tool_parser(const std::string& mode, const std::string& function) {
  if (mode == "named") return std::make_unique<NamedToolParser>(function);
  return std::make_unique<RequiredToolParser>();
}

}  // namespace vireo::server
