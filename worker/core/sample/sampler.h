// The denoising loops of kohya sd-scripts' sample images (train_util.sample_image_inference
// through its pipeline: latents x init_noise_sigma, then per timestep scale_model_input, the
// model, classifier-free guidance, scheduler.step), one per sampler of sigma_schedule.h, each
// step as the diffusers scheduler's step() computes it, in float32.
#pragma once

#include <functional>

#include <torch/types.h>  // torch::Tensor

#include "sample/sigma_schedule.h"

namespace lf {

struct SamplerSpec {
  SamplerKind kind = SamplerKind::kDdim;
  int steps = 30;              // kohya's default sample_steps (--s)
  bool karras_sigmas = false;  // diffusers use_karras_sigmas
  bool v_prediction = false;   // the model predicts v (model.v_parameterization)
};

// The guided model: the scaled input [B, 4, h, w] float32 at `timestep` (fractional for the
// k-diffusion samplers) -> the prediction (noise, or v), same shape, float32.
using GuidedModel = std::function<torch::Tensor(const torch::Tensor& input, double timestep)>;
// A standard-normal draw shaped like the latent, for euler_a's ancestral noise (in diffusers,
// randn_tensor from the pipeline's generator at each step).
using AncestralNoise = std::function<torch::Tensor()>;

// Runs the sampler from `noise` [B, 4, h, w] (standard normal; scaled by init_noise_sigma here)
// and returns the final latent, float32. `alphas_cumprod` [1000] (DDPMNoiseSchedule).
// ancestral_noise is called once per step by euler_a only (may be empty otherwise). Throws
// std::invalid_argument as sigma_schedule does, or when euler_a has no ancestral_noise.
torch::Tensor run_sampler(const SamplerSpec& spec, const torch::Tensor& alphas_cumprod,
                          const torch::Tensor& noise, const GuidedModel& model,
                          const AncestralNoise& ancestral_noise);

}  // namespace lf
