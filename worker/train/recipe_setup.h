// The training core's diffusion objective for a job: kohya's noise, timestep and loss keys of
// the training section (and model.v_parameterization) as the core's DiffusionRecipe, and the
// DDPM schedule with kohya's zero_terminal_snr.
#pragma once

#include "common/config/job_config.h"
#include "worker/core/train/noise_schedule.h"
#include "worker/core/train/train_step.h"

namespace lf {

DiffusionRecipe diffusion_recipe(const JobConfig& config);
DDPMNoiseSchedule noise_schedule_for(const JobConfig& config);

}  // namespace lf
