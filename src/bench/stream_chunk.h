// What one OpenAI streaming payload ("data: {...}") says, for `bench serve`. The load generator parses
// every chunk of every request on its one thread, so the common case goes through a small validating
// JSON scanner that allocates nothing once its buffers are warm; anything it is not sure about (an
// "error" member, escaped keys, very deep nesting, JSON it does not accept) goes to nlohmann::json,
// whose answer is the reference.
#pragma once
#include <string>
#include <string_view>

namespace vireo::bench {

enum class Backend { kCompletions, kChat };

struct StreamChunk {
  enum class Kind { kData, kError, kMalformed };
  Kind kind = Kind::kData;
  std::string error;        // kError: the error member (as vLLM reports it); kMalformed: empty
  bool has_tokens = false;  // usage.completion_tokens, an integer
  int tokens = 0;
  bool has_choices = false; // choices is a non-empty array (vllm bench serve times these chunks)
  bool has_text = false;    // choices[0].text (completions) or choices[0].delta.content /
  std::string text;         // .reasoning_content (chat), a string
  // Scratch for the chat fields (kept to reuse their capacity).
  std::string content_, reasoning_;
};

// The fast path; false = undecided (use parse_stream_chunk_json). Fills `out` (reusing its buffers).
bool parse_stream_chunk_fast(std::string_view payload, Backend backend, StreamChunk& out);
// The reference, with nlohmann::json.
void parse_stream_chunk_json(std::string_view payload, Backend backend, StreamChunk& out);
// Fast path, then the reference when it is undecided.
inline void parse_stream_chunk(std::string_view payload, Backend backend, StreamChunk& out) {
  if (!parse_stream_chunk_fast(payload, backend, out)) parse_stream_chunk_json(payload, backend, out);
}

}  // namespace vireo::bench
