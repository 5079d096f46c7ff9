// The DDPM forward (noising) process used for SD training: scaled_linear betas from 0.00085 to
// 0.012 over 1000 steps and x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps. Mirrors
// diffusers.DDPMScheduler(beta_schedule="scaled_linear").add_noise as kohya sets it up.
#pragma once

#include <cstdint>

#include <torch/types.h>  // torch::Tensor

namespace lf {

class DDPMNoiseSchedule {
 public:
  // betas = linspace(sqrt(beta_start), sqrt(beta_end), T)^2, alphas_cumprod = cumprod(1 - b),
  // computed in float64 and stored as float32 on the CPU (diffusers computes in float32; the
  // values differ by < 1e-7). zero_terminal_snr rescales the betas so that alphas_cumprod ends
  // at 0 and starts where it did (Lin et al. 2023, "Common Diffusion Noise Schedules and Sample
  // Steps are Flawed", algorithm 1; kohya fix_noise_scheduler_betas_for_zero_terminal_snr).
  // Throws std::invalid_argument for T < 2 or betas outside (0, 1).
  explicit DDPMNoiseSchedule(int64_t num_train_timesteps = 1000, double beta_start = 0.00085,
                             double beta_end = 0.012, bool zero_terminal_snr = false);

  int64_t num_train_timesteps() const { return num_train_timesteps_; }
  const torch::Tensor& betas() const { return betas_; }                    // [T] float32
  const torch::Tensor& alphas_cumprod() const { return alphas_cumprod_; }  // [T] float32
  // SNR(t) = abar_t / (1 - abar_t) [T] float32, as kohya prepare_scheduler_for_custom_training
  // computes it from the float32 alphas_cumprod: (sqrt(abar) / sqrt(1 - abar))^2 -- of the
  // schedule before zero_terminal_snr, as kohya takes it before rescaling the betas (the loss
  // weights keep the original SNR; add_noise and the Huber snr schedule use the rescaled one).
  const torch::Tensor& snr() const { return snr_; }

  // x0 [B, ...] (any float dtype/device), noise same shape, timesteps [B] int64 in [0, T):
  // returns sqrt(abar_t) x0 + sqrt(1 - abar_t) noise in x0's dtype, on x0's device.
  // Throws std::invalid_argument on shape mismatch or out-of-range timesteps.
  torch::Tensor add_noise(const torch::Tensor& x0, const torch::Tensor& noise,
                          const torch::Tensor& timesteps) const;

  // The v-prediction target sqrt(abar_t) noise - sqrt(1 - abar_t) x0 (Salimans & Ho; diffusers
  // DDPMScheduler.get_velocity), same arguments, shapes and errors as add_noise.
  torch::Tensor velocity(const torch::Tensor& x0, const torch::Tensor& noise,
                         const torch::Tensor& timesteps) const;

 private:
  int64_t num_train_timesteps_;
  torch::Tensor betas_;
  torch::Tensor alphas_cumprod_;
  torch::Tensor snr_;
  torch::Tensor sqrt_alphas_cumprod_;            // [T] float32, sqrt taken in float64
  torch::Tensor sqrt_one_minus_alphas_cumprod_;  // [T] float32, sqrt taken in float64
};

}  // namespace lf
