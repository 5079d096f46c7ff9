// The timesteps and noise levels of the image samplers kohya sd-scripts offers for sample images
// (train_util.get_my_scheduler: --sample_sampler), each as the diffusers scheduler kohya builds
// for it computes them in set_timesteps: num_train_timesteps 1000 on the training's
// scaled_linear betas, otherwise diffusers' defaults.
//   ddim         DDIMScheduler                "leading" spacing, set_alpha_to_one, clip_sample
//   euler        EulerDiscreteScheduler       "linspace" spacing, sigmas to 0
//   euler_a      EulerAncestralDiscreteScheduler
//   dpmsolver++  DPMSolverMultistepScheduler  algorithm_type dpmsolver++, order 2, midpoint
//   k_dpm_2      KDPM2DiscreteScheduler       sigmas and log-interpolated midpoints
// Karras sigmas (Karras et al. 2022, eq. 5, rho 7; diffusers use_karras_sigmas) apply to euler,
// dpmsolver++ and k_dpm_2.
#pragma once

#include <string>
#include <vector>

#include <torch/types.h>  // torch::Tensor

namespace lf {

enum class SamplerKind { kDdim, kEuler, kEulerAncestral, kDpmSolverPlusPlus, kKDpm2 };

// kohya's --sample_sampler spellings lorafleet accepts: ddim, euler, k_euler, euler_a,
// k_euler_a, dpmsolver++, k_dpm_2, dpm_2.
const std::vector<std::string>& sampler_names();
// Throws std::invalid_argument "unknown sampler '<name>' (expected one of: ...)".
SamplerKind sampler_kind(const std::string& name);
// Whether use_karras_sigmas exists for the kind (euler, dpmsolver++, k_dpm_2).
bool sampler_takes_karras_sigmas(SamplerKind kind);

struct SigmaSchedule {
  // diffusers scheduler.timesteps: the timestep of each model call, in call order (KDPM2
  // interleaves its midpoints: 2 x steps - 1 calls).
  std::vector<double> timesteps;
  // scheduler.sigmas (float32 values, the trailing 0 included); empty for DDIM.
  std::vector<float> sigmas;
  std::vector<float> sigmas_interpol;  // KDPM2 only
  double init_noise_sigma = 1.0;       // the initial latent is noise x init_noise_sigma
};

// `alphas_cumprod` [1000] float32 (DDPMNoiseSchedule). Throws std::invalid_argument for
// steps < 1 or Karras sigmas on a sampler without them.
SigmaSchedule sigma_schedule(SamplerKind kind, int steps, bool karras_sigmas,
                             const torch::Tensor& alphas_cumprod);

}  // namespace lf
