// Adafactor's update, as transformers.optimization.Adafactor.step (see header).
#include "train/optim/adafactor.h"

#include <cmath>
#include <stdexcept>

#include <torch/torch.h>

namespace lf {
namespace {

// transformers Adafactor._rms: ||t||_2 / sqrt(numel), a 0-dim tensor.
torch::Tensor rms(const torch::Tensor& t) {
  return t.norm(2) / std::sqrt(static_cast<double>(t.numel()));
}

// transformers Adafactor._approx_sq_grad (from fairseq).
torch::Tensor approx_sq_grad(const torch::Tensor& row, const torch::Tensor& col) {
  const torch::Tensor r = (row / row.mean(-1, /*keepdim=*/true)).rsqrt_().unsqueeze(-1);
  const torch::Tensor c = col.unsqueeze(-2).rsqrt();
  return torch::mul(r, c);
}

}  // namespace

AdafactorOptimizer::AdafactorOptimizer(std::vector<torch::Tensor> params,
                                       const AdafactorOptions& options,
                                       std::vector<double> lr_multipliers)
    : SlotStateOptimizer(std::move(params), std::move(lr_multipliers), {"step"}),
      options_(options) {
  if (options.warmup_init && !options.relative_step) {
    throw std::invalid_argument("AdaFactor: warmup_init=True requires relative_step=True");
  }
}

double AdafactorOptimizer::logged_lr(double lr) const {
  return options_.relative_step ? first_lr_ : lr;
}

void AdafactorOptimizer::update(const std::vector<double>& lrs) {
  for (std::size_t i = 0; i < targets().size(); ++i) {
    if (targets()[i].grad().defined()) step_one(i, lrs[i]);
  }
}

void AdafactorOptimizer::step_one(std::size_t i, double group_lr) {
  const auto& o = options_;
  torch::Tensor& p = targets()[i];
  const torch::Tensor& grad = p.grad();
  const bool factored = grad.dim() >= 2;
  auto& st = state_.slots[i];
  if (st.empty()) {
    st["step"] = torch::zeros({}, torch::kInt64);
    if (o.beta1) st["exp_avg"] = torch::zeros_like(grad);
    if (factored) {
      const auto s = grad.sizes().vec();
      std::vector<int64_t> col(s.begin(), s.end() - 2);
      col.push_back(s.back());
      st["exp_avg_sq_row"] = torch::zeros(at::IntArrayRef(s.data(), s.size() - 1), grad.options());
      st["exp_avg_sq_col"] = torch::zeros(col, grad.options());
    } else {
      st["exp_avg_sq"] = torch::zeros_like(grad);
    }
  }
  st["step"] += 1;
  const double step = static_cast<double>(st["step"].item<int64_t>());
  // _get_lr: the relative step size, times max(eps2, RMS(p)) with scale_parameter. Python's
  // max(float, tensor) keeps the 0-dim float32 tensor when it is larger, so the lr is then a
  // float32 product, as here.
  double rel_step = group_lr;
  if (o.relative_step)
    rel_step = std::min(o.warmup_init ? 1e-6 * step : 1e-2, 1.0 / std::sqrt(step));
  torch::Tensor lr = torch::scalar_tensor(rel_step, torch::kFloat64);
  bool lr_is_float32 = false;
  if (o.scale_parameter) {
    const torch::Tensor r = rms(p);
    if (r.item<float>() > static_cast<float>(o.eps2)) {
      lr = r * rel_step;
      lr_is_float32 = true;
    } else {
      lr = torch::scalar_tensor(o.eps2 * rel_step, torch::kFloat64);
    }
  }
  if (i == 0) first_lr_ = lr.item<double>();
  const double beta2t = 1.0 - std::pow(step, o.decay_rate);
  torch::Tensor update = grad.pow(2) + o.eps1;
  if (factored) {
    st["exp_avg_sq_row"].mul_(beta2t).add_(update.mean(-1), 1.0 - beta2t);
    st["exp_avg_sq_col"].mul_(beta2t).add_(update.mean(-2), 1.0 - beta2t);
    update = approx_sq_grad(st["exp_avg_sq_row"], st["exp_avg_sq_col"]);
    update.mul_(grad);
  } else {
    st["exp_avg_sq"].mul_(beta2t).add_(update, 1.0 - beta2t);
    update = st["exp_avg_sq"].rsqrt().mul_(grad);
  }
  update.div_((rms(update) / o.clip_threshold).clamp_(1.0));
  if (lr_is_float32) {
    update.mul_(lr);
  } else {
    update.mul_(lr.item<double>());
  }
  if (o.beta1) {
    st["exp_avg"].mul_(*o.beta1).add_(update, 1.0 - *o.beta1);
    update = st["exp_avg"];
  }
  if (o.weight_decay != 0) {
    const double alpha =
        lr_is_float32 ? (lr * -o.weight_decay).item<double>() : -o.weight_decay * lr.item<double>();
    p.add_(p, alpha);
  }
  p.add_(-update);
}

}  // namespace lf
