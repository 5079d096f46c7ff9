// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"), as PyPI lion-pytorch
// Lion (lion_pytorch.update_fn), kohya's optimizer_type "Lion".
#pragma once

#include "train/optimizer.h"

namespace lf {

struct LionOptions {
  double beta1 = 0.9;  // lion-pytorch's betas default (0.9, 0.99)
  double beta2 = 0.99;
  double weight_decay = 0.0;  // decoupled: p *= 1 - lr * weight_decay
};

class LionOptimizer final : public SlotStateOptimizer {
 public:
  // See LoRAOptimizer's constructor for params / lr_multipliers and what it throws.
  LionOptimizer(std::vector<torch::Tensor> params, const LionOptions& options,
                std::vector<double> lr_multipliers = {});
  std::string type() const override { return "Lion"; }

 private:
  // Per parameter: "<name>.exp_avg".
  void update(const std::vector<double>& lrs) override;

  LionOptions options_;
};

}  // namespace lf
