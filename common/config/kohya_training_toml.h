// kohya sd-scripts' training `--config_file` TOML read as-is: the file kohya's GUI saves and
// `train_network.py --output_config` writes, whose keys are train_network.py's argument names.
// As kohya's train_util.read_config_from_file, the top-level tables ([model_arguments],
// [training_arguments], ...) are flattened into one namespace of arguments; each argument then
// meets its fate (kohya_arg_fates.h): it sets the job key of its name, is mapped by a rule
// (network_args, network_module, ...), is ignored with a warning, or is accepted only at its
// no-op value. The dataset `.toml` the file names in dataset_config is read as form 3 of the job
// YAML (dataset_config.h).
//
// The result is the job YAML that says the same, parsed by parse_job_config (job_config.h), so
// a kohya TOML and its equivalent YAML give the same JobConfig, and the workers receive that
// YAML from the coordinator as they would the user's own. An optional lorafleet job YAML adds
// lorafleet's own keys (coordinator, worker, cluster, model.architecture, ...); a key given in
// both files is refused. Every message names the file and line of the argument or key that
// caused it: "<toml>:<line>: kohya argument '<name>': <problem>".
#pragma once

#include <string>

#include "common/config/job_config.h"

namespace lf {

// Parses a kohya training TOML (`toml_text`, read from `toml_path`) with an optional lorafleet
// job YAML (`job_yaml_text`, read from `job_yaml_path`; null for none). Relative paths resolve
// against base_dir, as parse_job_config. The JobConfig's yaml_text is the resolved job YAML,
// its source_name "<toml_path> (as job YAML)", and dataset_warnings start with the warnings of
// the ignored and no-op kohya arguments. Throws ConfigError "<file>:<line>: ..." for TOML
// syntax errors, unknown or refused arguments, keys given twice, and every error
// parse_job_config finds (pointing at the argument or YAML key that gave the value).
JobConfig parse_kohya_training_toml(const std::string& toml_text, const std::string& toml_path,
                                    const std::string* job_yaml_text,
                                    const std::string& job_yaml_path, const std::string& base_dir);

// Reads the files and parses them, relative paths against the current working directory (as
// kohya). As kohya, ".toml" is appended to a toml_path that does not end with it. job_yaml_path
// "" means none. Throws ConfigError naming a file that cannot be read.
JobConfig load_kohya_training_config(const std::string& toml_path,
                                     const std::string& job_yaml_path);

}  // namespace lf
