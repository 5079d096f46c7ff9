// transformers LR lambdas (constant, constant_with_warmup, linear, cosine) evaluated in double.
#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace lf {

double lr_at_step(const LRScheduleOptions& o, int64_t step) {
  // base_lr 0 is valid, as in torch.optim (it freezes the weights up to weight decay).
  if (step < 0 || o.warmup_steps < 0 || o.total_steps < 0 || !(o.base_lr >= 0)) {
    throw std::invalid_argument(
        "lr_at_step: step, warmup_steps, total_steps and base_lr must be >= 0");
  }
  const double s = static_cast<double>(step);
  const double w = static_cast<double>(o.warmup_steps);
  const double n = static_cast<double>(o.total_steps);
  if (o.name == "constant") {
    if (o.warmup_steps != 0) {
      throw std::invalid_argument(
          "lr_at_step: the \"constant\" schedule takes no warmup; use "
          "\"constant_with_warmup\"");
    }
    return o.base_lr;
  }
  const bool known = o.name == "constant_with_warmup" || o.name == "linear" || o.name == "cosine";
  if (!known) {
    throw std::invalid_argument("lr_at_step: unknown schedule \"" + o.name +
                                "\" (valid: constant, constant_with_warmup, linear, cosine)");
  }
  if (step < o.warmup_steps) return o.base_lr * s / std::max(1.0, w);
  if (o.name == "constant_with_warmup") return o.base_lr;
  if (o.name == "linear") return o.base_lr * std::max(0.0, (n - s) / std::max(1.0, n - w));
  const double progress = (s - w) / std::max(1.0, n - w);
  const double kNumCycles = 0.5;
  return o.base_lr * std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * kNumCycles * 2.0 * progress)));
}

}  // namespace lf
