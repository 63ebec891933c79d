#include "engine/request.h"

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
}

}  // namespace vireo
