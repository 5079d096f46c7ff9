// One training step's loss (epsilon or v prediction), shared by the worker and the GPU
// benchmark: draw noise and timesteps, noise the latents, run the UNet, kohya's per-sample loss
// and weightings. Mirrors kohya train_network.py process_batch /
// train_util.get_noise_noisy_latents_and_timesteps with the recipe's noise and loss options.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "model/unet.h"
#include "train/loss_weighting.h"
#include "train/noise_recipe.h"
#include "train/noise_schedule.h"

namespace lf {

struct StepInputs {
  torch::Tensor latents;       // [B, 4, h, w], already multiplied by the VAE scale_factor
  // [B, L, context_dim] text-encoder hidden states (L = 77; 152 or 227 for kohya's long captions)
  torch::Tensor context;
  // SDXL's vector conditioning y [B, adm_in_channels] (pooled text embedding and size/crop
  // embeddings, sdxl_vector_conditioning); undefined for SD 1.x/2.x.
  torch::Tensor vector_cond;
  torch::Tensor loss_weights;  // [B] per-sample weights (prior_loss_weight for reg images)
  torch::Tensor loss_mask;     // [B, 1, h, w] in [0, 1] (alpha_mask), or undefined for none
};

// kohya's training objective options: how the noise and timesteps are drawn, and the loss.
struct DiffusionRecipe {
  NoiseOptions noise;
  LossOptions loss;  // loss.v_parameterization: kohya --v_parameterization
};

// Draws the batch's noise and timesteps on the CPU `generator` (draw_noise: with the default
// recipe, noise ~ N(0, 1) [B, 4, h, w] float32 and then timesteps ~ U{0, T - 1} [B]), moves them
// to the latents' device (noise cast to the latents' dtype), computes
// x_t = add_noise(latents, input_noise, t), pred = unet(x_t, t, context, y) and returns
// sum_b post_process_loss(per_sample_loss(pred, target) * loss_weights)[b], target = noise, or
// the velocity with v_parameterization, as a 0-dim float32 tensor on the latents' device
// (differentiable w.r.t. the LoRA parameters). The caller divides by the global batch size and
// calls backward(). B must be >= 1: a rank with no samples must skip the call (and contribute
// zero gradients to the all-reduce) itself. Seed `generator` with
// make_cpu_generator(mix_seed(seed, rank, global_step)) for reproducible runs.
// Throws std::invalid_argument for B == 0 or inconsistent batch sizes.
torch::Tensor compute_loss_sum(UNetModel& unet, const DDPMNoiseSchedule& schedule,
                               const StepInputs& inputs, at::Generator& generator,
                               const DiffusionRecipe& recipe = {});

}  // namespace lf
