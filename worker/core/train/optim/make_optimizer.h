// Builds the LoRA optimizer kohya's optimizer_type names, with kohya's optimizer_args
// (train_util.get_optimizer): the arguments each algorithm takes, at its PyPI reference's
// defaults unless given, and kohya's own defaults where kohya sets them (SGDNesterov's
// momentum 0.9, Adafactor's relative_step True).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "train/optimizer.h"

namespace lf {

struct OptimizerSpec {
  // One of optimizer_types(): kohya's spelling ("AdamW", "Lion", "SGDNesterov", "SGD",
  // "AdaFactor", "Prodigy", "DAdaptAdam", "AdamWScheduleFree").
  std::string type = "AdamW";
  // optimizer_args by name, as numbers: a bool is 0 / 1, a tuple (betas, eps of Adafactor)
  // its elements; an argument not given (or given as None) keeps the default.
  std::map<std::string, std::vector<double>> args;
};

// The implemented types, and the arguments each one takes, in kohya's / the reference's names.
const std::map<std::string, std::vector<std::string>>& optimizer_types();

// Throws std::invalid_argument naming the type and the argument for an unknown type, an
// argument the type does not take, a value of the wrong arity, or what the algorithm refuses
// (e.g. Prodigy with different lrs per group); else as LoRAOptimizer's constructor.
std::unique_ptr<LoRAOptimizer> make_optimizer(const OptimizerSpec& spec,
                                              std::vector<torch::Tensor> params,
                                              std::vector<double> lr_multipliers = {});

}  // namespace lf
