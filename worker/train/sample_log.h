// The per-sample audit trail of --sample-log PATH (env LF_SAMPLE_LOG): each rank appends one
// JSON object per trained sample to PATH.rank<r>.jsonl, so a user or a test can check which
// samples an epoch trained, on which rank, at which step and learning rate.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include "common/data/epoch_plan.h"

namespace lf {

class SampleLog {
 public:
  // path "" disables the log. Opens PATH.rank<rank>.jsonl for appending (created if missing).
  // Throws std::runtime_error naming the file when it cannot be opened.
  SampleLog(const std::string& path, int rank);

  bool enabled() const { return out_.is_open(); }

  // One line {"global_step","epoch","batch","rank","image_index","flip","crop_left",
  // "crop_top","lr"}: global_step is the 1-based number of the optimizer step that trains the
  // sample (completed steps + 1), epoch 0-based, batch the global batch's index in the epoch's
  // plan, lr the learning rate the step applies (the reported group's). No-op when disabled.
  void write(std::int64_t global_step, int epoch, std::int64_t batch, const PlanSample& sample,
             double lr);
  // Flushes what was written (once per step: a crash loses at most the current step's lines).
  void flush();

 private:
  int rank_ = 0;
  std::string file_;
  std::ofstream out_;
};

}  // namespace lf
