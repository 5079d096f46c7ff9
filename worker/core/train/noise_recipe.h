// kohya's noise and timestep options for one training batch: noise offset (with random strength
// and the adaptive scale), multi-resolution (pyramid) noise, input perturbation (ip) noise and
// the timestep range. Mirrors kohya sd-scripts train_util.get_noise_noisy_latents_and_timesteps
// and custom_train_functions.apply_noise_offset / pyramid_noise_like; every random number comes
// from the caller's generator, in the order written below, never from a global one.
#pragma once

#include <optional>
#include <vector>

#include <ATen/core/Generator.h>
#include <torch/types.h>

namespace lf {

struct NoiseOptions {
  double noise_offset = 0.0;                    // kohya --noise_offset; 0 = off
  bool noise_offset_random_strength = false;    // offset ~ U[0, noise_offset) per batch
  std::optional<double> adaptive_noise_scale;   // kohya --adaptive_noise_scale
  int multires_noise_iterations = 0;            // kohya --multires_noise_iterations; 0 = off
  double multires_noise_discount = 0.3;         // kohya --multires_noise_discount
  double ip_noise_gamma = 0.0;                  // kohya --ip_noise_gamma; 0 = off
  bool ip_noise_gamma_random_strength = false;  // gamma ~ U[0, ip_noise_gamma) per batch
  int64_t min_timestep = 0;                     // kohya --min_timestep: t ~ U{min, max - 1}
  int64_t max_timestep = 1000;                  // kohya --max_timestep
};

// What one batch draws: the UNet's target noise, the timesteps, and the noise the input is
// noised with (the target noise plus the ip perturbation; the same tensor without it).
struct NoiseDraw {
  torch::Tensor noise;        // [B, C, h, w] float32 CPU
  torch::Tensor timesteps;    // [B] int64 CPU, in [min_timestep, max_timestep)
  torch::Tensor input_noise;  // [B, C, h, w] float32 CPU
};

// Draws, on `generator`, in this order: noise ~ N(0, 1) like latents; with noise_offset the
// strength (U[0, 1) * offset when random) and the offset noise [B, C, 1, 1]; with multires the
// pyramid draws (per level: r ~ U[2, 4), then the level's noise); the timesteps
// U{min_timestep, max_timestep - 1} [B] (no draw when they are equal); with ip_noise_gamma the
// strength (when random) and the perturbation like latents. `latents` [B, C, h, w] (any device; the
// mean for the adaptive scale is taken in float32 on the CPU). With every option off it draws what
// the plain step always drew: the noise, then the timesteps.
NoiseDraw draw_noise(const NoiseOptions& options, const torch::Tensor& latents,
                     at::Generator& generator);

// kohya apply_noise_offset with its random draw given: noise + offset * offset_noise, where
// offset is `offset` or, with `adaptive_noise_scale`, clamp(offset + scale * |mean_hw(latents)|,
// 0) per sample and channel. latents, noise [B, C, h, w]; offset_noise [B, C, 1, 1].
torch::Tensor apply_noise_offset(const torch::Tensor& latents, const torch::Tensor& noise,
                                 double offset, std::optional<double> adaptive_noise_scale,
                                 const torch::Tensor& offset_noise);

// kohya pyramid_noise_like with its random draws given: for level i (i < levels.size()), noise +=
// bilinear_upsample(levels[i].draw to [h, w]) * discount^i, where levels[i].draw is
// [B, C, max(1, int(h / r_i^i)), max(1, int(w / r_i^i))]; the result divided by its std (unbiased,
// over every element). pyramid_level_size gives the draw's size for r and i.
struct PyramidLevel {
  double r = 2.0;
  torch::Tensor draw;
};
torch::Tensor pyramid_noise(const torch::Tensor& noise, double discount,
                            const std::vector<PyramidLevel>& levels);
std::pair<int64_t, int64_t> pyramid_level_size(int64_t h, int64_t w, double r, int level);

}  // namespace lf
