// vLLM's --scheduling-policy: the order waiting requests are admitted in, and which running request
// gives up its KV blocks when memory runs out.
//   fcfs:     arrival order; the newest running request is preempted.
//   priority: by (priority, arrival) (lower value first); the running request with the largest
//             (priority, arrival) is preempted, never one more important than the request that needs room.
#pragma once
#include <string>

#include "engine/request.h"

namespace vireo {

enum class SchedulingPolicy { kFcfs, kPriority };

// "fcfs" | "priority"; throws vireo::Error naming --scheduling-policy otherwise.
SchedulingPolicy parse_scheduling_policy(const std::string& name);

// The priority policy's order: lower params.priority first, then earlier arrival_time, then the order
// the scheduler received them (arrival_seq), so no two requests tie.
bool comes_before(const Request& a, const Request& b);

}  // namespace vireo
