// The config's optimizer keys -> the core's optimizer (see header).
#include "worker/train/optimizer_setup.h"

#include <stdexcept>

#include "common/config/optimizer_keys.h"
#include "worker/core/train/optim/make_optimizer.h"

namespace lf {

std::unique_ptr<LoRAOptimizer> build_lora_optimizer(const JobConfig& config,
                                                    std::vector<torch::Tensor> params,
                                                    std::vector<double> lrs) {
  const auto [choice, error] = read_optimizer(config.training);
  if (error) throw ConfigError("training." + error->key + ": " + error->problem);
  OptimizerSpec spec;
  spec.type = choice.type;
  spec.args = choice.args;
  try {
    return make_optimizer(spec, std::move(params), std::move(lrs));
  } catch (const std::invalid_argument& e) {
    throw ConfigError(std::string("training.optimizer_type ") + choice.type + ": " + e.what());
  }
}

}  // namespace lf
