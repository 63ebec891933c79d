// Table-driven bad input against a live server: every case gets the OpenAI error envelope with
// the right status, type and param, while a streaming request started before them completes
// with exactly the expected tokens.
#include <gtest/gtest.h>

#include <future>

#include "server_fixture.h"

using namespace vireo;
using namespace vireo::testing;
using nlohmann::json;

namespace {

struct BadCase {
  std::string name;
  std::string method;  // POST / GET / PUT / DELETE
  std::string path;
  std::string body;    // raw
  std::string content_type;
  int status;
  std::string type;
  std::string param;   // "" = null, "*" = not checked
};

std::string j(const json& v) { return v.dump(); }

const std::string kJson = "application/json";
const std::string kCmpl = "/v1/completions";
const std::string kChat = "/v1/chat/completions";

std::vector<BadCase> bad_cases() {
  std::vector<BadCase> c;
  auto cmpl = [&](std::string name, json body, std::string param, int status = 400, std::string type = "BadRequestError") {
    c.push_back({name, "POST", kCmpl, body.dump(), kJson, status, type, param});
  };
  auto cmpl_raw = [&](std::string name, std::string body, std::string param = "") {
    c.push_back({name, "POST", kCmpl, body, kJson, 400, "BadRequestError", param});
  };
  auto chat = [&](std::string name, json body, std::string param, int status = 400, std::string type = "BadRequestError") {
    c.push_back({name, "POST", kChat, body.dump(), kJson, status, type, param});
  };
  json msgs = json::array({{{"role", "user"}, {"content", "hi"}}});
  auto with = [](json base, const std::string& k, json v) {
    base[k] = v;
    return base;
  };
  json p = {{"prompt", "hello"}};
  json m = {{"messages", msgs}};

  // Malformed bodies.
  cmpl_raw("malformed_json", "{");
  cmpl_raw("truncated_json", "{\"prompt\":\"a\"");
  cmpl_raw("trailing_garbage", "{} x");
  cmpl_raw("empty_body", "");
  cmpl_raw("body_is_array", "[1,2]");
  cmpl_raw("body_is_string", "\"str\"");
  cmpl_raw("body_is_null", "null");
  cmpl_raw("body_is_number", "42");
  cmpl_raw("invalid_utf8", "{\"prompt\":\"\xff\xfe\"}");
  cmpl_raw("overlong_utf8", "{\"prompt\":\"\xc0\xaf\"}");
  cmpl_raw("lone_surrogate", "{\"prompt\":\"\\ud800\"}");
  cmpl_raw("nan_literal", "{\"prompt\":\"a\",\"temperature\":NaN}");
  cmpl_raw("single_quotes", "{'prompt':'a'}");
  // prompt
  cmpl("missing_prompt", json::object(), "prompt");
  cmpl("prompt_null", {{"prompt", nullptr}}, "prompt");
  cmpl("prompt_empty_string", {{"prompt", ""}}, "prompt");
  cmpl("prompt_empty_list", {{"prompt", json::array()}}, "prompt");
  cmpl("prompt_number", {{"prompt", 5}}, "prompt");
  cmpl("prompt_bool", {{"prompt", true}}, "prompt");
  cmpl("prompt_object", {{"prompt", {{"a", 1}}}}, "prompt");
  cmpl("prompt_ids_then_string", {{"prompt", {1, "a"}}}, "prompt");
  cmpl("prompt_string_then_id", {{"prompt", {"a", 1}}}, "prompt");
  cmpl("prompt_empty_id_list_in_batch", {{"prompt", {{1}, json::array()}}}, "prompt");
  cmpl("prompt_mixed_batch", {{"prompt", {{1}, "a"}}}, "prompt");
  cmpl("prompt_negative_id", {{"prompt", {-1}}}, "prompt");
  cmpl("prompt_oov_id", {{"prompt", {260}}}, "prompt");
  cmpl("prompt_fractional_id", {{"prompt", {1.5}}}, "prompt");
  cmpl("prompt_oov_in_batch", {{"prompt", {{1}, {99999}}}}, "prompt");
  cmpl("prompt_empty_string_in_batch", {{"prompt", {"a", ""}}}, "prompt");
  cmpl("prompt_too_long", {{"prompt", std::string(300, 'x')}}, "prompt");
  cmpl("prompt_ids_too_long", {{"prompt", std::vector<int>(256, 7)}}, "prompt");
  cmpl("prompt_plus_max_tokens_too_long", with(p, "max_tokens", 1000), "max_tokens");
  // model
  cmpl("unknown_model", with(p, "model", "nope"), "model", 404, "NotFoundError");
  cmpl("model_not_string", with(p, "model", 5), "model");
  // max_tokens
  cmpl("max_tokens_zero", with(p, "max_tokens", 0), "max_tokens");
  cmpl("max_tokens_negative", with(p, "max_tokens", -5), "max_tokens");
  cmpl("max_tokens_string", with(p, "max_tokens", "10"), "max_tokens");
  cmpl("max_tokens_fraction", with(p, "max_tokens", 1.5), "max_tokens");
  cmpl("max_tokens_huge", with(p, "max_tokens", 1LL << 40), "max_tokens");
  cmpl("max_tokens_bool", with(p, "max_tokens", true), "max_tokens");
  // sampling ranges and types
  cmpl("temperature_negative", with(p, "temperature", -0.1), "temperature");
  cmpl("temperature_string", with(p, "temperature", "hot"), "temperature");
  cmpl("temperature_list", with(p, "temperature", {1}), "temperature");
  cmpl_raw("temperature_overflow_inf", "{\"prompt\":\"a\",\"temperature\":1e999}", "*");
  cmpl("temperature_over_float_range", with(p, "temperature", 1e39), "temperature");  // inf as a float
  chat("chat_temperature_over_float_range", with(m, "temperature", 1e39), "temperature");
  cmpl("top_p_zero", with(p, "top_p", 0), "top_p");
  cmpl("top_p_above_one", with(p, "top_p", 1.5), "top_p");
  cmpl("top_p_negative", with(p, "top_p", -1), "top_p");
  cmpl("top_k_below_minus_one", with(p, "top_k", -2), "top_k");
  cmpl("top_k_fraction", with(p, "top_k", 1.5), "top_k");
  cmpl("top_k_string", with(p, "top_k", "5"), "top_k");
  cmpl("min_p_negative", with(p, "min_p", -0.1), "min_p");
  cmpl("min_p_above_one", with(p, "min_p", 1.1), "min_p");
  cmpl("presence_penalty_high", with(p, "presence_penalty", 2.5), "presence_penalty");
  cmpl("presence_penalty_low", with(p, "presence_penalty", -3), "presence_penalty");
  cmpl("frequency_penalty_high", with(p, "frequency_penalty", 3), "frequency_penalty");
  cmpl("frequency_penalty_string", with(p, "frequency_penalty", "x"), "frequency_penalty");
  cmpl("repetition_penalty_zero", with(p, "repetition_penalty", 0), "repetition_penalty");
  cmpl("repetition_penalty_negative", with(p, "repetition_penalty", -1), "repetition_penalty");
  cmpl("seed_string", with(p, "seed", "x"), "seed");
  cmpl("seed_fraction", with(p, "seed", 1.5), "seed");
  // n / logprobs
  cmpl("n_zero", with(p, "n", 0), "n");
  cmpl("n_negative", with(p, "n", -1), "n");
  cmpl("n_above_cap", with(p, "n", 129), "n");
  cmpl("n_string", with(p, "n", "2"), "n");
  cmpl("n_bool", with(p, "n", true), "n");
  cmpl("choices_above_cap", {{"prompt", std::vector<std::string>(20, "a")}, {"n", 100}}, "n");
  cmpl("logprobs_above_cap", with(p, "logprobs", 21), "logprobs");
  cmpl("logprobs_negative", with(p, "logprobs", -1), "logprobs");
  cmpl("logprobs_bool", with(p, "logprobs", true), "logprobs");
  cmpl("logprobs_string", with(p, "logprobs", "5"), "logprobs");
  cmpl("best_of_unsupported", with(p, "best_of", 3), "best_of");
  cmpl("best_of_zero", with(with(p, "n", 2), "best_of", 0), "best_of");
  cmpl("prompt_logprobs_above_cap", with(p, "prompt_logprobs", 21), "prompt_logprobs");
  cmpl("prompt_logprobs_whole_vocab", with(p, "prompt_logprobs", -1), "prompt_logprobs");
  cmpl("prompt_logprobs_negative", with(p, "prompt_logprobs", -2), "prompt_logprobs");
  cmpl("prompt_logprobs_string", with(p, "prompt_logprobs", "5"), "prompt_logprobs");
  cmpl("prompt_logprobs_with_stream", with(with(p, "stream", true), "prompt_logprobs", 2), "prompt_logprobs");
  // stop
  cmpl("stop_number", with(p, "stop", 5), "stop");
  cmpl("stop_list_of_numbers", with(p, "stop", {1}), "stop");
  cmpl("stop_object", with(p, "stop", {{"a", 1}}), "stop");
  cmpl("stop_too_many", with(p, "stop", std::vector<std::string>(65, "x")), "stop");
  cmpl("stop_too_long", with(p, "stop", std::string(2000, 's')), "stop");
  cmpl("stop_token_ids_oov", with(p, "stop_token_ids", {999}), "stop_token_ids");
  cmpl("stop_token_ids_negative", with(p, "stop_token_ids", {-1}), "stop_token_ids");
  cmpl("stop_token_ids_string", with(p, "stop_token_ids", "1"), "stop_token_ids");
  // flags
  cmpl("stream_string", with(p, "stream", "yes"), "stream");
  cmpl("stream_options_without_stream", with(p, "stream_options", {{"include_usage", true}}), "stream_options");
  cmpl("stream_options_not_object", with(with(p, "stream", true), "stream_options", "x"), "stream_options");
  cmpl("include_usage_not_bool", with(with(p, "stream", true), "stream_options", {{"include_usage", "y"}}), "include_usage");
  cmpl("echo_string", with(p, "echo", "yes"), "echo");
  cmpl("ignore_eos_number", with(p, "ignore_eos", 1), "ignore_eos");
  cmpl("skip_special_tokens_string", with(p, "skip_special_tokens", "no"), "skip_special_tokens");
  cmpl("min_tokens_negative", with(p, "min_tokens", -1), "min_tokens");
  cmpl("min_tokens_above_max", with(with(p, "max_tokens", 10), "min_tokens", 20), "min_tokens");
  cmpl("logit_bias_not_object", with(p, "logit_bias", json::array({1, 2})), "logit_bias");
  cmpl("logit_bias_key_not_id", with(p, "logit_bias", {{"abc", 5}}), "logit_bias");
  cmpl("logit_bias_key_negative", with(p, "logit_bias", {{"-1", 5}}), "logit_bias");
  cmpl("logit_bias_key_out_of_vocab", with(p, "logit_bias", {{"99999999", 5}}), "logit_bias");
  cmpl("logit_bias_value_string", with(p, "logit_bias", {{"1", "5"}}), "logit_bias");
  cmpl("suffix_unsupported", with(p, "suffix", "x"), "suffix");
  // vLLM extras that change the output: refused, not dropped (they used to be ignored silently).
  cmpl("use_beam_search_true", with(p, "use_beam_search", true), "use_beam_search");
  chat("chat_use_beam_search_true", with(m, "use_beam_search", true), "use_beam_search");
  cmpl("use_beam_search_string", with(p, "use_beam_search", "yes"), "use_beam_search");
  cmpl("allowed_token_ids_out_of_vocab", with(p, "allowed_token_ids", {1, 1000000}), "allowed_token_ids");
  cmpl("allowed_token_ids_negative", with(p, "allowed_token_ids", {-1}), "allowed_token_ids");
  cmpl("allowed_token_ids_not_a_list", with(p, "allowed_token_ids", "1,2"), "allowed_token_ids");
  chat("chat_allowed_token_ids_empty", with(m, "allowed_token_ids", json::array()), "allowed_token_ids");
  cmpl("bad_words_not_a_list", with(p, "bad_words", "the"), "bad_words");
  chat("chat_bad_words_number", with(m, "bad_words", json::array({"the", 5})), "bad_words");
  cmpl("logits_processors", with(p, "logits_processors", {"my.module.Proc"}), "logits_processors");
  cmpl("truncate_prompt_tokens_below_minus_one", with(p, "truncate_prompt_tokens", -2), "truncate_prompt_tokens");
  cmpl("truncate_prompt_tokens_zero", with(p, "truncate_prompt_tokens", 0), "truncate_prompt_tokens");
  cmpl("truncate_prompt_tokens_over_context", with(p, "truncate_prompt_tokens", 100000), "truncate_prompt_tokens");
  chat("chat_truncate_prompt_tokens_string", with(m, "truncate_prompt_tokens", "10"), "truncate_prompt_tokens");
  cmpl("return_tokens_as_token_ids_string", with(p, "return_tokens_as_token_ids", "yes"), "return_tokens_as_token_ids");
  cmpl("response_format_unknown_type", with(p, "response_format", {{"type", "xml"}}), "response_format");
  cmpl("response_format_schema_missing", with(p, "response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}), "response_format");
  cmpl("response_format_bad_schema_type",
       with(p, "response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", "strin"}}}}}}), "response_format");
  cmpl("response_format_unsupported_keyword",
       with(p, "response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", "array"}, {"uniqueItems", true}}}}}}), "response_format");
  cmpl("guided_json_not_json", with(p, "guided_json", "{oops"), "guided_json");
  cmpl("guided_json_bad_ref", with(p, "guided_json", {{"$ref", "#/$defs/nope"}}), "guided_json");
  cmpl("guided_choice_empty", with(p, "guided_choice", json::array()), "guided_choice");
  cmpl("guided_choice_numbers", with(p, "guided_choice", {1, 2}), "guided_choice");
  cmpl("guided_regex_lookahead", with(p, "guided_regex", "a(?=b)"), "guided_regex");
  cmpl("guided_regex_backreference", with(p, "guided_regex", "(a)\\1"), "guided_regex");
  cmpl("guided_regex_not_string", with(p, "guided_regex", 5), "guided_regex");
  cmpl("guided_grammar_unsupported", with(p, "guided_grammar", "root ::= \"a\""), "guided_grammar");
  cmpl("structured_outputs_grammar", with(p, "structured_outputs", {{"grammar", "root ::= \"a\""}}), "structured_outputs");
  {  // grammars the matcher could not follow: refused when compiled, not a 500 (or a frozen engine) later
    std::string deep = "a", ambiguous = "a";
    for (int i = 0; i < 400; ++i) deep = "(" + deep + "|b)?";
    for (int i = 0; i < 12; ++i) ambiguous = "(" + ambiguous + "){0,3}";
    cmpl("guided_regex_nested_too_deep", with(p, "guided_regex", deep), "guided_regex");
    cmpl("guided_regex_too_ambiguous", with(p, "guided_regex", ambiguous), "guided_regex");
  }
  cmpl("structured_outputs_regex_unbalanced", with(p, "structured_outputs", {{"regex", "(a"}}), "structured_outputs");
  cmpl("structured_outputs_not_object", with(p, "structured_outputs", "json"), "structured_outputs");
  cmpl("structured_outputs_two_kinds", with(p, "structured_outputs", {{"choice", {"a"}}, {"json_object", true}}), "structured_outputs");
  cmpl("guided_json_and_choice", with(with(p, "guided_json", {{"type", "object"}}), "guided_choice", {"a"}), "guided_choice");
  cmpl("user_not_string", with(p, "user", 5), "user");
  // engine failure mid-request: 500, nothing else disturbed
  cmpl("engine_error", {{"prompt", "please FAIL"}}, "", 500, "InternalServerError");
  // the request's own grammar, which the engine could not match: the client's input, 400
  cmpl("engine_grammar_error", {{"prompt", "please GRAMMAR_FAIL"}}, "", 400, "BadRequestError");
  // vLLM's prompt_embeds (needs --enable-prompt-embeds there): refused, not dropped.
  cmpl("prompt_embeds_unsupported", with(p, "prompt_embeds", "AAAA"), "prompt_embeds");
  cmpl("prompt_embeds_without_prompt", {{"prompt_embeds", {"AAAA"}}}, "prompt_embeds");

  // Chat.
  chat("messages_missing", json::object(), "messages");
  chat("messages_empty", {{"messages", json::array()}}, "messages");
  chat("messages_string", {{"messages", "hi"}}, "messages");
  chat("messages_list_of_numbers", {{"messages", {1}}}, "messages");
  chat("message_without_role", {{"messages", {{{"content", "x"}}}}}, "messages");
  chat("message_empty_role", {{"messages", {{{"role", ""}, {"content", "x"}}}}}, "messages");
  chat("message_role_number", {{"messages", {{{"role", 5}, {"content", "x"}}}}}, "messages");
  chat("message_content_number", {{"messages", {{{"role", "user"}, {"content", 5}}}}}, "messages");
  chat("message_image_part", {{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", {{"url", "http://x"}}}}}}}}}}, "messages");
  chat("message_text_part_text_number", {{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", 5}}}}}}}}, "messages");
  chat("message_part_not_object", {{"messages", {{{"role", "user"}, {"content", {5}}}}}}, "messages");
  chat("user_content_null", {{"messages", {{{"role", "user"}, {"content", nullptr}}}}}, "messages");
  chat("chat_max_tokens_zero", with(m, "max_tokens", 0), "max_tokens");
  chat("chat_max_completion_tokens_negative", with(m, "max_completion_tokens", -1), "max_completion_tokens");
  chat("chat_max_tokens_over_context", with(m, "max_tokens", 1000), "max_tokens");
  chat("chat_messages_too_long", {{"messages", {{{"role", "user"}, {"content", std::string(300, 'x')}}}}}, "messages");
  chat("top_logprobs_above_cap", with(with(m, "logprobs", true), "top_logprobs", 21), "top_logprobs");
  chat("top_logprobs_without_logprobs", with(m, "top_logprobs", 2), "top_logprobs");
  chat("chat_prompt_logprobs_above_cap", with(m, "prompt_logprobs", 21), "prompt_logprobs");
  chat("chat_logprobs_int", with(m, "logprobs", 5), "logprobs");
  chat("tools_string", with(m, "tools", "x"), "tools");
  chat("tools_list_of_numbers", with(m, "tools", {1}), "tools");
  chat("tool_without_function", with(m, "tools", json::array({{{"type", "function"}}})), "tools");
  chat("tool_function_without_name", with(m, "tools", json::array({{{"type", "function"}, {"function", json::object()}}})), "tools");
  chat("tool_wrong_type", with(m, "tools", json::array({{{"type", "retrieval"}, {"function", {{"name", "f"}}}}})), "tools");
  chat("tool_parameters_string",
       with(m, "tools", json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "x"}}}}})), "tools");
  chat("tool_choice_required", with(m, "tool_choice", "required"), "tool_choice");
  chat("legacy_functions", with(m, "functions", json::array({{{"name", "f"}}})), "functions");
  chat("legacy_function_call_named", with(m, "function_call", {{"name", "f"}}), "function_call");
  chat("parallel_tool_calls_string", with(m, "parallel_tool_calls", "yes"), "parallel_tool_calls");
  chat("chat_template_kwargs_list", with(m, "chat_template_kwargs", json::array()), "chat_template_kwargs");
  chat("chat_unknown_model", with(m, "model", "gpt-4"), "model", 404, "NotFoundError");
  chat("chat_temperature_negative", with(m, "temperature", -1), "temperature");
  chat("chat_n_zero", with(m, "n", 0), "n");
  chat("chat_echo_string", with(m, "echo", "yes"), "echo");
  chat("chat_stream_options_without_stream", with(m, "stream_options", {{"include_usage", true}}), "stream_options");
  chat("add_generation_prompt_string", with(m, "add_generation_prompt", "yes"), "add_generation_prompt");
  chat("per_request_chat_template", with(m, "chat_template", "{{x}}"), "chat_template");
  chat("continue_final_message_string", with(m, "continue_final_message", "yes"), "continue_final_message");
  chat("continue_final_message_after_user", with(m, "continue_final_message", true), "continue_final_message");
  chat("chat_stop_too_many", with(m, "stop", std::vector<std::string>(65, "x")), "stop");
  chat("chat_body_array", json::array({1}), "");

  // Headers, routes, methods, sizes.
  c.push_back({"content_type_text", "POST", kCmpl, j(p), "text/plain", 415, "UnsupportedMediaTypeError", ""});
  c.push_back({"content_type_form", "POST", kCmpl, j(p), "application/x-www-form-urlencoded", 415, "UnsupportedMediaTypeError", ""});
  c.push_back({"content_type_chat_xml", "POST", kChat, j(m), "application/xml", 415, "UnsupportedMediaTypeError", ""});
  c.push_back({"get_completions", "GET", kCmpl, "", "", 405, "MethodNotAllowedError", ""});
  c.push_back({"put_chat", "PUT", kChat, j(m), kJson, 405, "MethodNotAllowedError", ""});
  c.push_back({"delete_models", "DELETE", "/v1/models", "", "", 405, "MethodNotAllowedError", ""});
  c.push_back({"post_models", "POST", "/v1/models", "{}", kJson, 405, "MethodNotAllowedError", ""});
  c.push_back({"get_tokenize", "GET", "/tokenize", "", "", 405, "MethodNotAllowedError", ""});
  c.push_back({"unknown_route", "GET", "/nope", "", "", 404, "NotFoundError", ""});
  c.push_back({"unknown_v1_route", "POST", "/v1/embeddings", "{}", kJson, 404, "NotFoundError", ""});
  c.push_back({"route_trailing_slash", "POST", "/v1/completions/", j(p), kJson, 404, "NotFoundError", ""});
  // Nesting deep enough to overflow a recursive conversion (a segfault before the depth limit).
  const std::string deep = std::string(20000, '[') + std::string(20000, ']');
  c.push_back({"chat_nested_20000_deep", "POST", kChat,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"x\":" + deep + "}],\"max_tokens\":1}", kJson, 400,
               "BadRequestError", ""});
  c.push_back({"tokenize_nested_20000_deep", "POST", "/tokenize",
               "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"x\":" + deep + "}", kJson, 400, "BadRequestError", ""});
  c.push_back({"completion_nested_200_deep", "POST", kCmpl, "{\"prompt\":\"a\",\"x\":" + std::string(200, '[') + std::string(200, ']') + "}",
               kJson, 400, "BadRequestError", ""});
  c.push_back({"body_too_large", "POST", kCmpl, "{\"prompt\":\"" + std::string(300 * 1024, 'a') + "\"}", kJson, 413, "RequestTooLargeError", ""});

  // /tokenize, /detokenize.
  c.push_back({"tokenize_empty", "POST", "/tokenize", "{}", kJson, 400, "BadRequestError", "prompt"});
  c.push_back({"tokenize_prompt_number", "POST", "/tokenize", j({{"prompt", 5}}), kJson, 400, "BadRequestError", "prompt"});
  c.push_back({"tokenize_both", "POST", "/tokenize", j({{"prompt", "a"}, {"messages", msgs}}), kJson, 400, "BadRequestError", "prompt"});
  c.push_back({"tokenize_bad_role", "POST", "/tokenize", j({{"messages", {{{"role", 7}, {"content", "a"}}}}}), kJson, 400, "BadRequestError", "messages"});
  c.push_back({"tokenize_unknown_model", "POST", "/tokenize", j({{"prompt", "a"}, {"model", "x"}}), kJson, 404, "NotFoundError", "model"});
  c.push_back({"detokenize_oov", "POST", "/detokenize", j({{"tokens", {999}}}), kJson, 400, "BadRequestError", "tokens"});
  c.push_back({"detokenize_string", "POST", "/detokenize", j({{"tokens", "x"}}), kJson, 400, "BadRequestError", "tokens"});
  c.push_back({"detokenize_missing", "POST", "/detokenize", "{}", kJson, 400, "BadRequestError", "tokens"});
  c.push_back({"detokenize_malformed", "POST", "/detokenize", "{\"tokens\":[1,", kJson, 400, "BadRequestError", ""});
  return c;
}

httplib::Result send(httplib::Client& cli, const BadCase& bc) {
  if (bc.method == "GET") return cli.Get(bc.path.c_str());
  if (bc.method == "DELETE") return cli.Delete(bc.path.c_str());
  if (bc.method == "PUT") return cli.Put(bc.path.c_str(), bc.body, bc.content_type.c_str());
  return cli.Post(bc.path.c_str(), bc.body, bc.content_type.c_str());
}

}  // namespace

TEST(BadInput, EveryCaseGetsTheErrorEnvelopeAndAConcurrentStreamIsUndisturbed) {
  server::ServerOptions opts;
  opts.max_body_bytes = 256 * 1024;
  FakeEngineOptions eopts;
  eopts.token_delay = std::chrono::milliseconds(2);
  LiveServer srv(opts, eopts);
  srv.engine().set_hold(true);  // the good stream pauses after 10 tokens until the bad cases are done

  // The good request: a 240-token greedy stream, started first.
  std::atomic<bool> good_done{false};
  auto good = std::async(std::launch::async, [&] {
    auto cli = srv.client();
    auto res = post_json(cli, "/v1/completions",
                         {{"prompt", "HOLD hello"}, {"max_tokens", 240}, {"temperature", 0}, {"stream", true},
                          {"stream_options", {{"include_usage", true}}}});
    good_done = true;
    return res ? std::make_pair(res->status, res->body) : std::make_pair(-1, std::string());
  });
  while (srv.engine().num_generated() < 10) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  auto cases = bad_cases();
  ASSERT_GE(cases.size(), 100u);
  auto cli = std::make_unique<httplib::Client>("127.0.0.1", srv.port());
  for (const auto& bc : cases) {
    SCOPED_TRACE(bc.name);
    auto res = send(*cli, bc);
    ASSERT_TRUE(res) << "no response: " << httplib::to_string(res.error());
    EXPECT_EQ(res->status, bc.status) << res->body;
    json body;
    ASSERT_NO_THROW(body = json::parse(res->body)) << res->body;
    ASSERT_TRUE(body.contains("error")) << res->body;
    const json& e = body["error"];
    EXPECT_EQ(e["type"], bc.type) << res->body;
    EXPECT_EQ(e["code"], bc.status);
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty());
    if (bc.param == "") EXPECT_TRUE(e["param"].is_null()) << res->body;
    else if (bc.param != "*") EXPECT_EQ(e["param"], bc.param) << res->body;
    if (bc.status == 413) cli = std::make_unique<httplib::Client>("127.0.0.1", srv.port());  // closed after 413
  }
  EXPECT_FALSE(good_done) << "the good stream ended before the bad requests did; the test proves nothing";
  srv.engine().set_hold(false);

  auto [status, body] = good.get();
  ASSERT_EQ(status, 200);
  bool done = false;
  auto chunks = parse_sse(body, &done);
  EXPECT_TRUE(done);
  std::string text;
  std::string finish;
  for (const auto& c : chunks) {
    if (c["choices"].empty()) continue;
    text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  std::vector<int32_t> prompt = srv.engine().tokenizer().encode("HOLD hello", true);
  EXPECT_EQ(text, FakeEngine::expected_text(prompt, 240));
  EXPECT_EQ(finish, "length");
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.back()["usage"]["completion_tokens"], 240);
}

// API responses are whole JSON documents: a Range header must not cut them (cpp-httplib would).
TEST(BadInput, RangeHeaderIsIgnored) {
  server::ServerOptions opts;
  FakeEngineOptions eopts;
  LiveServer srv(opts, eopts);
  auto cli = srv.client();
  for (const char* range : {"bytes=0-30", "bytes=5000-", "bytes=0-1,2-3,4-5"}) {
    SCOPED_TRACE(range);
    httplib::Headers h{{"Range", range}};
    auto res = cli.Post("/v1/completions", h, R"({"prompt":"hello","max_tokens":3})", "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_FALSE(json::parse(res->body, nullptr, false).is_discarded()) << res->body;
    EXPECT_FALSE(res->has_header("Content-Range"));
  }
}

// A request-caused engine error (its grammar, or allowed_token_ids that leave the grammar nothing:
// sampling_batch.cc) in a stream: an error event with the request's status, then [DONE].
TEST(BadInput, RequestCausedEngineErrorStreamsA400ErrorEvent) {
  LiveServer srv;
  auto cli = srv.client();
  auto res = post_json(cli, "/v1/completions", {{"prompt", "please GRAMMAR_FAIL"}, {"max_tokens", 5}, {"stream", true}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  bool done = false;
  auto events = parse_sse(res->body, &done);
  EXPECT_TRUE(done);
  ASSERT_FALSE(events.empty());
  ASSERT_TRUE(events.back().contains("error")) << res->body;
  EXPECT_EQ(events.back()["error"]["code"], 400);
  EXPECT_EQ(events.back()["error"]["type"], "BadRequestError");
}

// An error message holds the request's text whole, NULs included (it stopped at the NUL: what()).
TEST(BadInput, ErrorMessagesKeepEmbeddedNuls) {
  LiveServer srv;
  auto cli = srv.client();
  const std::string name("a\0b", 3);
  auto res = post_json(cli, "/v1/completions", {{"prompt", "hi"}, {"model", name}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(json::parse(res->body)["error"]["message"], "The model `" + name + "` does not exist.") << res->body;
  res = post_json(cli, "/v1/responses", {{"input", "hi"}, {"model", name}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(json::parse(res->body)["error"]["message"], "The model `" + name + "` does not exist.") << res->body;
}
