#include "server/responses_store.h"

#include "server/openai_errors.h"

namespace vireo::server {

void ResponsesStore::put(const std::string& id, Json items, Json response) {
  const size_t bytes = dump_json(items).size() + dump_json(response).size();
  if (bytes > max_bytes_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.count(id)) return;  // ids are unique; never replace
  while (bytes_ + bytes > max_bytes_ && !order_.empty()) {
    auto it = entries_.find(order_.front());
    bytes_ -= it->second.bytes;
    entries_.erase(it);
    order_.pop_front();
  }
  entries_[id] = {std::move(items), std::move(response), bytes};
  order_.push_back(id);
  bytes_ += bytes;
}

std::optional<Json> ResponsesStore::get(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second.items;
}

std::optional<Json> ResponsesStore::get_response(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.response.is_null()) return std::nullopt;
  return it->second.response;
}

size_t ResponsesStore::num_entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

Json input_items(const Json& input) {
  if (input.is_string()) return Json::array({{{"type", "message"}, {"role", "user"}, {"content", input}}});
  return input;  // a list (checked when translated), or null
}

Json continue_previous_response(const ResponsesStore& store, Json& body) {
  auto id = get_string(body, "previous_response_id");
  if (!id) return nullptr;
  if (!store.enabled())
    throw bad_request("previous_response_id is not supported: this server does not store responses (--responses-store-bytes 0)",
                      "previous_response_id");
  std::optional<Json> items = store.get(*id);
  if (!items) throw ApiError(404, "NotFoundError", "Response with id '" + *id + "' not found.", "previous_response_id");
  Json input = input_items(body.value("input", Json()));
  if (input.is_array())
    for (auto& item : input) items->push_back(std::move(item));
  else if (!input.is_null())
    throw bad_request("'input' must be a string or a list of input items", "input");
  body["input"] = std::move(*items);
  body.erase("previous_response_id");
  return *id;
}

}  // namespace vireo::server
