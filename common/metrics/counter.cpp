// Counter (see counter.h).
#include "common/metrics/counter.h"

#include "common/metrics/atomic_double.h"

namespace lf {
namespace metrics {

void Counter::Increment(double value) {
  if (value < 0.0) return;
  AtomicAdd(value_, value);
}

double Counter::Value() const { return value_.load(std::memory_order_relaxed); }

void Counter::AppendSamples(std::string& out, const std::string& name, const Labels& labels) const {
  AppendSample(out, name, labels, FormatValue(Value()));
}

}  // namespace metrics
}  // namespace lf
