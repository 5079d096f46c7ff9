// Learning-rate schedules as functions of the optimizer step. Mirrors transformers
// optimization.py get_constant_schedule(_with_warmup), get_linear_schedule_with_warmup and
// get_cosine_schedule_with_warmup (num_cycles 0.5), which kohya get_scheduler_fix uses.
#pragma once

#include <cstdint>
#include <string>

namespace lf {

struct LRScheduleOptions {
  std::string name = "constant";  // constant | constant_with_warmup | linear | cosine
  double base_lr = 1e-4;
  int64_t warmup_steps = 0;  // W, in optimizer steps
  int64_t total_steps = 0;   // N, total optimizer steps of the run
};

// The LR used for the optimizer step that follows `step` completed steps (s = step >= 0):
//   warmup (all but constant): s < W -> base * s / max(1, W)
//   constant: base; constant_with_warmup: base after warmup
//   linear: base * max(0, (N - s) / max(1, N - W))
//   cosine: base * max(0, 0.5 (1 + cos(pi * 2 * 0.5 * q))), q = (s - W) / max(1, N - W)
// kohya counts W and N in scheduler steps (num_processes per optimizer step); lorafleet counts
// both in optimizer steps. Throws std::invalid_argument for an unknown name, "constant" with
// warmup_steps != 0 (as kohya), or a negative step/warmup/total/base_lr.
double lr_at_step(const LRScheduleOptions& options, int64_t step);

}  // namespace lf
