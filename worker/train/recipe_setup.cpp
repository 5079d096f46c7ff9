// kohya's objective keys mapped onto the core's recipe (see header).
#include "worker/train/recipe_setup.h"

namespace lf {

DiffusionRecipe diffusion_recipe(const JobConfig& config) {
  const TrainingSection& t = config.training;
  DiffusionRecipe r;
  r.noise.noise_offset = t.noise_offset;
  r.noise.noise_offset_random_strength = t.noise_offset_random_strength;
  r.noise.adaptive_noise_scale = t.adaptive_noise_scale;
  r.noise.multires_noise_iterations = t.multires_noise_iterations;
  r.noise.multires_noise_discount = t.multires_noise_discount;
  r.noise.ip_noise_gamma = t.ip_noise_gamma;
  r.noise.ip_noise_gamma_random_strength = t.ip_noise_gamma_random_strength;
  r.noise.min_timestep = t.min_timestep;
  r.noise.max_timestep = t.max_timestep;
  r.loss.loss_type = t.loss_type;
  r.loss.huber_schedule = t.huber_schedule;
  r.loss.huber_c = t.huber_c;
  r.loss.huber_scale = t.huber_scale;
  // kohya tests these by truthiness: 0 is off.
  if (t.min_snr_gamma.value_or(0) != 0) r.loss.min_snr_gamma = t.min_snr_gamma;
  r.loss.scale_v_pred_loss_like_noise_pred = t.scale_v_pred_loss_like_noise_pred;
  if (t.v_pred_like_loss.value_or(0) != 0) r.loss.v_pred_like_loss = t.v_pred_like_loss;
  r.loss.debiased_estimation_loss = t.debiased_estimation_loss;
  r.loss.v_parameterization = config.model.v_parameterization;
  return r;
}

DDPMNoiseSchedule noise_schedule_for(const JobConfig& config) {
  return DDPMNoiseSchedule(1000, 0.00085, 0.012, config.training.zero_terminal_snr);
}

}  // namespace lf
