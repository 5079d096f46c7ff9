// kohya's noise options, drawn from the step's generator (see header).
#include "train/noise_recipe.h"

#include <cmath>
#include <stdexcept>

#include <torch/torch.h>

namespace lf {
namespace {

const auto kCpuF32 = torch::dtype(torch::kFloat32);

// U[0, 1) as one float32 draw, as torch.rand(1).
double uniform(at::Generator& g) { return torch::rand({1}, g, kCpuF32).item<double>(); }

}  // namespace

std::pair<int64_t, int64_t> pyramid_level_size(int64_t h, int64_t w, double r, int level) {
  const double scale = std::pow(r, level);
  return {std::max<int64_t>(1, static_cast<int64_t>(h / scale)),
          std::max<int64_t>(1, static_cast<int64_t>(w / scale))};
}

torch::Tensor apply_noise_offset(const torch::Tensor& latents, const torch::Tensor& noise,
                                 double offset, std::optional<double> adaptive_noise_scale,
                                 const torch::Tensor& offset_noise) {
  if (!adaptive_noise_scale) return noise + offset * offset_noise;
  torch::Tensor mean = latents.to(torch::kCPU, torch::kFloat32).mean({2, 3}, true).abs();
  torch::Tensor per_channel = (offset + *adaptive_noise_scale * mean).clamp_min(0.0);
  return noise + per_channel * offset_noise;
}

torch::Tensor pyramid_noise(const torch::Tensor& noise, double discount,
                            const std::vector<PyramidLevel>& levels) {
  if (noise.dim() != 4) throw std::invalid_argument("pyramid_noise: noise must be [B, C, h, w]");
  namespace F = torch::nn::functional;
  const auto up = F::InterpolateFuncOptions()
                      .size(std::vector<int64_t>{noise.size(2), noise.size(3)})
                      .mode(torch::kBilinear)
                      .align_corners(false);
  torch::Tensor out = noise.clone();
  for (std::size_t i = 0; i < levels.size(); ++i) {
    out += F::interpolate(levels[i].draw, up) * std::pow(discount, static_cast<double>(i));
  }
  return out / out.std();
}

NoiseDraw draw_noise(const NoiseOptions& o, const torch::Tensor& latents, at::Generator& g) {
  if (latents.dim() != 4 || o.min_timestep < 0 || o.min_timestep > o.max_timestep) {
    throw std::invalid_argument("draw_noise: latents [B, C, h, w] and 0 <= min <= max timestep");
  }
  const int64_t b = latents.size(0), c = latents.size(1), h = latents.size(2), w = latents.size(3);
  NoiseDraw d;
  d.noise = torch::randn(latents.sizes(), g, kCpuF32);
  if (o.noise_offset != 0.0) {
    const double offset =
        o.noise_offset_random_strength ? uniform(g) * o.noise_offset : o.noise_offset;
    const torch::Tensor offset_noise = torch::randn({b, c, 1, 1}, g, kCpuF32);
    d.noise = apply_noise_offset(latents, d.noise, offset, o.adaptive_noise_scale, offset_noise);
  }
  if (o.multires_noise_iterations > 0) {
    std::vector<PyramidLevel> levels;
    for (int i = 0; i < o.multires_noise_iterations; ++i) {
      const double r = uniform(g) * 2.0 + 2.0;
      const auto [hn, wn] = pyramid_level_size(h, w, r, i);
      levels.push_back({r, torch::randn({b, c, hn, wn}, g, kCpuF32)});
      if (hn == 1 || wn == 1) break;  // the lowest resolution is 1x1
    }
    d.noise = pyramid_noise(d.noise, o.multires_noise_discount, levels);
  }
  // kohya get_timesteps: min == max is that one timestep for every sample (nothing drawn).
  d.timesteps =
      o.min_timestep == o.max_timestep
          ? torch::full({b}, o.max_timestep, torch::dtype(torch::kInt64))
          : torch::randint(o.min_timestep, o.max_timestep, {b}, g, torch::dtype(torch::kInt64));
  d.input_noise = d.noise;
  if (o.ip_noise_gamma != 0.0) {
    const double gamma =
        o.ip_noise_gamma_random_strength ? uniform(g) * o.ip_noise_gamma : o.ip_noise_gamma;
    d.input_noise = d.noise + gamma * torch::randn(latents.sizes(), g, kCpuF32);
  }
  return d;
}

}  // namespace lf
