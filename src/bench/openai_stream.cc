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
                               int output_len, bool ignore_eos, const std::string& extra) {
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
  if (!extra.empty()) j.merge_patch(nlohmann::json::parse(extra));
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
  if (buf_.empty()) {
    // The usual case: whole events, parsed where they lie; only an unfinished tail is kept.
    size_t used = split_events(data, now_s);
    buf_.assign(data.substr(used));
    return;
  }
  buf_.append(data);
  size_t used = split_events(buf_, now_s);
  buf_.erase(0, used);
}

// Events end with a blank line ("\n\n" or "\r\n\r\n"); of their lines only "data:" ones matter,
// each handled on its own.
size_t OpenAIStreamHandler::split_events(std::string_view in, double now_s) {
  size_t ev_start = 0, pos = 0;
  while (true) {
    size_t nl = in.find('\n', pos);
    if (nl == std::string_view::npos) break;
    size_t line_len = nl - pos;
    if (line_len > 0 && in[nl - 1] == '\r') --line_len;
    pos = nl + 1;
    if (line_len != 0) continue;
    // A blank line: dispatch the event's data lines.
    std::string_view event = in.substr(ev_start, nl - ev_start);
    ev_start = pos;
    size_t lp = 0;
    while (lp < event.size()) {
      size_t le = event.find('\n', lp);
      if (le == std::string_view::npos) le = event.size();
      std::string_view line = event.substr(lp, le - lp);
      lp = le + 1;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.substr(0, 5) != "data:") continue;
      std::string_view payload = line.substr(5);
      size_t sp = payload.find_first_not_of(' ');
      payload.remove_prefix(sp == std::string_view::npos ? payload.size() : sp);
      handle_event(payload, now_s);
    }
  }
  return ev_start;
}

void OpenAIStreamHandler::handle_event(std::string_view payload, double now_s) {
  if (payload == "[DONE]") return;
  parse_stream_chunk(payload, backend_, chunk_);
  if (chunk_.kind == StreamChunk::Kind::kMalformed) {
    if (r_->error.empty()) r_->error = "malformed stream chunk: " + std::string(payload.substr(0, 200));
    return;
  }
  if (chunk_.kind == StreamChunk::Kind::kError) {
    r_->error = chunk_.error;
    return;
  }
  if (chunk_.has_tokens) r_->output_tokens = chunk_.tokens;
  // As vllm bench serve: every chunk that carries choices is a token's arrival, even with empty text (a
  // held-back UTF-8 byte, a special token, the chat role chunk that comes with the first token).
  if (!chunk_.has_choices) return;
  if (!got_first_) {
    r_->ttft = now_s - start_;
    got_first_ = true;
  } else {
    r_->itl.push_back(now_s - last_ts_);
  }
  last_ts_ = now_s;
  if (chunk_.has_text) r_->generated_text += chunk_.text;
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
