// Gauge (see gauge.h).
#include "common/metrics/gauge.h"

#include <chrono>

#include "common/metrics/atomic_double.h"

namespace lf {
namespace metrics {

void Gauge::Increment(double value) { AtomicAdd(value_, value); }
void Gauge::Decrement(double value) { AtomicAdd(value_, -value); }
void Gauge::Set(double value) { value_.store(value, std::memory_order_relaxed); }

void Gauge::SetToCurrentTime() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  Set(std::chrono::duration<double>(now).count());
}

double Gauge::Value() const { return value_.load(std::memory_order_relaxed); }

void Gauge::AppendSamples(std::string& out, const std::string& name, const Labels& labels) const {
  AppendSample(out, name, labels, FormatValue(Value()));
}

}  // namespace metrics
}  // namespace lf
