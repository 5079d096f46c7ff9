// SGD with momentum and Nesterov momentum, as torch.optim.SGD (_single_tensor_sgd): kohya's
// optimizer_type "SGDNesterov" (nesterov=True, momentum 0.9 unless given) and "SGD"
// (torch.optim.SGD by kohya's class-path form).
#pragma once

#include "train/optimizer.h"

namespace lf {

struct SGDOptions {
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  // L2, added to the gradient (not decoupled)
  bool nesterov = false;      // needs momentum > 0 and dampening 0 (as torch)
};

class SGDOptimizer final : public SlotStateOptimizer {
 public:
  // Throws std::invalid_argument for nesterov without momentum or with dampening (torch's
  // "Nesterov momentum requires a momentum and zero dampening"), else as LoRAOptimizer's.
  SGDOptimizer(std::vector<torch::Tensor> params, const SGDOptions& options,
               std::vector<double> lr_multipliers = {}, std::string kohya_type = "SGD");
  std::string type() const override { return type_; }

 private:
  // Per parameter: "<name>.momentum_buffer" (after its first step, with momentum).
  void update(const std::vector<double>& lrs) override;

  SGDOptions options_;
  std::string type_;
};

}  // namespace lf
