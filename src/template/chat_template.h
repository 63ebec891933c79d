// Chat templates (Jinja2 as used by HF tokenizer_config.json), rendered by our own engine.
#pragma once
#include <nlohmann/json.hpp>
#include <memory>
#include <string>

namespace vireo {

// ordered_json keeps the caller's key order, which `tojson` in templates reproduces (transformers
// renders Python dicts in insertion order); a plain nlohmann::json converts implicitly (keys sorted).
struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  // transformers' continue_final_message: the render is cut right after the final message's content
  // (its last text part), dropping what the template adds after it (end of turn), so the model
  // continues that message. Incompatible with add_generation_prompt (an Error, as in transformers).
  bool continue_final_message = false;
  nlohmann::ordered_json tools;           // null or a list of OpenAI tool objects
  nlohmann::ordered_json extra_context;   // e.g. {"enable_thinking": false}; merged into the context
};

class ChatTemplate {
 public:
  // `source`: the Jinja text. bos/eos are exposed to the template as bos_token/eos_token.
  // Throws vireo::Error on a syntax error (message says line and what was expected).
  ChatTemplate(std::string source, std::string bos_token, std::string eos_token);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // `messages`: a JSON list of {"role", "content", ...} as transformers' apply_chat_template
  // takes them. Returns exactly the string transformers renders (tokenize=False).
  // Throws vireo::Error for raise_exception() in the template or a render error.
  std::string apply(const nlohmann::json& messages, const ChatTemplateOptions& opts) const;
  // Same, keeping the messages' key order (use it when messages are parsed as ordered_json).
  std::string apply(const nlohmann::ordered_json& messages, const ChatTemplateOptions& opts) const;
  const std::string& source() const;  // the Jinja text it was made from

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vireo
