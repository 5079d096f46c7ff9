// DAdaptAdam's step, as dadaptation DAdaptAdam.step with layer_scale 1 (see header). The
// running sums are Python floats (float64) there and here.
#include "train/optim/dadapt_adam.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <torch/torch.h>

namespace lf {

DAdaptAdamOptimizer::DAdaptAdamOptimizer(std::vector<torch::Tensor> params,
                                         const DAdaptAdamOptions& options,
                                         std::vector<double> lr_multipliers)
    : SlotStateOptimizer(std::move(params), std::move(lr_multipliers),
                         {"s", "exp_avg", "exp_avg_sq"}),
      options_(options) {
  require_one_lr_or_zero("DAdaptAdam", this->lr_multipliers());
  state_.scalars = {{"d", options.d0}, {"k", 0.0}, {"numerator_weighted", 0.0}};
}

double DAdaptAdamOptimizer::logged_lr(double lr) const { return state_.scalars.at("d") * lr; }

void DAdaptAdamOptimizer::update(const std::vector<double>& lrs) {
  const auto& o = options_;
  auto& sc = state_.scalars;
  const double k = sc["k"];
  double d = sc["d"];
  const double lr = *std::max_element(lrs.begin(), lrs.end());
  const double bias_correction =
      o.use_bias_correction
          ? std::pow(1 - std::pow(o.beta2, k + 1), 0.5) / (1 - std::pow(o.beta1, k + 1))
          : 1.0;
  const double dlr = d * lr * bias_correction;
  const double sqrt_beta2 = std::pow(o.beta2, 0.5);
  double numerator_acum = 0.0, sk_l1 = 0.0;
  for (std::size_t i = 0; i < targets().size(); ++i) {
    torch::Tensor& p = targets()[i];
    if (!p.grad().defined()) continue;
    torch::Tensor grad = p.grad();
    if (o.weight_decay != 0 && !o.decouple) grad.add_(p, o.weight_decay);
    auto& st = state_.slots[i];
    if (st.empty()) {
      st["s"] = torch::zeros_like(p);
      st["exp_avg"] = torch::zeros_like(p);
      st["exp_avg_sq"] = torch::zeros_like(p);
    }
    if (lrs[i] <= 0.0) continue;
    const torch::Tensor denom = st["exp_avg_sq"].sqrt().add_(o.eps);
    numerator_acum += dlr * torch::dot(grad.flatten(), st["s"].div(denom).flatten()).item<double>();
    st["exp_avg"].mul_(o.beta1).add_(grad, dlr * (1 - o.beta1));
    st["exp_avg_sq"].mul_(o.beta2).addcmul_(grad, grad, 1 - o.beta2);
    st["s"].mul_(sqrt_beta2).add_(grad, dlr * (1 - sqrt_beta2));
    sk_l1 += st["s"].abs().sum().item<double>();
  }
  const double numerator_weighted =
      sqrt_beta2 * sc["numerator_weighted"] + (1 - sqrt_beta2) * numerator_acum;
  // dadaptation returns here, before counting the step, while nothing has moved.
  if (sk_l1 == 0) return;
  if (lr > 0.0) {
    const double d_hat = numerator_weighted / ((1 - sqrt_beta2) * sk_l1);
    d = std::max(d, std::min(d_hat, d * o.growth_rate));
  }
  sc["numerator_weighted"] = numerator_weighted;
  sc["d"] = d;
  sc["k"] = k + 1;
  for (std::size_t i = 0; i < targets().size(); ++i) {
    torch::Tensor& p = targets()[i];
    if (!p.grad().defined()) continue;
    auto& st = state_.slots[i];
    const torch::Tensor denom = st["exp_avg_sq"].sqrt().add_(o.eps);
    if (o.weight_decay != 0 && o.decouple) p.add_(p, -o.weight_decay * dlr);
    p.addcdiv_(st["exp_avg"], denom, -1);
  }
}

}  // namespace lf
