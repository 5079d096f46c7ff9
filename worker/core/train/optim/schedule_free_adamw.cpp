// Schedule-free AdamW, as schedulefree AdamWScheduleFree.step / eval / train (see header).
#include "train/optim/schedule_free_adamw.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <torch/torch.h>

namespace lf {
namespace {

double& scalar(std::map<std::string, torch::Tensor>& st, const char* name) {
  return *st.at(name).data_ptr<double>();
}

}  // namespace

ScheduleFreeAdamWOptimizer::ScheduleFreeAdamWOptimizer(std::vector<torch::Tensor> params,
                                                       const ScheduleFreeAdamWOptions& options,
                                                       std::vector<double> lr_multipliers)
    : SlotStateOptimizer(std::move(params), std::move(lr_multipliers),
                         {"z", "exp_avg_sq", "lr_max", "weight_sum"}),
      options_(options) {
  state_.scalars = {{"k", 0.0}, {"train_mode", 1.0}};
}

void ScheduleFreeAdamWOptimizer::lerp_to_z(double weight) {
  torch::NoGradGuard no_grad;
  pull_targets();
  for (std::size_t i = 0; i < targets().size(); ++i) {
    auto z = state_.slots[i].find("z");
    if (z != state_.slots[i].end()) targets()[i].lerp_(z->second, weight);
  }
  push_targets();
}

void ScheduleFreeAdamWOptimizer::use_eval_weights() {
  if (!train_mode()) return;
  lerp_to_z(1.0 - 1.0 / options_.beta1);
  state_.scalars["train_mode"] = 0.0;
}

void ScheduleFreeAdamWOptimizer::use_train_weights() {
  if (train_mode()) return;
  lerp_to_z(1.0 - options_.beta1);
  state_.scalars["train_mode"] = 1.0;
}

void ScheduleFreeAdamWOptimizer::update(const std::vector<double>& lrs) {
  if (!train_mode()) {
    throw std::logic_error("AdamWScheduleFree: step in eval mode (use_train_weights() first)");
  }
  const auto& o = options_;
  const double k = state_.scalars["k"];
  const double sched =
      k < static_cast<double>(o.warmup_steps) ? (k + 1) / static_cast<double>(o.warmup_steps) : 1.0;
  const double bias_correction2 = 1 - std::pow(o.beta2, k + 1);
  for (std::size_t i = 0; i < targets().size(); ++i) {
    torch::Tensor& y = targets()[i];
    if (!y.grad().defined()) continue;
    auto& st = state_.slots[i];
    if (st.empty()) {
      st["z"] = y.detach().clone();
      st["exp_avg_sq"] = torch::zeros_like(y);
      st["lr_max"] = torch::scalar_tensor(-1.0, torch::kFloat64);
      st["weight_sum"] = torch::scalar_tensor(0.0, torch::kFloat64);
    }
    // The group's scalars, kept per parameter: parameters with one lr share the same values.
    const double lr = lrs[i] * sched;
    double& lr_max = scalar(st, "lr_max");
    double& weight_sum = scalar(st, "weight_sum");
    lr_max = std::max(lr, lr_max);
    const double weight = std::pow(k + 1, o.r) * std::pow(lr_max, o.weight_lr_power);
    weight_sum += weight;
    const double ckp1 = weight_sum == 0 ? 0.0 : weight / weight_sum;
    torch::Tensor grad = y.grad();
    st["exp_avg_sq"].mul_(o.beta2).addcmul_(grad, grad, 1 - o.beta2);
    const torch::Tensor denom = st["exp_avg_sq"].div(bias_correction2).sqrt_().add_(o.eps);
    grad.div_(denom);
    if (o.weight_decay != 0) grad.add_(y, o.weight_decay);
    y.lerp_(st["z"], ckp1);
    y.add_(grad, lr * (o.beta1 * (1 - ckp1) - 1));
    st["z"].sub_(grad, lr);
  }
  state_.scalars["k"] = k + 1;
}

}  // namespace lf
