#include "server/chat_prompt.h"

#include <memory>

#include "core/error.h"
#include "server/openai_errors.h"
#include "server/prompt_truncation.h"
#include "server/request_validation.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace vireo::server {

std::string render_chat(const AsyncEngine& engine, const ChatRequest& r) {
  // The request's own template (--trust-request-chat-template), compiled for this request alone.
  std::unique_ptr<ChatTemplate> own;
  if (!r.chat_template.empty()) {
    const Tokenizer& tok = engine.tokenizer();
    try {
      own = std::make_unique<ChatTemplate>(r.chat_template, tok.bos_token().value_or(""), tok.eos_token().value_or(""));
    } catch (const Error& e) {
      throw bad_request(std::string("Chat template error: ") + e.what(), "chat_template");
    }
  }
  const ChatTemplate* tpl = own ? own.get() : engine.chat_template();
  if (!tpl)
    throw bad_request("This model's tokenizer has no chat template, so chat requests cannot be rendered", "messages");
  ChatTemplateOptions opts;
  opts.add_generation_prompt = r.add_generation_prompt;
  opts.continue_final_message = r.continue_final_message;
  opts.tools = r.tools;
  opts.extra_context = r.chat_template_kwargs.is_object() ? r.chat_template_kwargs : Json::object();
  try {
    return tpl->apply(r.messages, opts);
  } catch (const Error& e) {
    throw bad_request(std::string("Chat template error: ") + e.what(), "messages");
  }
}

std::vector<int32_t> prepare_chat_prompt(const AsyncEngine& engine, ChatRequest& r, const ModelInfo& info) {
  std::string prompt = render_chat(engine, r);
  std::vector<int32_t> ids = engine.tokenizer().encode(prompt, r.add_special_tokens);
  if (ids.empty()) throw bad_request("The rendered prompt is empty", "messages");
  truncate_prompt(ids, r.truncate_prompt_tokens);  // the template's start is cut too, as in vLLM
  const int num_prompt = static_cast<int>(ids.size());
  check_context_length(num_prompt, r.max_tokens, info.max_model_len, "messages");
  r.params.max_tokens = r.max_tokens.value_or(info.max_model_len - num_prompt);
  if (r.params.min_tokens > r.params.max_tokens) r.params.min_tokens = r.params.max_tokens;
  return ids;
}

}  // namespace vireo::server
