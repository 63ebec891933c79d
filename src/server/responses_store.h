// Finished /v1/responses kept in memory, so a later request can continue one with
// previous_response_id (OpenAI stores responses unless `store: false`; vLLM keeps them in memory
// when its store is enabled). An entry holds the whole conversation as Responses input items
// (earlier turns, that request's input, its output), so continuing needs no walk along a chain, and
// `instructions` are not carried over (OpenAI's rule). Bounded by the entries' serialized size: the
// oldest are dropped first. Nothing survives a restart.
#pragma once
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "server/json_fields.h"

namespace vireo::server {

class ResponsesStore {
 public:
  explicit ResponsesStore(size_t max_bytes) : max_bytes_(max_bytes) {}
  bool enabled() const { return max_bytes_ > 0; }
  // `items`: the conversation as input items; `response`: the Response object as sent (GET
  // /v1/responses/{id}). An entry larger than the whole store is not kept.
  void put(const std::string& id, Json items, Json response = nullptr);
  std::optional<Json> get(const std::string& id) const;
  std::optional<Json> get_response(const std::string& id) const;
  size_t num_entries() const;

 private:
  struct Entry {
    Json items;
    Json response;
    size_t bytes = 0;
  };
  const size_t max_bytes_;
  mutable std::mutex mu_;
  size_t bytes_ = 0;
  std::deque<std::string> order_;  // oldest first
  std::unordered_map<std::string, Entry> entries_;
};

// A body's `input` as a list of items (a string is one user message).
Json input_items(const Json& input);

// Resolves previous_response_id against the store: the stored items, then the body's input; the
// field is removed (responses_to_chat_body refuses it). Returns the id, or null when absent.
// 400 when the store is off, 404 (OpenAI's NotFoundError) when the id is unknown or was evicted.
Json continue_previous_response(const ResponsesStore& store, Json& body);

}  // namespace vireo::server
