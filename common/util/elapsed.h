// Elapsed time on the monotonic clock, for the durations logs and metrics report (step time,
// data wait, cache fill).
#pragma once

#include <chrono>

namespace lf {

using SteadyClock = std::chrono::steady_clock;

// Seconds from `start` until now.
inline double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

}  // namespace lf
