// The dataset blueprint: kohya sd-scripts dataset-config semantics (library/config_util.py,
// docs/config_README-en.md). A job has one or more datasets, each with its own resolution,
// buckets and batch size, each holding subsets (image folders) with their own repeats, caption
// and augmentation options. Every value is resolved, first given wins:
//   subset -> dataset -> [general] of a kohya .toml -> the job YAML's `dataset:` section -> default
// (kohya: subset -> dataset -> general -> CLI argument -> default; our `dataset:` section plays
// the CLI's part).
//
// Three ways to write it, one result:
//   1. `dataset: {train_data_dir, reg_data_dir}` — kohya's DreamBooth folders; subsets come from
//      "<num_repeats>_<class tokens>" sub-folders at scan time (one dataset).
//   2. `datasets:` — a YAML list of datasets, each with a `subsets:` list (as [[datasets]]).
//   3. `dataset: {dataset_config: path.toml}` — a kohya dataset-config TOML file, used as-is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/data/bucket_manager.h"
#include "common/data/caption.h"

namespace lf {

// One image folder with everything resolved. Only DreamBooth subsets (image_dir) exist.
struct SubsetConfig {
  std::string image_dir;          // absolute or resolved against the config's base dir
  int num_repeats = 1;            // kohya: subsets with num_repeats < 1 are ignored
  bool is_reg = false;
  bool has_class_tokens = false;  // class_tokens given (possibly "")
  std::string class_tokens;       // caption for images without a caption file
  std::string caption_extension = ".caption";  // kohya's CLI default; "." added if missing
  CaptionOptions caption;
  bool flip_aug = false;
  bool random_crop = false;
  bool alpha_mask = false;        // keep alpha as a loss mask instead of compositing on white
  std::string origin;             // "<file>:<line>" of the subset, for messages
};

// One dataset: bucket options and batch size shared by its subsets.
struct DatasetConfig {
  BucketOptions buckets;          // resolution, enable_bucket, min/max_bucket_reso, steps, ...
  int batch_size = 1;             // per rank; falls back to training.train_batch_size
  std::vector<SubsetConfig> subsets;
  // Form 1 only: parent folders whose "<n>_<tokens>" sub-folders become subsets at scan time,
  // with `folder_defaults` as their options (num_repeats/class_tokens/image_dir come from the
  // folder). Empty in forms 2 and 3.
  std::string train_data_dir;
  std::string reg_data_dir;
  SubsetConfig folder_defaults;
  std::string origin;             // "<file>:<line>" of the dataset
  // kohya validation_split: the fraction of each train (non-reg) subset's images held out of
  // every epoch plan for the validation loss, in [0, 1); 0 = none.
  double validation_split = 0.0;
  // kohya validation_seed: the seed of the held-out choice; unset = training.seed (kohya falls
  // back to the --seed state of Python's random).
  std::optional<std::int64_t> validation_seed;
};

// Thrown (as ConfigError, see job_config.h) with "<file>:<line>: ..." for unknown keys, wrong
// types and invalid values in either the YAML or the TOML form.

// Parses a kohya dataset-config TOML file ([general], [[datasets]], [[datasets.subsets]]).
// `defaults` carries the values of the job YAML's `dataset:` section (the CLI level); relative
// image_dir paths resolve against the current directory, as kohya does. Throws ConfigError
// "<toml path>:<line>: ..." for syntax errors, unknown keys (kohya keys lorafleet does not
// implement are named as such), wrong types and invalid values.
std::vector<DatasetConfig> load_kohya_dataset_toml(const std::string& path,
                                                   const DatasetConfig& defaults,
                                                   std::vector<std::string>* warnings);

}  // namespace lf
