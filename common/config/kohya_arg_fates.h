// What lorafleet does with each argument of kohya sd-scripts' train_network.py (and
// sdxl_train_network.py) when it is given in a kohya training `--config_file` TOML
// (kohya_training_toml.h). One declaration per argument, in kohya_arg_fates.cpp; the names are
// the `dest` of kohya's parser: train_network.setup_parser with train_util.add_sd_models_arguments,
// add_dataset_arguments, add_training_arguments, add_masked_loss_arguments,
// add_optimizer_arguments, sai_model_spec.add_model_spec_arguments,
// config_util.add_config_arguments, custom_train_functions.add_custom_train_arguments,
// deepspeed_utils.add_deepspeed_arguments, utils.add_logging_arguments, and
// sdxl_train_util.add_sdxl_training_arguments. tests/fixtures/kohya/train_network_args.txt lists
// them; a test checks that this table covers exactly that list.
#pragma once

#include <string>
#include <vector>

namespace lf {

enum class KohyaArgFate {
  // Sets the job key of the same name (job_keys()), or the kohya dataset key of the same name
  // at the `dataset:` section's level (kohya's CLI level, dataset_keys.h).
  kKey,
  // Sets job keys by a rule of its own, described by `detail` (network_args, network_module,
  // save_model_as, no_half_vae, use_8bit_adam, use_lion_optimizer).
  kMapped,
  // Accepted at any value, with a warning: the choice does not change what is trained, or
  // lorafleet makes it itself (`detail` says which key does).
  kIgnored,
  // Accepted only at its no-op value (`noop`), with a warning; any other value is refused with
  // `detail` as the reason.
  kNoOpOnly,
};

struct KohyaArg {
  const char* name;  // kohya's argument name, without "--"
  KohyaArgFate fate;
  // kNoOpOnly: the accepted values, '|'-separated: "off" (false, 0, 0.0, "" or []), or a value
  // as TOML writes it ("true", "1"). Empty for the other fates.
  const char* noop;
  const char* detail;  // kMapped: what it sets; kIgnored / kNoOpOnly: why; kKey: "" or a note
  // kKey only: kohya's default as a YAML value, where it differs from lorafleet's default; the
  // reader writes it when neither file gives the key ("" = the defaults agree).
  const char* kohya_default;
};

// Every argument, in kohya's order.
const std::vector<KohyaArg>& kohya_args();

// The argument `name`, or nullptr when kohya's train_network.py has no such argument.
const KohyaArg* find_kohya_arg(const std::string& name);

// The job key an argument of that name sets: "training.seed", "dataset.resolution" (a kohya
// dataset key at the `dataset:` level), or "" when there is none.
std::string kohya_arg_target(const std::string& name);

// The fate the reader applies: kKey when a job key of the argument's name exists (a key added
// since the table was written wins over its kIgnored / kNoOpOnly / kMapped line), else `fate`.
KohyaArgFate effective_fate(const KohyaArg& arg);

// "off (false, 0 or \"\")", "`true`", ...: the accepted values of a kNoOpOnly argument, for
// messages and the documentation.
std::string kohya_noop_text(const KohyaArg& arg);

// The table as Markdown rows "| `name` | fate | what lorafleet does |", one per argument (fate:
// key, mapped, ignored, or "no-op only" for kNoOpOnly and the kohya dataset keys lorafleet
// accepts only at their no-op value), for
// `lorafleet-coordinator --list-kohya-args` and docs/configuration.md (a test checks the page
// holds these rows).
std::string kohya_args_markdown();

}  // namespace lf
