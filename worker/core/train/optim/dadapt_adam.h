// D-Adaptation Adam (Defazio & Mishchenko 2023, "Learning-Rate-Free Learning by
// D-Adaptation"), as PyPI dadaptation 3.2 DAdaptAdam.step, kohya's optimizer_type
// "DAdaptAdam". Like Prodigy it estimates d and steps with lr x d.
#pragma once

#include <limits>

#include "train/optimizer.h"

namespace lf {

struct DAdaptAdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decouple = false;  // dadaptation's default: the decay is added to the gradient
  bool use_bias_correction = false;
  double d0 = 1e-6;
  double growth_rate = std::numeric_limits<double>::infinity();
};

class DAdaptAdamOptimizer final : public SlotStateOptimizer {
 public:
  // Throws std::invalid_argument unless every lr multiplier is the largest one or 0 (as
  // dadaptation), else as LoRAOptimizer's.
  DAdaptAdamOptimizer(std::vector<torch::Tensor> params, const DAdaptAdamOptions& options,
                      std::vector<double> lr_multipliers = {});
  std::string type() const override { return "DAdaptAdam"; }
  // d x lr, what kohya logs as lr/d*lr.
  double logged_lr(double lr) const override;

 private:
  // Per parameter: "s", "exp_avg", "exp_avg_sq"; scalars "d", "k", "numerator_weighted".
  void update(const std::vector<double>& lrs) override;

  DAdaptAdamOptions options_;
};

}  // namespace lf
