// Schedule-free AdamW (Defazio et al. 2024, "The Road Less Scheduled"), as PyPI schedulefree
// 1.4 AdamWScheduleFree, kohya's optimizer_type "AdamWScheduleFree". Training steps the
// interpolated point y; evaluation (and what is saved) is the average x. kohya runs it without
// an lr schedule (its warmup is the optimizer's own warmup_steps).
#pragma once

#include "train/optimizer.h"

namespace lf {

struct ScheduleFreeAdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  int64_t warmup_steps = 0;
  double r = 0.0;
  double weight_lr_power = 2.0;
};

class ScheduleFreeAdamWOptimizer final : public SlotStateOptimizer {
 public:
  // See LoRAOptimizer's constructor for params / lr_multipliers and what it throws. Starts in
  // train mode (kohya calls optimizer.train() before the first step).
  ScheduleFreeAdamWOptimizer(std::vector<torch::Tensor> params,
                             const ScheduleFreeAdamWOptions& options,
                             std::vector<double> lr_multipliers = {});
  std::string type() const override { return "AdamWScheduleFree"; }
  // schedulefree eval(): p = lerp(y, z, 1 - 1/beta1) = x. train(): p = lerp(x, z, 1 - beta1).
  // Each is a no-op when the parameters are already in that mode.
  void use_eval_weights() override;
  void use_train_weights() override;
  bool train_mode() const { return state_.scalars.at("train_mode") != 0; }

 private:
  // Per parameter: "z", "exp_avg_sq", "lr_max", "weight_sum" (its group's, 0-dim float64);
  // scalars "k" and "train_mode". Throws std::logic_error in eval mode (as schedulefree).
  void update(const std::vector<double>& lrs) override;
  void lerp_to_z(double weight);

  ScheduleFreeAdamWOptions options_;
};

}  // namespace lf
