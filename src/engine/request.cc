#include "engine/request.h"

#include <algorithm>

namespace vireo {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: break;
  }
  return "";
}

Request::Request(std::string id, std::vector<int32_t> prompt, SamplingParams sp, double arrival)
    : request_id(std::move(id)),
      prompt_token_ids(std::move(prompt)),
      params(std::move(sp)),
      arrival_time(arrival) {
  all_token_ids = prompt_token_ids;
  if (params.seed) generator.emplace(*params.seed);
  if (params.grammar_start_token)
    grammar_active = std::find(prompt_token_ids.begin(), prompt_token_ids.end(), *params.grammar_start_token) !=
                     prompt_token_ids.end();
}

}  // namespace vireo
