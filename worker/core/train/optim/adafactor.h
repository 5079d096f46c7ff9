// Adafactor (Shazeer & Stern 2018), as transformers.optimization.Adafactor, kohya's
// optimizer_type "AdaFactor". kohya's default is relative_step=True: the optimizer computes its
// own lr (min(1e-2, 1/sqrt(step)), times the parameter's RMS with scale_parameter) and the lr
// schedule only reports it (kohya's "adafactor" scheduler, transformers AdafactorSchedule).
#pragma once

#include <optional>

#include "train/optimizer.h"

namespace lf {

struct AdafactorOptions {
  double eps1 = 1e-30;  // transformers' eps=(1e-30, 1e-3): added to grad^2
  double eps2 = 1e-3;   // the floor of the parameter scale
  double clip_threshold = 1.0;
  double decay_rate = -0.8;
  std::optional<double> beta1;  // none: no first moment
  double weight_decay = 0.0;
  bool scale_parameter = true;
  bool relative_step = true;  // kohya's default when optimizer_args do not set it
  bool warmup_init = false;
};

class AdafactorOptimizer final : public SlotStateOptimizer {
 public:
  // Throws std::invalid_argument for warmup_init without relative_step (transformers'
  // "warmup_init=True requires relative_step=True"), else as LoRAOptimizer's.
  AdafactorOptimizer(std::vector<torch::Tensor> params, const AdafactorOptions& options,
                     std::vector<double> lr_multipliers = {});
  std::string type() const override { return "AdaFactor"; }
  // relative_step: the lr the first parameter stepped with (AdafactorSchedule.get_lr).
  double logged_lr(double lr) const override;

 private:
  // Per parameter: "step", "exp_avg" (with beta1), and "exp_avg_sq_row" [..., rows] +
  // "exp_avg_sq_col" [..., cols] for tensors of >= 2 dims (factored over the last two), else
  // "exp_avg_sq".
  void update(const std::vector<double>& lrs) override;
  void step_one(std::size_t i, double group_lr);

  AdafactorOptions options_;
  double first_lr_ = 0.0;  // the lr parameter 0 stepped with last
};

}  // namespace lf
