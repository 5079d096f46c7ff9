// Monotonic counter (mirrors prometheus-cpp core/include/prometheus/counter.h). Lock-free: one
// atomic double, safe to bump from the training hot loop. Name it *_total (promtool lint).
#pragma once

#include <atomic>
#include <string>

#include "common/metrics/text_format.h"

namespace lf {
namespace metrics {

class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // Adds `value` (default 1). Negative values are ignored, as in prometheus-cpp.
  void Increment(double value = 1.0);
  double Value() const;

  // Appends this counter's sample line for the text format.
  void AppendSamples(std::string& out, const std::string& name, const Labels& labels) const;

 private:
  std::atomic<double> value_{0.0};
};

}  // namespace metrics
}  // namespace lf
