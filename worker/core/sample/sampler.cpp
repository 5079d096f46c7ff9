// The samplers' loops (see header); each step mirrors the diffusers scheduler's step().
#include "sample/sampler.h"

#include <cmath>
#include <stdexcept>

#include <torch/torch.h>

namespace lf {
namespace {

// The k-diffusion samplers' x0 from the model output at noise level sigma (the unscaled latent x).
torch::Tensor predicted_x0(const torch::Tensor& x, const torch::Tensor& out, double sigma,
                           bool v_prediction) {
  if (!v_prediction) return x - sigma * out;
  return out * (-sigma / std::sqrt(sigma * sigma + 1)) + x / (sigma * sigma + 1);
}

torch::Tensor scaled(const torch::Tensor& x, double sigma) {
  return x / std::sqrt(sigma * sigma + 1);
}

// DDIMScheduler.step with eta 0 and clip_sample (kohya sets it): deterministic.
torch::Tensor ddim(const SamplerSpec& spec, const SigmaSchedule& s, const torch::Tensor& ac,
                   torch::Tensor x, const GuidedModel& model) {
  const auto abar = ac.to(torch::kFloat32).contiguous();
  const float* a = abar.data_ptr<float>();
  const int ratio = 1000 / spec.steps;
  for (double t : s.timesteps) {
    const torch::Tensor out = model(x, t);
    const int ti = static_cast<int>(t), prev = ti - ratio;
    const double a_t = a[ti], a_prev = prev >= 0 ? a[prev] : 1.0;  // set_alpha_to_one
    const double b_t = 1 - a_t;
    torch::Tensor x0, eps;
    if (spec.v_prediction) {
      x0 = std::sqrt(a_t) * x - std::sqrt(b_t) * out;
      eps = std::sqrt(a_t) * out + std::sqrt(b_t) * x;
    } else {
      x0 = (x - std::sqrt(b_t) * out) / std::sqrt(a_t);
      eps = out;
    }
    x0 = x0.clamp(-1.0, 1.0);
    x = std::sqrt(a_prev) * x0 + std::sqrt(1 - a_prev) * eps;
  }
  return x;
}

// EulerDiscreteScheduler (s_churn 0) and EulerAncestralDiscreteScheduler.step.
torch::Tensor euler(const SamplerSpec& spec, const SigmaSchedule& s, torch::Tensor x,
                    const GuidedModel& model, const AncestralNoise* ancestral) {
  for (std::size_t i = 0; i < s.timesteps.size(); ++i) {
    const double sigma = s.sigmas[i], next = s.sigmas[i + 1];
    const torch::Tensor out = model(scaled(x, sigma), s.timesteps[i]);
    const torch::Tensor d = (x - predicted_x0(x, out, sigma, spec.v_prediction)) / sigma;
    if (ancestral == nullptr) {
      x = x + d * (next - sigma);
      continue;
    }
    const double up = std::sqrt(next * next * (sigma * sigma - next * next) / (sigma * sigma));
    const double down = std::sqrt(next * next - up * up);
    x = x + d * (down - sigma);
    x = x + (*ancestral)() * up;
  }
  return x;
}

// DPMSolverMultistepScheduler, dpmsolver++ of order 2 (midpoint), its last step first order.
torch::Tensor dpm_solver_pp(const SamplerSpec& spec, const SigmaSchedule& s, torch::Tensor x,
                            const GuidedModel& model) {
  auto alpha_sigma = [](double sigma) {
    const double alpha = 1 / std::sqrt(sigma * sigma + 1);
    return std::make_pair(alpha, sigma * alpha);
  };
  torch::Tensor previous_x0;
  const std::size_t n = s.timesteps.size();
  for (std::size_t i = 0; i < n; ++i) {
    const torch::Tensor out = model(x, s.timesteps[i]);
    const auto [alpha_s0, sigma_s0] = alpha_sigma(s.sigmas[i]);
    const torch::Tensor x0 =
        spec.v_prediction ? alpha_s0 * x - sigma_s0 * out : (x - sigma_s0 * out) / alpha_s0;
    const auto [alpha_t, sigma_t] = alpha_sigma(s.sigmas[i + 1]);
    const double lambda_t = std::log(alpha_t) - std::log(sigma_t);
    const double lambda_s0 = std::log(alpha_s0) - std::log(sigma_s0);
    const double h = lambda_t - lambda_s0;
    const double phi = alpha_t * (std::exp(-h) - 1.0);
    if (i == 0 || i == n - 1) {  // lower_order_nums < 1, lower_order_final
      x = (sigma_t / sigma_s0) * x - phi * x0;
    } else {
      const auto [alpha_s1, sigma_s1] = alpha_sigma(s.sigmas[i - 1]);
      const double lambda_s1 = std::log(alpha_s1) - std::log(sigma_s1);
      const double r0 = (lambda_s0 - lambda_s1) / h;
      const torch::Tensor d1 = (1.0 / r0) * (x0 - previous_x0);
      x = (sigma_t / sigma_s0) * x - phi * x0 - 0.5 * phi * d1;
    }
    previous_x0 = x0;
  }
  return x;
}

// KDPM2DiscreteScheduler.step: a first-order step to the log-midpoint sigma, then the step from
// the saved sample with the midpoint's derivative.
torch::Tensor kdpm2(const SamplerSpec& spec, const SigmaSchedule& s, torch::Tensor x,
                    const GuidedModel& model) {
  torch::Tensor saved;
  for (std::size_t i = 0; i < s.timesteps.size(); ++i) {
    const bool first = !saved.defined();
    const double sigma = first ? s.sigmas[i] : s.sigmas[i - 1];
    const double interpol = first ? s.sigmas_interpol[i + 1] : s.sigmas_interpol[i];
    const double next = first ? s.sigmas[i + 1] : s.sigmas[i];
    const double sigma_input = first ? sigma : interpol;
    const torch::Tensor out = model(scaled(x, sigma_input), s.timesteps[i]);
    const torch::Tensor x0 = predicted_x0(x, out, sigma_input, spec.v_prediction);
    if (first) {
      saved = x;
      x = x + (x - x0) / sigma * (interpol - sigma);
    } else {
      x = saved + (x - x0) / interpol * (next - sigma);
      saved = torch::Tensor();
    }
  }
  return x;
}

}  // namespace

torch::Tensor run_sampler(const SamplerSpec& spec, const torch::Tensor& alphas_cumprod,
                          const torch::Tensor& noise, const GuidedModel& model,
                          const AncestralNoise& ancestral_noise) {
  const SigmaSchedule s = sigma_schedule(spec.kind, spec.steps, spec.karras_sigmas, alphas_cumprod);
  const torch::Tensor x = noise.to(torch::kFloat32) * s.init_noise_sigma;
  switch (spec.kind) {
    case SamplerKind::kDdim: return ddim(spec, s, alphas_cumprod, x, model);
    case SamplerKind::kEuler: return euler(spec, s, x, model, nullptr);
    case SamplerKind::kEulerAncestral:
      if (!ancestral_noise) throw std::invalid_argument("euler_a needs its ancestral noise");
      return euler(spec, s, x, model, &ancestral_noise);
    case SamplerKind::kDpmSolverPlusPlus: return dpm_solver_pp(spec, s, x, model);
    case SamplerKind::kKDpm2: return kdpm2(spec, s, x, model);
  }
  throw std::invalid_argument("unknown sampler kind");
}

}  // namespace lf
