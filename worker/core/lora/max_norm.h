// kohya's --scale_weight_norms (networks.lora LoRANetwork.apply_max_norm_regularization, after
// "Scaling weights to prevent dead neurons", Srivastava et al. 2014's max-norm constraint): after
// an optimizer step, every module whose delta W = (up @ down) * alpha / rank has a Frobenius
// norm above max_norm gets lora_up and lora_down each scaled by sqrt(max_norm / norm).
#pragma once

#include "lora/lora_network.h"

namespace lf {

struct MaxNormReport {
  int keys_scaled = 0;     // modules scaled (kohya "Keys Scaled")
  double mean_norm = 0.0;  // mean over modules of the norm after scaling ("Average key norm")
  double max_norm = 0.0;   // largest norm after scaling
};

// In place (no autograd), on every module of `network`: delta W is up @ down for Linear and
// 1x1 conv modules and the composed conv for k x k LoCon ones, as kohya computes it. Throws
// std::invalid_argument for max_norm <= 0.
MaxNormReport apply_max_norm_regularization(LoRANetwork& network, double max_norm);

}  // namespace lf
