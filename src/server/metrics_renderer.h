// /metrics in the Prometheus text format with vLLM's metric names, so dashboards and
// `vllm bench`-style scrapers work unchanged. Every sample carries model_name.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "engine/engine_stats.h"

namespace vireo::server {

// Requests the server saw finish, by finish reason ("stop", "length", "abort", ...).
using FinishCounts = std::map<std::string, uint64_t>;

std::string render_metrics(const EngineStats& stats, const FinishCounts& finished, const std::string& model_name);

// Prometheus label-value escaping (\\, \", \n) and float formatting ("1.0", "0.25", "+Inf").
std::string escape_label_value(const std::string& v);
std::string prom_number(double v);

}  // namespace vireo::server
