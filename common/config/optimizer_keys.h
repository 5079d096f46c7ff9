// The optimizer keys of the training section, optimizer_type and optimizer_args, read as kohya
// sd-scripts' train_util.get_optimizer reads them: the type case-insensitively, by kohya's names
// or the reference's class path, and each "key=value" argument as a Python literal. The worker
// builds the optimizer from the same reading (worker/train/optimizer_setup.h); the algorithms
// are in worker/core/train/optim/.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lf {

struct JobConfig;
struct TrainingSection;

// An implemented optimizer and its arguments.
struct OptimizerInfo {
  std::string type;       // kohya's spelling: "Prodigy"
  std::string reference;  // the PyPI implementation it matches: "prodigyopt.Prodigy"
  // Argument -> its form: "number", "bool", "pair" (two numbers), "number or None".
  std::vector<std::pair<std::string, std::string>> args;
};
const std::vector<OptimizerInfo>& implemented_optimizers();

// kohya optimizer_type values lorafleet refuses, lower-case, with the reason.
const std::map<std::string, std::string>& refused_optimizers();

// The implemented type `name` means (case-insensitive, aliases and class paths included), or
// std::nullopt.
std::optional<std::string> canonical_optimizer_type(const std::string& name);

struct OptimizerChoice {
  std::string type = "AdamW";
  // As worker/core's OptimizerSpec: numbers, a bool as 0 / 1, a pair as two. AdamW's betas,
  // eps and weight_decay default to training.adam_beta1/_beta2/_epsilon/_weight_decay.
  std::map<std::string, std::vector<double>> args;
  // The lr comes from the optimizer: AdaFactor with relative_step (kohya's "adafactor"
  // schedule), or is constant: AdamWScheduleFree (kohya runs it with a dummy scheduler).
  bool relative_step = false;
  bool schedule_free = false;
};

// A problem with one key: "training.<key>" and what is wrong, for a ConfigError.
struct OptimizerKeyError {
  std::string key;
  std::string problem;
};

// Reads optimizer_type and optimizer_args; the first problem found, if any.
std::pair<OptimizerChoice, std::optional<OptimizerKeyError>> read_optimizer(
    const TrainingSection& t);

// kohya's ss_optimizer metadata ("<module>.<class>(<optimizer_args>)", as train_util
// get_optimizer builds it, e.g. "prodigyopt.prodigy.Prodigy(d_coef=2,decouple=True)"), for a
// non-AdamW optimizer or AdamW with optimizer_args; std::nullopt for plain AdamW (the LoRA
// file writes its adam_* keys then). kohya's own defaults it adds to the arguments are in:
// SGDNesterov's momentum=0.9, AdaFactor's relative_step=True.
std::optional<std::string> kohya_ss_optimizer(const TrainingSection& t);
// kohya's ss_lr_scheduler: "adafactor:<learning_rate>" when AdaFactor's relative_step replaces
// the schedule (kohya rewrites args.lr_scheduler so), else lr_scheduler.
std::string kohya_ss_lr_scheduler(const TrainingSection& t, const std::string& lr_text);

// The rules across keys, as kohya's get_optimizer / get_scheduler_fix: Prodigy and DAdaptAdam
// need one lr for every trained part (prodigyopt / dadaptation raise otherwise), and kohya's
// warnings (a D-Adaptation lr below 0.1, a schedule that AdaFactor's relative_step or
// schedule-free replaces) appended to `warnings`.
std::optional<OptimizerKeyError> check_optimizer(const JobConfig& c,
                                                 std::vector<std::string>& warnings);

}  // namespace lf
