// kohya's loss options: the loss type (loss.h computes it) with its per-sample Huber threshold
// schedule, and the per-sample weightings applied after the mean (min-SNR, v-prediction
// scaling, v-prediction-like loss, debiased estimation). Mirrors kohya sd-scripts
// train_util.get_huber_threshold_if_needed and custom_train_functions
// apply_snr_weight, scale_v_prediction_loss_like_noise_prediction, add_v_prediction_like_loss
// and apply_debiased_estimation (with the v-parameterization weight of kohya PR #1715), in
// train_network.py's order.
#pragma once

#include <optional>
#include <string>

#include <torch/types.h>

namespace lf {

struct LossOptions {
  std::string loss_type = "l2";         // l2 | l1 | huber | smooth_l1 (kohya --loss_type)
  std::string huber_schedule = "snr";   // constant | exponential | snr (kohya's default snr)
  double huber_c = 0.1;                 // kohya --huber_c
  double huber_scale = 1.0;             // kohya --huber_scale
  std::optional<double> min_snr_gamma;  // kohya --min_snr_gamma (Hang et al. 2023)
  bool scale_v_pred_loss_like_noise_pred = false;
  std::optional<double> v_pred_like_loss;
  bool debiased_estimation_loss = false;
  bool v_parameterization = false;  // the target is v (changes min-SNR and debiased weights)
};

// Each sample's Huber threshold c [B] float32 for `timesteps` [B] int64 (CPU), or an undefined
// tensor for l2 / l1: constant huber_c * huber_scale; exponential
// exp(-alpha t) * huber_scale with alpha = -ln(huber_c) / T; snr
// (1 - huber_c) / (1 + sigma_t)^2 + huber_c with sigma_t = sqrt((1 - abar_t) / abar_t) (no
// huber_scale, as kohya). `alphas_cumprod` [T] float32.
torch::Tensor huber_threshold(const LossOptions& options, const torch::Tensor& timesteps,
                              const torch::Tensor& alphas_cumprod);

// kohya train_network post_process_loss on the per-sample loss [B] float32, timesteps [B] int64
// (CPU), snr [T] float32 (DDPMNoiseSchedule::snr): min-SNR weight min(snr, gamma) / snr (or
// / (snr + 1) for v), then snr' / (snr' + 1) with snr' = min(snr, 1000), then
// + loss / that scale * v_pred_like_loss, then 1 / sqrt(snr') (or 1 / (snr' + 1) for v).
torch::Tensor post_process_loss(const torch::Tensor& per_sample, const torch::Tensor& timesteps,
                                const torch::Tensor& snr, const LossOptions& options);

}  // namespace lf
