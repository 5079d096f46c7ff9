// The training core's LR schedule (worker/core/train/lr_schedule.h) for a job: the training
// section's kohya keys resolved over the run's total optimizer steps, as kohya sd-scripts'
// get_scheduler_fix passes them to transformers / diffusers.
#pragma once

#include <cstdint>

#include "common/config/job_config.h"
#include "worker/core/train/lr_schedule.h"

namespace lf {

// base_lr 1: lr_at_step then returns the factor each parameter group's lr multiplies. Throws
// ConfigError("training.<key>: ...") where check_lr_schedule finds a problem (the coordinator
// has refused such a job already).
LRScheduleOptions lr_schedule_options(const TrainingSection& t, std::int64_t total_steps);

}  // namespace lf
