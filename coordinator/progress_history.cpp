// ProgressHistory (see header).
#include "coordinator/progress_history.h"

#include <algorithm>

namespace lf {

ProgressHistory::ProgressHistory(std::size_t capacity)
    : capacity_(std::max<std::size_t>(2, capacity)) {}

void ProgressHistory::add(const ProgressPoint& p) {
  // Re-run steps (heartbeat repeats, another rank, a restarted group) replace the old points.
  while (!points_.empty() && points_.back().global_step >= p.global_step) points_.pop_back();
  if (p.global_step % stride_ != 0) return;
  points_.push_back(p);
  if (points_.size() <= capacity_) return;
  stride_ *= 2;
  std::vector<ProgressPoint> kept;
  kept.reserve(capacity_);
  for (const ProgressPoint& q : points_) {
    if (q.global_step % stride_ == 0) kept.push_back(q);
  }
  points_ = std::move(kept);
}

}  // namespace lf
