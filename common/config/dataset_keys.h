// The kohya dataset-config keys and how a subset's values are found through the levels, shared
// by the job YAML parser (job_config.cpp) and the kohya TOML loader (dataset_config.cpp), so both
// forms accept the same keys and resolve to the same DatasetConfig. Mirrors kohya sd-scripts
// library/config_util.py: ConfigSanitizer (which key is allowed where, with which type) and
// BlueprintGenerator.generate_params_by_fallbacks (subset -> dataset -> general -> CLI -> default,
// the first level that gives a key wins, even when it gives the default value).
// Internal to common/config; the public interface is dataset_config.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/config/dataset_config.h"

namespace lf {
namespace dataset_keys {

enum class KeyType { kBool, kInt, kNumber, kString, kResolution, kFloatPair, kTable };

// The levels a key may be written at (a bit set).
enum Level : unsigned {
  kSubset = 1,   // [[datasets.subsets]] / a `subsets:` entry
  kDataset = 2,  // [[datasets]] / a `datasets:` entry
  kGeneral = 4,  // [general] of a kohya TOML
  kSection = 8,  // the job YAML's `dataset:` section (kohya's CLI arguments)
};

struct KeySpec {
  const char* name;
  KeyType type;
  unsigned levels;        // Level bits
  bool supported;         // false: kohya key accepted only with its no-op value (a warning)
  const char* canonical;  // legacy spelling -> the key it stands for; nullptr otherwise
};

// Every key, in documentation order.
const std::vector<KeySpec>& all_keys();
// The key `name` if it may be written at `level`, else nullptr.
const KeySpec* find_key(const std::string& name, Level level);
// "an integer", "true or false", ...: what a value of `type` must look like.
std::string expected_of(KeyType type);
// Names allowed at `level` (legacy spellings left out), for "expected one of: ..." messages.
std::vector<std::string> names_at(Level level);
// "" when `name` is not a kohya key at any level, else where it may be written, e.g.
// "[[datasets.subsets]]" (toml) or "subsets: entries" (YAML), for a "not allowed here" message.
std::string allowed_levels_text(const std::string& name, bool toml);

// A value as written at one level, already checked against its key's type.
struct GivenValue {
  bool null = false;  // YAML null (kohya None) for a key with no string form: "not given"
  bool b = false;
  std::int64_t i = 0;
  double d = 0.0;
  std::string s;
  int w = 0, h = 0;   // kResolution
  double lo = 0.0, hi = 0.0;  // kFloatPair
  std::size_t table_size = 0;  // kTable
  int line = 1;       // line of the key
  std::string text;   // the value as written, for messages
};

// One level: a subset, a dataset, [general] or the YAML `dataset:` section.
struct GivenLevel {
  std::string source;     // the file it was read from
  std::string path;       // dotted key prefix: "dataset", "general", "datasets[0].subsets[1]"
  int line = 1;           // where it starts
  std::string path_base;  // a relative image_dir resolves against this ("" leaves it relative)
  std::map<std::string, GivenValue> values;  // canonical key -> value
};

// Stores a value read for `spec` at `level`: a legacy spelling goes under its canonical key (both
// spellings given is a ConfigError), and a key lorafleet does not implement is dropped with a
// warning when its value is kohya's no-op, or is a ConfigError naming it otherwise.
void store(GivenLevel& level, const KeySpec& spec, GivenValue value,
           std::vector<std::string>* warnings);

struct DatasetLevels {
  GivenLevel dataset;
  std::vector<GivenLevel> subsets;
};

struct TomlLevels {
  GivenLevel general;  // empty when the file has no [general]
  std::vector<DatasetLevels> datasets;
};

// Reads a kohya dataset-config TOML file into its levels (dataset_config.cpp): from `text` when
// given (the file's contents, read elsewhere), else from the file. Relative image_dir values
// resolve against image_base, or the current directory when it is "" (kohya). Throws
// ConfigError "<path>:<line>: ..." for syntax errors, unknown or misplaced keys and wrong types.
TomlLevels read_toml_levels(const std::string& path, std::vector<std::string>* warnings,
                            const std::string* text = nullptr,
                            const std::string& image_base = "");

// Forms 2 and 3: resolves every subset through subset -> dataset -> general -> section ->
// `defaults` (general and section may be null) and validates the result. Subsets with
// num_repeats < 1 and repeated image_dirs inside a dataset are dropped with a warning, as kohya.
// `defaults_note` says, in messages, where a value no level gave came from.
std::vector<DatasetConfig> resolve_datasets(const std::vector<DatasetLevels>& datasets,
                                            const GivenLevel* general, const GivenLevel* section,
                                            const DatasetConfig& defaults,
                                            const std::string& defaults_note,
                                            std::vector<std::string>* warnings);

// Form 1: the one dataset of train_data_dir/reg_data_dir, options and folder_defaults from the
// `dataset:` section over `defaults`, validated (messages name 'dataset.<key>').
DatasetConfig resolve_folder_dataset(const GivenLevel& section, const DatasetConfig& defaults);

// `path` joined to `base` when relative and base is non-empty, lexically normalised.
std::string resolve_path(const std::string& base, const std::string& path);

}  // namespace dataset_keys
}  // namespace lf
