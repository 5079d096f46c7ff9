// The job's optimizer: training.optimizer_type / optimizer_args (common/config/optimizer_keys.h)
// built as the core's LoRAOptimizer (worker/core/train/optim/make_optimizer.h), with kohya's
// per-parameter lrs as multipliers.
#pragma once

#include <memory>
#include <vector>

#include "common/config/job_config.h"
#include "worker/core/train/optimizer.h"

namespace lf {

// lrs[i] is parameter i's lr at a schedule factor of 1 (lora_parameter_lrs). Throws ConfigError
// naming training.optimizer_type / optimizer_args when the config's optimizer cannot be built
// (the coordinator refuses those configs before any worker starts).
std::unique_ptr<LoRAOptimizer> build_lora_optimizer(const JobConfig& config,
                                                    std::vector<torch::Tensor> params,
                                                    std::vector<double> lrs);

}  // namespace lf
