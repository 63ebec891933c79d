#include "bench/openai_stream.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace vireo::bench {

Backend parse_backend(const std::string& name) {
  if (name == "openai" || name == "vllm") return Backend::kCompletions;
  if (name == "openai-chat") return Backend::kChat;
  throw Error("--backend must be openai, vllm or openai-chat, got '" + name + "'");
}

std::string build_request_body(Backend backend, const std::string& model, const std::string& prompt,
                               int output_len, bool ignore_eos) {
  nlohmann::json j;
  j["model"] = model;
  if (backend == Backend::kCompletions) {
    j["prompt"] = prompt;
    j["max_tokens"] = output_len;
  } else {
    j["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", prompt}}});
    j["max_completion_tokens"] = output_len;
  }
  j["temperature"] = 0.0;
  j["stream"] = true;
  j["stream_options"] = {{"include_usage", true}};
  if (ignore_eos) j["ignore_eos"] = true;
  return j.dump();
}

OpenAIStreamHandler::OpenAIStreamHandler(Backend backend, RequestResult* result, double start_time_s,
                                         std::function<void()> on_done)
    : backend_(backend), r_(result), start_(start_time_s), on_done_(std::move(on_done)) {
  r_->start_time = start_time_s;
}

void OpenAIStreamHandler::on_status(int status, double) { status_ = status; }

void OpenAIStreamHandler::on_body(std::string_view data, double now_s) {
  if (status_ != 200) {
    if (err_body_.size() < 2000) err_body_.append(data.substr(0, 2000 - err_body_.size()));
    return;
  }
  buf_.append(data);
  // Events end with a blank line; servers may use "\n\n" or "\r\n\r\n".
  size_t pos = 0;
  while (true) {
    size_t e = buf_.find("\n\n", pos);
    size_t e2 = buf_.find("\r\n\r\n", pos);
    size_t end, skip;
    if (e2 != std::string::npos && (e == std::string::npos || e2 < e)) {
      end = e2;
      skip = 4;
    } else if (e != std::string::npos) {
      end = e;
      skip = 2;
    } else {
      break;
    }
    std::string event = buf_.substr(pos, end - pos);
    pos = end + skip;
    // An event may hold several lines; only "data:" lines matter.
    size_t lp = 0;
    while (lp <= event.size()) {
      size_t le = event.find('\n', lp);
      if (le == std::string::npos) le = event.size();
      std::string line = event.substr(lp, le - lp);
      lp = le + 1;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.rfind("data:", 0) != 0) continue;
      std::string payload = line.substr(5);
      payload.erase(0, payload.find_first_not_of(' '));
      handle_event(payload, now_s);
    }
  }
  buf_.erase(0, pos);
}

void OpenAIStreamHandler::handle_event(const std::string& payload, double now_s) {
  if (payload == "[DONE]") return;
  nlohmann::json j = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    if (r_->error.empty()) r_->error = "malformed stream chunk: " + payload.substr(0, 200);
    return;
  }
  if (j.contains("error")) {
    const auto& e = j["error"];
    r_->error = e.is_object() && e.contains("message") ? e["message"].dump() : e.dump();
    return;
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const auto& u = j["usage"];
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer())
      r_->output_tokens = u["completion_tokens"].get<int>();
  }
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return;
  const auto& c = j["choices"][0];
  std::string text;
  if (backend_ == Backend::kCompletions) {
    if (c.contains("text") && c["text"].is_string()) text = c["text"].get<std::string>();
  } else if (c.contains("delta") && c["delta"].is_object()) {
    const auto& d = c["delta"];
    if (d.contains("content") && d["content"].is_string()) text = d["content"].get<std::string>();
    else if (d.contains("reasoning_content") && d["reasoning_content"].is_string())
      text = d["reasoning_content"].get<std::string>();
  }
  if (text.empty()) return;  // e.g. the role-only first chat chunk, or a held-back stop string
  if (!got_first_) {
    r_->ttft = now_s - start_;
    got_first_ = true;
  } else {
    r_->itl.push_back(now_s - last_ts_);
  }
  last_ts_ = now_s;
  r_->generated_text += text;
}

void OpenAIStreamHandler::on_complete(double now_s) {
  r_->latency = now_s - start_;
  if (status_ != 200) {
    r_->success = false;
    r_->error = "HTTP " + std::to_string(status_) + ": " + err_body_;
  } else if (!r_->error.empty()) {
    r_->success = false;
  } else if (!got_first_) {
    r_->success = false;
    r_->error = "Never received a valid chunk to calculate TTFT.";
  } else {
    r_->success = true;
  }
  if (on_done_) on_done_();
}

void OpenAIStreamHandler::on_error(const std::string& message, double now_s) {
  r_->latency = now_s - start_;
  r_->success = false;
  r_->error = message;
  if (on_done_) on_done_();
}

}  // namespace vireo::bench
