// DDPM scaled_linear schedule (diffusers DDPMScheduler) and the forward-process add_noise.
#include "train/noise_schedule.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace lf {

namespace {

// Lin et al. 2023 algorithm 1: sqrt(abar) shifted to end at 0 and scaled to start where it did,
// turned back into betas.
torch::Tensor enforce_zero_terminal_snr(const torch::Tensor& betas) {
  torch::Tensor s = torch::cumprod(1.0 - betas, 0).sqrt();
  const torch::Tensor s0 = s[0].clone();
  const torch::Tensor s_last = s[-1].clone();
  s = (s - s_last) * (s0 / (s0 - s_last));
  const torch::Tensor abar = s.pow(2);
  const torch::Tensor alphas =
      torch::cat({abar.slice(0, 0, 1), abar.slice(0, 1) / abar.slice(0, 0, -1)});
  return 1.0 - alphas;
}

}  // namespace

DDPMNoiseSchedule::DDPMNoiseSchedule(int64_t num_train_timesteps, double beta_start,
                                     double beta_end, bool zero_terminal_snr)
    : num_train_timesteps_(num_train_timesteps) {
  if (num_train_timesteps < 2 || !(beta_start > 0) || !(beta_end < 1) ||
      !(beta_start <= beta_end)) {
    throw std::invalid_argument(
        "DDPMNoiseSchedule: need T >= 2 and 0 < beta_start <= "
        "beta_end < 1");
  }
  const auto f64 = torch::dtype(torch::kFloat64);
  torch::Tensor betas =
      torch::linspace(std::sqrt(beta_start), std::sqrt(beta_end), num_train_timesteps, f64).pow(2);
  // kohya train_network.py computes all_snr (prepare_scheduler_for_custom_training) before
  // fix_noise_scheduler_betas_for_zero_terminal_snr: the SNR weights keep the original schedule.
  const torch::Tensor original_abar = torch::cumprod(1.0 - betas, 0).to(torch::kFloat32);
  snr_ = (original_abar.sqrt() / (1.0 - original_abar).sqrt()).pow(2);
  if (zero_terminal_snr) betas = enforce_zero_terminal_snr(betas);
  torch::Tensor abar = torch::cumprod(1.0 - betas, /*dim=*/0);
  betas_ = betas.to(torch::kFloat32);
  alphas_cumprod_ = abar.to(torch::kFloat32);
  sqrt_alphas_cumprod_ = abar.sqrt().to(torch::kFloat32);
  sqrt_one_minus_alphas_cumprod_ = (1.0 - abar).sqrt().to(torch::kFloat32);
}

namespace {

// The per-sample coefficients sqrt(abar_t) and sqrt(1 - abar_t), shaped [B, 1, ...] to broadcast
// over x0, in x0's dtype and device. Throws std::invalid_argument (prefixed by `who`) on bad
// shapes or out-of-range timesteps.
std::pair<torch::Tensor, torch::Tensor> coefficients(const char* who, const torch::Tensor& sqrt_a,
                                                     const torch::Tensor& sqrt_1ma,
                                                     int64_t num_train_timesteps,
                                                     const torch::Tensor& x0,
                                                     const torch::Tensor& noise,
                                                     const torch::Tensor& timesteps) {
  if (x0.sizes() != noise.sizes() || timesteps.dim() != 1 || x0.dim() < 1 ||
      timesteps.size(0) != x0.size(0)) {
    throw std::invalid_argument(std::string(who) +
                                ": need x0 and noise of equal shape [B, ...] and timesteps [B]");
  }
  torch::Tensor t = timesteps.to(torch::kCPU, torch::kInt64);
  if (t.numel() > 0 &&
      (t.min().item<int64_t>() < 0 || t.max().item<int64_t>() >= num_train_timesteps)) {
    throw std::invalid_argument(std::string(who) + ": timesteps must be in [0, " +
                                std::to_string(num_train_timesteps) + ")");
  }
  std::vector<int64_t> shape(x0.dim(), 1);
  shape[0] = x0.size(0);
  const auto opts = torch::TensorOptions().device(x0.device()).dtype(x0.scalar_type());
  return {sqrt_a.index_select(0, t).view(shape).to(opts),
          sqrt_1ma.index_select(0, t).view(shape).to(opts)};
}

}  // namespace

torch::Tensor DDPMNoiseSchedule::add_noise(const torch::Tensor& x0, const torch::Tensor& noise,
                                           const torch::Tensor& timesteps) const {
  auto [a, s] = coefficients("DDPMNoiseSchedule::add_noise", sqrt_alphas_cumprod_,
                             sqrt_one_minus_alphas_cumprod_, num_train_timesteps_, x0, noise,
                             timesteps);
  return a * x0 + s * noise;
}

torch::Tensor DDPMNoiseSchedule::velocity(const torch::Tensor& x0, const torch::Tensor& noise,
                                          const torch::Tensor& timesteps) const {
  auto [a, s] = coefficients("DDPMNoiseSchedule::velocity", sqrt_alphas_cumprod_,
                             sqrt_one_minus_alphas_cumprod_, num_train_timesteps_, x0, noise,
                             timesteps);
  return a * noise - s * x0;
}

}  // namespace lf
