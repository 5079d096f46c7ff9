// Cumulative histogram with fixed upper bounds (mirrors prometheus-cpp
// core/include/prometheus/histogram.h). There are no default buckets. Observe() is lock-free:
// one atomic bucket count plus an atomic sum, so step/allreduce timings can be recorded per step.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/metrics/text_format.h"

namespace lf {
namespace metrics {

class Histogram {
 public:
  using BucketBoundaries = std::vector<double>;

  // `buckets` are the finite upper bounds (le, inclusive), strictly increasing; the +Inf bucket
  // is implicit. Throws std::invalid_argument if they are not strictly increasing or hold NaN.
  explicit Histogram(const BucketBoundaries& buckets);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // Counts `value` in the first bucket whose bound is >= value (NaN lands in +Inf only) and adds
  // it to the sum.
  void Observe(double value);

  const BucketBoundaries& bucket_boundaries() const { return bounds_; }
  // Cumulative counts, one per bound plus the +Inf bucket (whose count equals Count()).
  std::vector<uint64_t> CumulativeCounts() const;
  uint64_t Count() const;
  double Sum() const;

  // Appends name_bucket{...,le="b"} lines in increasing le order ending with le="+Inf", then
  // name_sum and name_count.
  void AppendSamples(std::string& out, const std::string& name, const Labels& labels) const;

 private:
  BucketBoundaries bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // per bucket (not cumulative), bounds+1
  std::atomic<double> sum_{0.0};
};

}  // namespace metrics
}  // namespace lf
