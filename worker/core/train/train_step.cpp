// The shared loss of one (micro-)batch: kohya's noise / timestep draws, the
// DDPM forward process, the UNet call and the weighted per-sample MSE sum.
#include "train/train_step.h"

#include <stdexcept>

#include <torch/torch.h>

#include "train/loss.h"

namespace lf {

torch::Tensor compute_loss_sum(UNetModel& unet, const DDPMNoiseSchedule& schedule,
                               const StepInputs& inputs, at::Generator& generator,
                               const DiffusionRecipe& recipe) {
  const torch::Tensor& latents = inputs.latents;
  if (!latents.defined() || latents.dim() != 4 || latents.size(0) == 0) {
    throw std::invalid_argument("compute_loss_sum: latents must be [B, C, h, w] with B >= 1");
  }
  const int64_t b = latents.size(0);
  if (!inputs.context.defined() || inputs.context.size(0) != b || !inputs.loss_weights.defined() ||
      inputs.loss_weights.dim() != 1 || inputs.loss_weights.size(0) != b) {
    throw std::invalid_argument("compute_loss_sum: context and loss_weights must have batch " +
                                std::to_string(b));
  }
  const NoiseDraw d = draw_noise(recipe.noise, latents, generator);
  const torch::Tensor& t_cpu = d.timesteps;
  torch::Tensor noise = d.noise.to(latents.device(), latents.scalar_type());
  torch::Tensor input_noise = d.input_noise.to(latents.device(), latents.scalar_type());
  torch::Tensor timesteps = t_cpu.to(latents.device());

  torch::Tensor noisy = schedule.add_noise(latents, input_noise, t_cpu);
  torch::Tensor pred = unet->forward(noisy, timesteps, inputs.context, inputs.vector_cond);
  const LossOptions& lo = recipe.loss;
  torch::Tensor target = lo.v_parameterization ? schedule.velocity(latents, noise, t_cpu) : noise;
  const torch::Tensor huber_c = huber_threshold(lo, t_cpu, schedule.alphas_cumprod());
  torch::Tensor per_sample = per_sample_loss(pred, target, inputs.loss_mask, lo.loss_type, huber_c);
  per_sample = per_sample * inputs.loss_weights.to(per_sample.device(), torch::kFloat32);
  return post_process_loss(per_sample, t_cpu, schedule.snr(), lo).sum();
}

}  // namespace lf
