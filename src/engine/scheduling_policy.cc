#include "engine/scheduling_policy.h"

#include <tuple>

#include "core/error.h"

namespace vireo {

SchedulingPolicy parse_scheduling_policy(const std::string& name) {
  if (name == "fcfs") return SchedulingPolicy::kFcfs;
  if (name == "priority") return SchedulingPolicy::kPriority;
  throw Error("--scheduling-policy '" + name + "': expected fcfs or priority");
}

bool comes_before(const Request& a, const Request& b) {
  return std::tie(a.params.priority, a.arrival_time, a.arrival_seq) <
         std::tie(b.params.priority, b.arrival_time, b.arrival_seq);
}

}  // namespace vireo
