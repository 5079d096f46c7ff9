// AdamW as torch.optim.AdamW (amsgrad off, its single-tensor path: the one torch takes for CPU
// tensors, op for op), kohya's default optimizer_type.
#pragma once

#include "train/optimizer.h"

namespace lf {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;  // decoupled; torch.optim.AdamW's default (kohya's default too)
};

class AdamWOptimizer final : public SlotStateOptimizer {
 public:
  // See LoRAOptimizer's constructor for params / lr_multipliers and what it throws.
  AdamWOptimizer(std::vector<torch::Tensor> params, const AdamWOptions& options,
                 std::vector<double> lr_multipliers = {});
  std::string type() const override { return "AdamW"; }

 private:
  void update(const std::vector<double>& lrs) override;
  // "<name>.exp_avg", "<name>.exp_avg_sq" per parameter (after its first step).

  AdamWOptions options_;
};

}  // namespace lf
