// The samplers' timesteps and sigmas, as diffusers' set_timesteps computes them (see header).
#include "sample/sigma_schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <torch/torch.h>

namespace lf {
namespace {

struct Name {
  const char* name;
  SamplerKind kind;
};
constexpr Name kNames[] = {{"ddim", SamplerKind::kDdim},
                           {"euler", SamplerKind::kEuler},
                           {"k_euler", SamplerKind::kEuler},
                           {"euler_a", SamplerKind::kEulerAncestral},
                           {"k_euler_a", SamplerKind::kEulerAncestral},
                           {"dpmsolver++", SamplerKind::kDpmSolverPlusPlus},
                           {"k_dpm_2", SamplerKind::kKDpm2},
                           {"dpm_2", SamplerKind::kKDpm2}};

// numpy.linspace(start, stop, n).
std::vector<double> linspace(double start, double stop, int n) {
  std::vector<double> out(n);
  for (int i = 0; i < n; ++i) out[i] = n == 1 ? start : start + (stop - start) * i / (n - 1);
  return out;
}

// sqrt((1 - abar) / abar) over the training timesteps, in float64 as numpy holds them.
std::vector<double> train_sigmas(const torch::Tensor& alphas_cumprod) {
  const torch::Tensor a = alphas_cumprod.to(torch::kFloat32).contiguous();
  const float* p = a.data_ptr<float>();
  std::vector<double> out(a.numel());
  for (std::size_t i = 0; i < out.size(); ++i) {
    // diffusers: ((1 - abar) / abar) ** 0.5 on the float32 tensor.
    out[i] = std::sqrt(static_cast<float>((1.0f - p[i]) / p[i]));
  }
  return out;
}

// numpy.interp(t, arange(len(ys)), ys).
double interp(double t, const std::vector<double>& ys) {
  if (t <= 0) return ys.front();
  const auto last = static_cast<double>(ys.size() - 1);
  if (t >= last) return ys.back();
  const auto lo = static_cast<std::size_t>(std::floor(t));
  const double w = t - static_cast<double>(lo);
  return ys[lo] + w * (ys[lo + 1] - ys[lo]);
}

// diffusers _sigma_to_t: the fractional timestep whose log sigma interpolates `sigma`.
double sigma_to_t(double sigma, const std::vector<double>& log_sigmas) {
  const double log_sigma = std::log(std::max(sigma, 1e-10));
  // low_idx: the last index whose log sigma is <= log_sigma, at most size - 2.
  std::size_t low = 0;
  for (std::size_t i = 0; i < log_sigmas.size(); ++i) {
    if (log_sigma - log_sigmas[i] >= 0) low = i;
  }
  low = std::min(low, log_sigmas.size() - 2);
  const double lo = log_sigmas[low], hi = log_sigmas[low + 1];
  const double w = std::clamp((lo - log_sigma) / (lo - hi), 0.0, 1.0);
  return (1 - w) * static_cast<double>(low) + w * static_cast<double>(low + 1);
}

// diffusers _convert_to_karras (rho 7) between sigma_max and sigma_min.
std::vector<double> karras(double sigma_min, double sigma_max, int n) {
  const double rho = 7.0;
  const double min_inv = std::pow(sigma_min, 1 / rho), max_inv = std::pow(sigma_max, 1 / rho);
  std::vector<double> out;
  for (double r : linspace(0, 1, n))
    out.push_back(std::pow(max_inv + r * (min_inv - max_inv), rho));
  return out;
}

SigmaSchedule ddim(int steps) {
  SigmaSchedule s;
  const int ratio = 1000 / steps;  // "leading", steps_offset 0
  for (int i = steps - 1; i >= 0; --i) s.timesteps.push_back(static_cast<double>(i * ratio));
  return s;
}

// Euler, Euler ancestral and KDPM2's base: linspace timesteps (float32, as numpy's), their
// interpolated sigmas (or Karras's), then 0.
void linspace_sigmas(SigmaSchedule& s, int steps, bool karras_sigmas, bool round_karras_t,
                     const std::vector<double>& sig, const std::vector<double>& log_sig) {
  std::vector<double> sigmas;
  for (double t : linspace(0, 999, steps)) {
    s.timesteps.insert(s.timesteps.begin(), static_cast<double>(static_cast<float>(t)));
  }
  for (double t : s.timesteps) sigmas.push_back(interp(t, sig));
  if (karras_sigmas) {
    sigmas = karras(sigmas.back(), sigmas.front(), steps);
    s.timesteps.clear();
    for (double sigma : sigmas) {
      const double t = sigma_to_t(sigma, log_sig);
      s.timesteps.push_back(round_karras_t ? std::nearbyint(t) : t);
    }
  }
  for (double v : sigmas) s.sigmas.push_back(static_cast<float>(v));
  s.sigmas.push_back(0.0f);
}

SigmaSchedule dpm_solver(int steps, bool karras_sigmas, const std::vector<double>& sig,
                         const std::vector<double>& log_sig) {
  SigmaSchedule s;
  // linspace(0, 999, steps + 1).round()[::-1][:-1], int64
  const std::vector<double> t = linspace(0, 999, steps + 1);
  for (int i = steps; i >= 1; --i) s.timesteps.push_back(std::nearbyint(t[i]));
  std::vector<double> sigmas;
  if (karras_sigmas) {
    sigmas = karras(sig.front(), sig.back(), steps);
    s.timesteps.clear();
    for (double sigma : sigmas) s.timesteps.push_back(std::nearbyint(sigma_to_t(sigma, log_sig)));
  } else {
    for (double ts : s.timesteps) sigmas.push_back(interp(ts, sig));
  }
  for (double v : sigmas) s.sigmas.push_back(static_cast<float>(v));
  s.sigmas.push_back(0.0f);  // final_sigmas_type "zero"
  return s;
}

// KDPM2: each sigma after the first twice, with the log-space midpoints to the previous one,
// and the model timesteps interleaved with the midpoints' timesteps.
SigmaSchedule kdpm2(int steps, bool karras_sigmas, const std::vector<double>& sig,
                    const std::vector<double>& log_sig) {
  SigmaSchedule base;
  linspace_sigmas(base, steps, karras_sigmas, /*round_karras_t=*/true, sig, log_sig);
  const std::vector<float>& sg = base.sigmas;  // steps + 1 values, the last 0
  const std::size_t n = sg.size();
  std::vector<float> interpol(n);
  for (std::size_t i = 0; i < n; ++i) {
    // exp(lerp(log s_i, log s_{i-1}, 0.5)), s_{-1} the last (torch.roll), with torch.lerp's
    // formula for weight 0.5, end - (end - start) / 2: the midpoint to the final 0 is 0 (the
    // first value is NaN and never used).
    const float start = std::log(sg[i]), end = std::log(sg[(i + n - 1) % n]);
    interpol[i] = std::exp(end - (end - start) * 0.5f);
  }
  SigmaSchedule s;
  auto interleave = [n](const std::vector<float>& v) {
    std::vector<float> out = {v[0]};
    for (std::size_t i = 1; i < n; ++i) out.insert(out.end(), {v[i], v[i]});
    out.push_back(v[n - 1]);
    return out;
  };
  s.sigmas = interleave(sg);
  s.sigmas_interpol = interleave(interpol);
  s.timesteps.push_back(base.timesteps[0]);
  for (std::size_t i = 1; i + 1 < n; ++i) {
    s.timesteps.push_back(sigma_to_t(interpol[i], log_sig));
    s.timesteps.push_back(base.timesteps[i]);
  }
  s.init_noise_sigma = *std::max_element(s.sigmas.begin(), s.sigmas.end());
  return s;
}

}  // namespace

const std::vector<std::string>& sampler_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Name& n : kNames) v.emplace_back(n.name);
    return v;
  }();
  return names;
}

SamplerKind sampler_kind(const std::string& name) {
  for (const Name& n : kNames) {
    if (name == n.name) return n.kind;
  }
  std::string list;
  for (const std::string& n : sampler_names()) list += (list.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown sampler '" + name + "' (expected one of: " + list + ")");
}

bool sampler_takes_karras_sigmas(SamplerKind kind) {
  return kind == SamplerKind::kEuler || kind == SamplerKind::kDpmSolverPlusPlus ||
         kind == SamplerKind::kKDpm2;
}

SigmaSchedule sigma_schedule(SamplerKind kind, int steps, bool karras_sigmas,
                             const torch::Tensor& alphas_cumprod) {
  if (steps < 1) throw std::invalid_argument("sampling steps must be >= 1");
  if (karras_sigmas && !sampler_takes_karras_sigmas(kind)) {
    throw std::invalid_argument("Karras sigmas apply to euler, dpmsolver++ and k_dpm_2 only");
  }
  const std::vector<double> sig = train_sigmas(alphas_cumprod);
  std::vector<double> log_sig;
  for (double v : sig) log_sig.push_back(std::log(v));
  switch (kind) {
    case SamplerKind::kDdim: return ddim(steps);
    case SamplerKind::kDpmSolverPlusPlus: return dpm_solver(steps, karras_sigmas, sig, log_sig);
    case SamplerKind::kKDpm2: return kdpm2(steps, karras_sigmas, sig, log_sig);
    case SamplerKind::kEuler:
    case SamplerKind::kEulerAncestral: {
      SigmaSchedule s;
      linspace_sigmas(s, steps, karras_sigmas, /*round_karras_t=*/false, sig, log_sig);
      s.init_noise_sigma = *std::max_element(s.sigmas.begin(), s.sigmas.end());
      return s;
    }
  }
  throw std::invalid_argument("unknown sampler kind");
}

}  // namespace lf
