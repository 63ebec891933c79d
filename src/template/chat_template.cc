// ChatTemplate: parses once, renders per request with the context transformers' apply_chat_template
// builds (messages, tools, documents, add_generation_prompt, bos/eos tokens, extra kwargs).
#include "template/chat_template.h"

#include "core/error.h"
#include "template/interpreter.h"
#include "template/parser.h"

namespace vireo {

struct ChatTemplate::Impl {
  tmpl::Body body;
  std::string bos_token, eos_token;
};

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token)
    : impl_(std::make_unique<Impl>()) {
  impl_->body = tmpl::parse_template(source);
  impl_->bos_token = std::move(bos_token);
  impl_->eos_token = std::move(eos_token);
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::apply(const nlohmann::json& messages, const ChatTemplateOptions& opts) const {
  return apply(nlohmann::ordered_json(messages), opts);
}

std::string ChatTemplate::apply(const nlohmann::ordered_json& messages, const ChatTemplateOptions& opts) const {
  using namespace tmpl;
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
  return out;
}

}  // namespace vireo
