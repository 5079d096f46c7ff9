// Gauge: a value that goes up and down (mirrors prometheus-cpp core/include/prometheus/gauge.h).
// Lock-free atomic double; used for loss, learning rate, world size, heartbeat ages.
#pragma once

#include <atomic>
#include <string>

#include "common/metrics/text_format.h"

namespace lf {
namespace metrics {

class Gauge {
 public:
  Gauge() = default;
  explicit Gauge(double value) : value_(value) {}
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Increment(double value = 1.0);
  void Decrement(double value = 1.0);
  void Set(double value);
  // Sets the gauge to the current Unix time in seconds (with sub-second fraction).
  void SetToCurrentTime();
  double Value() const;

  void AppendSamples(std::string& out, const std::string& name, const Labels& labels) const;

 private:
  std::atomic<double> value_{0.0};
};

}  // namespace metrics
}  // namespace lf
