// LatencyStats: raw samples kept per method (a 512-rank run records well under a million).
#include "bench/coordinator_load/latency_stats.h"

#include <algorithm>
#include <cmath>

namespace lf::load {

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  // Nearest rank: the smallest value with at least q% of the values at or below it.
  const auto rank = static_cast<std::size_t>(std::ceil(q / 100.0 * values.size()));
  return values[std::min(values.size(), std::max<std::size_t>(rank, 1)) - 1];
}

void LatencyStats::add(const std::string& method, double ms, bool ok) {
  ms_[method].push_back(ms);
  if (!ok) ++failed_[method];
}

std::map<std::string, LatencySummary> LatencyStats::summary() const {
  std::map<std::string, LatencySummary> out;
  for (const auto& [method, values] : ms_) {
    LatencySummary& s = out[method];
    s.calls = static_cast<std::int64_t>(values.size());
    const auto f = failed_.find(method);
    s.failed = f == failed_.end() ? 0 : f->second;
    s.p50_ms = percentile(values, 50);
    s.p90_ms = percentile(values, 90);
    s.p99_ms = percentile(values, 99);
    s.max_ms = *std::max_element(values.begin(), values.end());
  }
  return out;
}

std::int64_t LatencyStats::failed() const {
  std::int64_t n = 0;
  for (const auto& [method, count] : failed_) n += count;
  return n;
}

}  // namespace lf::load
