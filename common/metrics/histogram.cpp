// Histogram (see histogram.h).
#include "common/metrics/histogram.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/metrics/atomic_double.h"

namespace lf {
namespace metrics {

Histogram::Histogram(const BucketBoundaries& buckets) : bounds_(buckets) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (std::isnan(bounds_[i]) || (i > 0 && !(bounds_[i - 1] < bounds_[i]))) {
      throw std::invalid_argument(
          "Histogram: bucket boundaries must be strictly increasing and "
          "not NaN (bound " +
          std::to_string(i) + " is " + FormatValue(bounds_[i]) + ")");
    }
  }
  // A trailing +Inf bound is the implicit last bucket already.
  if (!bounds_.empty() && std::isinf(bounds_.back()) && bounds_.back() > 0) bounds_.pop_back();
  counts_.reset(new std::atomic<uint64_t>[bounds_.size() + 1]);
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  size_t bucket = bounds_.size();
  if (!std::isnan(value)) {
    bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                 bounds_.begin());
  }
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, value);
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    out[i] = running;
  }
  return out;
}

uint64_t Histogram::Count() const { return CumulativeCounts().back(); }

double Histogram::Sum() const { return sum_.load(std::memory_order_relaxed); }

void Histogram::AppendSamples(std::string& out, const std::string& name,
                              const Labels& labels) const {
  const std::vector<uint64_t> cumulative = CumulativeCounts();
  const std::string bucket_name = name + "_bucket";
  for (size_t i = 0; i < bounds_.size(); ++i) {
    AppendSample(out, bucket_name, labels, std::to_string(cumulative[i]), "le",
                 FormatValue(bounds_[i]));
  }
  AppendSample(out, bucket_name, labels, std::to_string(cumulative.back()), "le", "+Inf");
  AppendSample(out, name + "_sum", labels, FormatValue(Sum()));
  AppendSample(out, name + "_count", labels, std::to_string(cumulative.back()));
}

}  // namespace metrics
}  // namespace lf
