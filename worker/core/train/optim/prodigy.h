// Prodigy (Mishchenko & Defazio 2023, "Prodigy: An Expeditiously Adaptive Parameter-Free
// Learner"), as PyPI prodigyopt 1.1 Prodigy.step, kohya's optimizer_type "Prodigy". It
// estimates the distance to the solution, d, and steps Adam with lr x d; the lr stays a
// multiplier (1 is the usual setting).
#pragma once

#include <limits>
#include <optional>

#include "train/optimizer.h"

namespace lf {

struct ProdigyOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  std::optional<double> beta3;  // none: sqrt(beta2)
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decouple = true;  // AdamW-style decay (else added to the gradient, Adam-style)
  bool use_bias_correction = false;
  bool safeguard_warmup = false;
  double d0 = 1e-6;
  double d_coef = 1.0;
  double growth_rate = std::numeric_limits<double>::infinity();
  int64_t slice_p = 1;  // estimate d from every slice_p-th element
};

class ProdigyOptimizer final : public SlotStateOptimizer {
 public:
  // Throws std::invalid_argument unless every lr multiplier is the largest one or 0
  // (prodigyopt: "Setting different lr values in different parameter groups is only supported
  // for values of 0"), for slice_p < 1, else as LoRAOptimizer's.
  ProdigyOptimizer(std::vector<torch::Tensor> params, const ProdigyOptions& options,
                   std::vector<double> lr_multipliers = {});
  std::string type() const override { return "Prodigy"; }
  // d x lr, what kohya logs as lr/d*lr.
  double logged_lr(double lr) const override;
  double d() const { return state_.scalars.at("d"); }

 private:
  // Per parameter: "s", "p0" (0-dim 0 for a parameter that was all zeros), "exp_avg" (beta1 >
  // 0), "exp_avg_sq"; scalars "d", "d_max", "d_numerator", "k".
  void update(const std::vector<double>& lrs) override;

  ProdigyOptions options_;
};

}  // namespace lf
