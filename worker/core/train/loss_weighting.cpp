// kohya's Huber thresholds and loss weightings (see header).
#include "train/loss_weighting.h"

#include <cmath>
#include <stdexcept>

#include <torch/torch.h>

namespace lf {
namespace {

// kohya get_snr_scale: snr' / (snr' + 1), snr' = min(snr_t, 1000) (snr is inf at t = 0).
torch::Tensor snr_scale(const torch::Tensor& snr_t) {
  const torch::Tensor s = torch::minimum(snr_t, torch::full_like(snr_t, 1000.0));
  return s / (s + 1.0);
}

}  // namespace

torch::Tensor huber_threshold(const LossOptions& o, const torch::Tensor& timesteps,
                              const torch::Tensor& alphas_cumprod) {
  if (o.loss_type != "huber" && o.loss_type != "smooth_l1") return {};
  const int64_t b = timesteps.size(0);
  if (o.huber_schedule == "constant") {
    return torch::full({b}, o.huber_c * o.huber_scale, torch::dtype(torch::kFloat32));
  }
  if (o.huber_schedule == "exponential") {
    const double alpha = -std::log(o.huber_c) / static_cast<double>(alphas_cumprod.size(0));
    return torch::exp(-alpha * timesteps.to(torch::kFloat32)) * o.huber_scale;
  }
  if (o.huber_schedule == "snr") {
    const torch::Tensor a = alphas_cumprod.index_select(0, timesteps);
    const torch::Tensor sigmas = ((1.0 - a) / a).pow(0.5);
    return (1.0 - o.huber_c) / (1.0 + sigmas).pow(2) + o.huber_c;
  }
  throw std::invalid_argument("huber_threshold: unknown huber_schedule \"" + o.huber_schedule +
                              "\" (valid: constant, exponential, snr)");
}

torch::Tensor post_process_loss(const torch::Tensor& per_sample, const torch::Tensor& timesteps,
                                const torch::Tensor& snr, const LossOptions& o) {
  // The plain objective (every step of most runs): nothing to look up.
  if (!o.min_snr_gamma && !o.scale_v_pred_loss_like_noise_pred && !o.v_pred_like_loss &&
      !o.debiased_estimation_loss) {
    return per_sample;
  }
  const torch::Tensor snr_t = snr.index_select(0, timesteps).to(per_sample.device());
  torch::Tensor loss = per_sample;
  if (o.min_snr_gamma) {  // kohya apply_snr_weight
    const torch::Tensor capped = torch::minimum(snr_t, torch::full_like(snr_t, *o.min_snr_gamma));
    loss = loss * (o.v_parameterization ? capped / (snr_t + 1.0) : capped / snr_t);
  }
  if (o.scale_v_pred_loss_like_noise_pred) loss = loss * snr_scale(snr_t);
  if (o.v_pred_like_loss) loss = loss + loss / snr_scale(snr_t) * *o.v_pred_like_loss;
  if (o.debiased_estimation_loss) {  // kohya apply_debiased_estimation (PR #1715 for v)
    const torch::Tensor s = torch::minimum(snr_t, torch::full_like(snr_t, 1000.0));
    loss = loss * (o.v_parameterization ? 1.0 / (s + 1.0) : 1.0 / s.sqrt());
  }
  return loss;
}

}  // namespace lf
