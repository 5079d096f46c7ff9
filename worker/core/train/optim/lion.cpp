// Lion's update, as lion-pytorch update_fn (see header).
#include "train/optim/lion.h"

#include <torch/torch.h>

namespace lf {

LionOptimizer::LionOptimizer(std::vector<torch::Tensor> params, const LionOptions& options,
                             std::vector<double> lr_multipliers)
    : SlotStateOptimizer(std::move(params), std::move(lr_multipliers), {"exp_avg"}),
      options_(options) {}

void LionOptimizer::update(const std::vector<double>& lrs) {
  const auto& o = options_;
  for (std::size_t i = 0; i < targets().size(); ++i) {
    torch::Tensor& p = targets()[i];
    const torch::Tensor& grad = p.grad();
    if (!grad.defined()) continue;
    auto& st = state_.slots[i];
    if (st.empty()) st["exp_avg"] = torch::zeros_like(p);
    torch::Tensor& exp_avg = st["exp_avg"];
    const double lr = lrs[i];
    p.mul_(1.0 - lr * o.weight_decay);
    // The sign of the interpolation beta1 * m + (1 - beta1) * g steps; m then tracks beta2.
    const torch::Tensor update = exp_avg.clone().mul_(o.beta1).add(grad, 1.0 - o.beta1).sgn_();
    p.add_(update, -lr);
    exp_avg.mul_(o.beta2).add_(grad, 1.0 - o.beta2);
  }
}

}  // namespace lf
