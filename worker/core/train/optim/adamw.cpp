// AdamW's update, as torch.optim.adam._single_tensor_adam with decoupled weight decay (see
// header).
#include "train/optim/adamw.h"

#include <cmath>

#include <torch/torch.h>

namespace lf {

AdamWOptimizer::AdamWOptimizer(std::vector<torch::Tensor> params, const AdamWOptions& options,
                               std::vector<double> lr_multipliers)
    : SlotStateOptimizer(std::move(params), std::move(lr_multipliers), {"exp_avg", "exp_avg_sq"}),
      options_(options) {}

void AdamWOptimizer::update(const std::vector<double>& lrs) {
  const auto& o = options_;
  // torch counts steps per parameter; here every parameter steps every time.
  const double step = static_cast<double>(step_count());
  const double bias_correction1 = 1 - std::pow(o.beta1, step);
  const double bias_correction2_sqrt = std::pow(1 - std::pow(o.beta2, step), 0.5);
  for (std::size_t i = 0; i < targets().size(); ++i) {
    torch::Tensor& p = targets()[i];
    const torch::Tensor& grad = p.grad();
    if (!grad.defined()) continue;
    auto& st = state_.slots[i];
    if (st.empty()) {
      st["exp_avg"] = torch::zeros_like(p, torch::MemoryFormat::Preserve);
      st["exp_avg_sq"] = torch::zeros_like(p, torch::MemoryFormat::Preserve);
    }
    const double lr = lrs[i];
    if (o.weight_decay != 0) p.mul_(1 - lr * o.weight_decay);
    st["exp_avg"].lerp_(grad, 1 - o.beta1);
    st["exp_avg_sq"].mul_(o.beta2).addcmul_(grad, grad, 1 - o.beta2);
    const torch::Tensor denom = (st["exp_avg_sq"].sqrt() / bias_correction2_sqrt).add_(o.eps);
    p.addcdiv_(st["exp_avg"], denom, -(lr / bias_correction1));
  }
}

}  // namespace lf
