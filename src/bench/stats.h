// Summary statistics with numpy's semantics, so our numbers match `vllm bench serve`'s:
// percentile = numpy.percentile (linear interpolation), std = population std (ddof=0).
// All functions return 0 for an empty sample (vLLM computes np.mean(xs or 0)).
#pragma once
#include <vector>

namespace vireo::bench {

double mean(const std::vector<double>& xs);
double stddev(const std::vector<double>& xs);  // population (ddof = 0)
double median(const std::vector<double>& xs);
// p in [0, 100]; linear interpolation between closest ranks: rank = p/100 * (n - 1).
double percentile(std::vector<double> xs, double p);

}  // namespace vireo::bench
