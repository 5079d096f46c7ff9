// Prodigy's step, as prodigyopt Prodigy.step (see header). The running sums are Python floats
// (float64) there and here; the tensor updates are float32.
#include "train/optim/prodigy.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <torch/torch.h>

namespace lf {
namespace {

torch::Tensor sliced(const torch::Tensor& t, int64_t slice_p) {
  return t.flatten().slice(0, 0, std::nullopt, slice_p);
}

}  // namespace

ProdigyOptimizer::ProdigyOptimizer(std::vector<torch::Tensor> params, const ProdigyOptions& options,
                                   std::vector<double> lr_multipliers)
    : SlotStateOptimizer(std::move(params), std::move(lr_multipliers), {"s", "p0", "exp_avg_sq"}),
      options_(options) {
  require_one_lr_or_zero("Prodigy", this->lr_multipliers());
  if (options.slice_p < 1) throw std::invalid_argument("Prodigy: slice_p must be >= 1");
  state_.scalars = {{"d", options.d0}, {"d_max", options.d0}, {"d_numerator", 0.0}, {"k", 0.0}};
}

double ProdigyOptimizer::logged_lr(double lr) const { return d() * lr; }

void ProdigyOptimizer::update(const std::vector<double>& lrs) {
  const auto& o = options_;
  auto& sc = state_.scalars;
  const double beta3 = o.beta3 ? *o.beta3 : std::sqrt(o.beta2);
  const double k = sc["k"];
  double d = sc["d"], d_max = sc["d_max"];
  const double lr = *std::max_element(lrs.begin(), lrs.end());
  const double bias_correction =
      o.use_bias_correction
          ? std::pow(1 - std::pow(o.beta2, k + 1), 0.5) / (1 - std::pow(o.beta1, k + 1))
          : 1.0;
  const double dlr = d * lr * bias_correction;
  const double d_numerator = sc["d_numerator"] * beta3;
  double delta_numerator = 0.0, d_denom = 0.0;
  for (std::size_t i = 0; i < targets().size(); ++i) {
    torch::Tensor& p = targets()[i];
    if (!p.grad().defined()) continue;
    torch::Tensor grad = p.grad();
    if (o.weight_decay != 0 && !o.decouple) grad.add_(p, o.weight_decay);
    auto& st = state_.slots[i];
    if (st.empty()) {
      st["s"] = torch::zeros_like(sliced(p, o.slice_p));
      st["p0"] =
          p.any().item<bool>() ? sliced(p, o.slice_p).clone() : torch::zeros({}, p.options());
      if (o.beta1 > 0) st["exp_avg"] = torch::zeros_like(p);
      st["exp_avg_sq"] = torch::zeros_like(p);
    }
    if (lrs[i] <= 0.0) continue;
    const torch::Tensor g = sliced(grad, o.slice_p);
    delta_numerator +=
        (d / o.d0) * dlr * torch::dot(g, st["p0"] - sliced(p, o.slice_p)).item<double>();
    if (o.beta1 > 0) st["exp_avg"].mul_(o.beta1).add_(grad, d * (1 - o.beta1));
    st["exp_avg_sq"].mul_(o.beta2).addcmul_(grad, grad, d * d * (1 - o.beta2));
    st["s"].mul_(beta3).add_(g, o.safeguard_warmup ? (d / o.d0) * d : (d / o.d0) * dlr);
    d_denom += st["s"].abs().sum().item<double>();
  }
  // prodigyopt returns here, before counting the step, while nothing has moved.
  if (d_denom == 0) return;
  const double global_d_numerator = d_numerator + delta_numerator;
  double d_hat = d;
  if (lr > 0.0) {
    d_hat = o.d_coef * global_d_numerator / d_denom;
    if (d == o.d0) d = std::max(d, d_hat);
    d_max = std::max(d_max, d_hat);
    d = std::min(d_max, d * o.growth_rate);
  }
  sc["d_numerator"] = global_d_numerator;
  sc["d"] = d;
  sc["d_max"] = d_max;
  sc["k"] = k + 1;
  for (std::size_t i = 0; i < targets().size(); ++i) {
    torch::Tensor& p = targets()[i];
    if (!p.grad().defined()) continue;
    auto& st = state_.slots[i];
    const torch::Tensor denom = st["exp_avg_sq"].sqrt().add_(d * o.eps);
    if (o.weight_decay != 0 && o.decouple) p.add_(p, -o.weight_decay * dlr);
    if (o.beta1 > 0) {
      p.addcdiv_(st["exp_avg"], denom, -dlr);
    } else {
      p.addcdiv_(p.grad(), denom, -dlr * d);
    }
  }
}

}  // namespace lf
