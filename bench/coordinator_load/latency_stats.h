// Latencies of RPCs by method, summarised as nearest-rank percentiles (p50, p90, p99, max) in
// milliseconds, with counts of calls and failed calls. Not thread-safe: the load generator
// records from its one event-loop thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lf::load {

struct LatencySummary {
  std::int64_t calls = 0;
  std::int64_t failed = 0;  // answered with a status other than OK
  double p50_ms = 0.0;
  double p90_ms = 0.0;
  double p99_ms = 0.0;
  double max_ms = 0.0;
};

// The nearest-rank percentile q (0 < q <= 100) of `values` (sorted here); 0 when empty.
double percentile(std::vector<double> values, double q);

class LatencyStats {
 public:
  // One call of `method` that took `ms` milliseconds from send to answer.
  void add(const std::string& method, double ms, bool ok);
  // Every method seen, by name.
  std::map<std::string, LatencySummary> summary() const;
  std::int64_t failed() const;  // over all methods

 private:
  std::map<std::string, std::vector<double>> ms_;
  std::map<std::string, std::int64_t> failed_;
};

}  // namespace lf::load
