// Job configuration: the YAML file under configs/ that the coordinator reads and sends, as text,
// to every worker at registration. Key names follow kohya sd-scripts (train_network.py flags and
// dataset-config keys) so that a kohya user recognises them. Every key, with its default, rule
// and doc line, is declared once in job_keys.h; the section structs below hold them.
//
// Parsing is strict: an unknown key or a value of the wrong type is a ConfigError whose message
// starts with "<file>:<line>:" and names the key and what was expected.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/config/dataset_config.h"
#include "common/config/job_keys.h"

namespace lf {

// Thrown for any invalid configuration. what() = "<file>:<line>: <key>: <problem>".
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Declares one section member per KEY(type, name, default, rule, doc) of job_keys.h.
#define LF_DECLARE_KEY_MEMBER(type, name, default_value, rule, doc) type name = default_value;

struct ModelSection {
  LF_MODEL_KEYS(LF_DECLARE_KEY_MEMBER)
};

// The job YAML's `dataset:` section. It plays kohya's command line: train_data_dir/reg_data_dir
// (form 1, see dataset_config.h), the fallback level below [general] for every kohya dataset and
// subset key (the kohya caption/augmentation keys it takes are resolved into JobConfig::datasets,
// not stored here), and lorafleet's own dataset options. cache_dir is filled in by the parser
// (<output_dir>/cache when not given).
struct DatasetSection {
  LF_DATASET_KEYS(LF_DECLARE_KEY_MEMBER)
  // The section's own view of these kohya keys (dataset_keys.cpp declares them), as given there
  // or kohya's defaults: code that reads the section rather than a resolved dataset uses them.
  int resolution_w = 512;  // "resolution: 512" or "resolution: [W, H]"
  int resolution_h = 512;
  bool enable_bucket = true;
  int min_bucket_reso = 256;
  int max_bucket_reso = 1024;
  int bucket_reso_steps = 64;
  bool bucket_no_upscale = false;
  std::string caption_extension = ".caption";  // kohya's default; "." added if missing
};

struct NetworkSection {
  LF_NETWORK_KEYS(LF_DECLARE_KEY_MEMBER)

  // kohya's rule for unet_lr / text_encoder_lr (train_network.py): a part whose own lr is 0 is
  // left out of the network (its LoRA is neither created nor saved), as is a part excluded by
  // network_train_*_only. Unset lrs are training.learning_rate and keep the part.
  bool trains_unet() const {
    return !network_train_text_encoder_only && !(unet_lr && *unet_lr == 0);
  }
  // kohya networks.oft (algo oft) trains the U-Net only.
  bool trains_text_encoder() const {
    return !network_train_unet_only && !(text_encoder_lr && *text_encoder_lr == 0) && algo != "oft";
  }
};

struct TrainingSection {
  LF_TRAINING_KEYS(LF_DECLARE_KEY_MEMBER)
};

struct OutputSection {
  LF_OUTPUT_KEYS(LF_DECLARE_KEY_MEMBER)
};

struct CoordinatorSection {
  LF_COORDINATOR_KEYS(LF_DECLARE_KEY_MEMBER)
};

struct WorkerSection {
  LF_WORKER_KEYS(LF_DECLARE_KEY_MEMBER)
};

// How the group is launched, supervised and kept from hanging (docs/cluster.md).
struct ClusterSection {
  LF_CLUSTER_KEYS(LF_DECLARE_KEY_MEMBER)
};

#undef LF_DECLARE_KEY_MEMBER

struct JobConfig {
  ModelSection model;
  DatasetSection dataset;
  NetworkSection network;
  TrainingSection training;
  OutputSection output;
  CoordinatorSection coordinator;
  WorkerSection worker;
  ClusterSection cluster;

  // The resolved datasets, whichever of the three forms (dataset_config.h) the YAML uses; never
  // empty after parsing. Form 1 gives one dataset with train_data_dir/reg_data_dir and
  // folder_defaults; forms 2 and 3 give the listed datasets and subsets.
  std::vector<DatasetConfig> datasets;
  // "<file>:<line>: ..." notes for the log: ignored kohya keys, ignored subsets and dirs, and
  // kohya's warnings about other keys (zero_terminal_snr without v_parameterization).
  std::vector<std::string> dataset_warnings;

  std::string source_name;          // file path (or "<string>") the config came from
  std::string yaml_text;            // the text as read, sent to workers verbatim
  std::string dataset_config_text;  // the kohya .toml's text when dataset_config is set
  // output.sample_prompts' text: read by the coordinator (CoordinatorJob), which sends it to
  // the workers; "" without sample prompts.
  std::string sample_prompts_text;
};

// Parses YAML text. Relative paths (model, vocab, data dirs, dataset_config, image_dir of
// `datasets:` subsets, network_weights, output_dir, cache_dir) are resolved against base_dir when
// non-empty; image_dir in a kohya .toml resolves against the current directory, as kohya. As
// kohya, a caption_extension without its leading "." gets one (network_alpha 0 is kept as
// given: the LoRA network reads it as network_dim, as kohya's LoRAModule). With
// dataset.dataset_config the .toml file is read here, unless its text is given as
// dataset_config_text (workers get it from the coordinator, so the file need not exist on their
// hosts); relative image_dir values in it resolve against base_dir (the coordinator's working
// directory). Throws ConfigError("<source_name>:<line>: ...") (or
// "<toml path>:<line>: ...") on syntax errors, unknown or duplicate keys, wrong types and
// invalid values.
JobConfig parse_job_config(const std::string& yaml_text, const std::string& source_name,
                           const std::string& base_dir = "",
                           const std::string* dataset_config_text = nullptr);

// Reads and parses a file, resolving relative paths against the current working directory (as
// kohya does); throws ConfigError naming the path if it cannot be read.
JobConfig load_job_config(const std::string& path);

}  // namespace lf
