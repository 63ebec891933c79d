// ChatTemplate: parses once, renders per request with the context transformers' apply_chat_template
// builds (messages, tools, documents, add_generation_prompt, bos/eos tokens, extra kwargs), and its
// continue_final_message cut.
#include "template/chat_template.h"

#include <optional>

#include "core/error.h"
#include "template/interpreter.h"
#include "template/parser.h"
#include "template/py_string.h"

namespace vireo {
namespace {

// transformers' apply_chat_template(continue_final_message=True), step for step: find the final
// message's text (stripped) at its last occurrence and cut after it, keeping trailing whitespace
// only where the template kept the message verbatim.
std::string cut_after_final_message(const std::string& rendered, const nlohmann::ordered_json& messages) {
  const nlohmann::ordered_json* content = nullptr;
  if (messages.is_array() && !messages.empty() && messages.back().is_object() && messages.back().contains("content"))
    content = &messages.back()["content"];
  std::optional<std::string> final_message;
  if (content && content->is_string()) final_message = content->get<std::string>();
  if (content && content->is_array())
    for (auto it = content->rbegin(); it != content->rend() && !final_message; ++it)
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) final_message = (*it)["text"].get<std::string>();
  if (!final_message) throw Error("continue_final_message is set but we could not find any text to continue in the final message!");
  const std::string stripped = tmpl::py_strip(*final_message, std::nullopt, true, true);
  const size_t loc = rendered.rfind(stripped);
  if (loc == std::string::npos)
    throw Error("continue_final_message is set but the final message does not appear in the chat after applying the chat "
                "template! This can happen if the chat template deletes portions of the final message. Please verify the "
                "chat template and final message in your chat to ensure they are compatible.");
  const size_t lstripped = tmpl::py_strip(*final_message, std::nullopt, true, false).size();
  if (rendered.compare(loc, lstripped, *final_message) == 0) return rendered.substr(0, loc + lstripped);
  return rendered.substr(0, loc + stripped.size());
}

}  // namespace

struct ChatTemplate::Impl {
  tmpl::Body body;
  std::string bos_token, eos_token;
  std::string source;
};

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token)
    : impl_(std::make_unique<Impl>()) {
  impl_->body = tmpl::parse_template(source);
  impl_->bos_token = std::move(bos_token);
  impl_->eos_token = std::move(eos_token);
  impl_->source = std::move(source);
}

const std::string& ChatTemplate::source() const { return impl_->source; }

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::apply(const nlohmann::json& messages, const ChatTemplateOptions& opts) const {
  return apply(nlohmann::ordered_json(messages), opts);
}

std::string ChatTemplate::apply(const nlohmann::ordered_json& messages, const ChatTemplateOptions& opts) const {
  using namespace tmpl;
  if (opts.continue_final_message && opts.add_generation_prompt)
    throw Error("continue_final_message and add_generation_prompt are not compatible. Use continue_final_message when "
                "you want the model to continue the final message, and add_generation_prompt when you want to add a "
                "header that will prompt it to start a new assistant message instead.");
  auto globals = std::make_shared<Scope>();
  install_globals(*globals);
  auto ctx = std::make_shared<Scope>();
  ctx->parent = globals;
  ctx->vars["messages"] = from_json(messages);
  ctx->vars["tools"] = from_json(opts.tools);  // null -> None, as transformers passes tools=None
  ctx->vars["documents"] = Value(None{});
  ctx->vars["add_generation_prompt"] = Value(opts.add_generation_prompt);
  ctx->vars["bos_token"] = Value(impl_->bos_token);
  ctx->vars["eos_token"] = Value(impl_->eos_token);
  if (opts.extra_context.is_object())
    for (auto it = opts.extra_context.begin(); it != opts.extra_context.end(); ++it)
      ctx->vars[it.key()] = from_json(it.value());
  else if (!opts.extra_context.is_null())
    throw Error("chat template: extra_context must be a JSON object");
  // The template body runs in its own scope so top-level {% set %} never clobbers the inputs' scope.
  auto top = std::make_shared<Scope>();
  top->parent = ctx;
  Interpreter in(top);
  std::string out;
  try {
    in.render(impl_->body, out);
  } catch (const std::bad_alloc&) {
    throw Error("chat template: out of memory while rendering");
  } catch (const std::length_error&) {
    throw Error("chat template: value too large while rendering");
  }
  if (opts.continue_final_message) return cut_after_final_message(out, messages);
  return out;
}

}  // namespace vireo
