// ProgressHistory: the coordinator's bounded record of the job's curves (loss and learning rate
// by global_step) for the status page and `lorafleet-ctl status`. It keeps at most `capacity`
// points: when full, every second point is dropped and from then on only every second step is
// kept (and so on), so the whole run stays covered evenly in O(capacity) memory, as
// TensorBoard's reservoir keeps a bounded but run-wide sample. Not thread-safe (the service
// holds its mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lf {

struct ProgressPoint {
  std::int64_t global_step = 0;
  double loss = 0.0;
  double learning_rate = 0.0;
};

class ProgressHistory {
 public:
  // capacity >= 2 (smaller values are raised to 2).
  explicit ProgressHistory(std::size_t capacity = 512);

  // Records the point of a step (the service feeds it rank 0's reports). A step at or before
  // the last recorded one (a report repeated by the heartbeat, a restarted group re-running
  // steps after its checkpoint) replaces the points from that step on, so the curve shows the
  // run that counts.
  void add(const ProgressPoint& p);
  const std::vector<ProgressPoint>& points() const { return points_; }
  // Steps between kept points now (1, 2, 4, ...).
  std::int64_t stride() const { return stride_; }

 private:
  std::size_t capacity_;
  std::int64_t stride_ = 1;
  std::vector<ProgressPoint> points_;
};

}  // namespace lf
