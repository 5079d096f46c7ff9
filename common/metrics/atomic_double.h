// Lock-free add on std::atomic<double> (fetch_add for floating types is C++20; this is the
// compare-exchange loop prometheus-cpp uses in Gauge::Change). Header-only helper.
#pragma once

#include <atomic>

namespace lf {
namespace metrics {

inline void AtomicAdd(std::atomic<double>& target, double delta) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + delta, std::memory_order_relaxed)) {
  }
}

}  // namespace metrics
}  // namespace lf
