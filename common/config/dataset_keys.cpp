// The kohya dataset-config key schema and the level-by-level resolution of subsets and datasets
// (kohya sd-scripts library/config_util.py), with the validation of every resolved value. An
// error names the file, line and dotted key of the level that gave the bad value, so a value
// inherited from [general] points at [general], not at the dataset that uses it.
#include "common/config/dataset_keys.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "common/config/job_config.h"

namespace lf {
namespace dataset_keys {
namespace {

namespace fs = std::filesystem;

constexpr unsigned S = kSubset;
constexpr unsigned D = kDataset;
constexpr unsigned G = kGeneral;
constexpr unsigned C = kSection;

std::string num(double d) {
  std::ostringstream os;
  os << d;
  return os.str();
}

// kohya's value that changes nothing for a key lorafleet does not implement, as shown in
// messages. token_warmup_min is a no-op whatever its value, because its partner
// (token_warmup_step) is only accepted at 0.
std::string noop_text(const std::string& name) {
  if (name == "color_aug" || name == "enable_wildcard") return "false";
  if (name == "face_crop_aug_range") return "nothing (YAML null, kohya's None)";
  if (name == "token_warmup_step") return "0";
  if (name == "network_multiplier") return "1.0";
  if (name == "custom_attributes") return "an empty table";
  if (name == "token_warmup_min") return "any integer";
  if (name == "cache_info") return "true or false";
  return "\"\"";  // secondary_separator, resize_interpolation, metadata_file, conditioning_data_dir
}

bool is_noop(const std::string& name, const GivenValue& v) {
  if (v.null) return true;
  if (name == "color_aug" || name == "enable_wildcard") return !v.b;
  if (name == "face_crop_aug_range") return false;
  if (name == "token_warmup_step") return v.d == 0.0;
  if (name == "network_multiplier") return v.d == 1.0;
  if (name == "custom_attributes") return v.table_size == 0;
  if (name == "token_warmup_min" || name == "cache_info") return true;
  return v.s.empty();
}

std::string where(const std::string& source, int line) {
  return source + ":" + std::to_string(line);
}

// The values of one subset or dataset: the first of `levels` (highest first) that gives a key.
class Chain {
 public:
  struct Hit {
    const GivenValue* value = nullptr;
    const GivenLevel* level = nullptr;
  };

  Chain(std::vector<const GivenLevel*> levels, const GivenLevel& owner, std::string defaults_note)
      : levels_(std::move(levels)), owner_(owner), note_(std::move(defaults_note)) {}

  Hit find(const std::string& key) const {
    for (const GivenLevel* level : levels_) {
      if (level == nullptr) continue;
      auto it = level->values.find(key);
      if (it != level->values.end() && !it->second.null) return {&it->second, level};
    }
    return {};
  }

  bool boolean(const std::string& key, bool fallback) const {
    const Hit h = find(key);
    return h.value ? h.value->b : fallback;
  }
  int integer(const std::string& key, int fallback) const {
    const Hit h = find(key);
    return h.value ? static_cast<int>(h.value->i) : fallback;
  }
  double number(const std::string& key, double fallback) const {
    const Hit h = find(key);
    return h.value ? h.value->d : fallback;
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    const Hit h = find(key);
    return h.value ? h.value->s : fallback;
  }

  // "<file>:<line>: key '<level>.<key>': <problem>" at the level that gave the value, naming
  // the subset/dataset that uses it when that is another level.
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    const Hit h = find(key);
    if (h.value != nullptr) {
      std::string message = where(h.level->source, h.value->line) + ": key '" + h.level->path +
                            "." + key + "': " + problem;
      if (h.level != &owner_) {
        message += " (used by " + owner_.path + " at " + where(owner_.source, owner_.line) + ")";
      }
      throw ConfigError(message);
    }
    throw ConfigError(where(owner_.source, owner_.line) + ": key '" + owner_.path + "." + key +
                      "': " + problem + " (" + note_ + ")");
  }

  void require(bool ok, const std::string& key, const std::string& expected,
               const std::string& got) const {
    if (!ok) fail(key, "expected " + expected + ", got " + got);
  }

  const GivenLevel& owner() const { return owner_; }

 private:
  std::vector<const GivenLevel*> levels_;
  const GivenLevel& owner_;
  std::string note_;
};

// Bucket options and batch size, with the checks of kohya BucketManager /
// adjust_min_max_bucket_reso_by_steps applied after its rounding (the rounding itself and its
// warning are BucketManager's).
void resolve_options(const Chain& c, const DatasetConfig& defaults, DatasetConfig* out) {
  BucketOptions b = defaults.buckets;
  if (const Chain::Hit h = c.find("resolution"); h.value != nullptr) {
    b.resolution_w = h.value->w;
    b.resolution_h = h.value->h;
  }
  b.enable_bucket = c.boolean("enable_bucket", b.enable_bucket);
  b.min_bucket_reso = c.integer("min_bucket_reso", b.min_bucket_reso);
  b.max_bucket_reso = c.integer("max_bucket_reso", b.max_bucket_reso);
  b.bucket_reso_steps = c.integer("bucket_reso_steps", b.bucket_reso_steps);
  b.bucket_no_upscale = c.boolean("bucket_no_upscale", b.bucket_no_upscale);
  const int batch_size = c.integer("batch_size", defaults.batch_size);

  c.require(b.resolution_w >= 1 && b.resolution_h >= 1, "resolution", "sizes >= 1",
            std::to_string(b.resolution_w) + "x" + std::to_string(b.resolution_h));
  // Bucket sides become latent sides / 8 (the VAE's factor), so they must be multiples of 8
  // (kohya asks 64 for SD 1/2 and 32 for SDXL).
  c.require(b.bucket_reso_steps >= 8 && b.bucket_reso_steps % 8 == 0, "bucket_reso_steps",
            "a multiple of 8 (64 for SD 1.x/2.x, as kohya)", std::to_string(b.bucket_reso_steps));
  if (!b.enable_bucket) {
    c.require(b.resolution_w % 8 == 0 && b.resolution_h % 8 == 0, "resolution",
              "sides that are multiples of 8 when enable_bucket is false",
              std::to_string(b.resolution_w) + "x" + std::to_string(b.resolution_h));
  }
  c.require(b.min_bucket_reso >= 1, "min_bucket_reso", "an integer >= 1",
            std::to_string(b.min_bucket_reso));
  c.require(b.max_bucket_reso >= b.min_bucket_reso, "max_bucket_reso",
            "an integer >= min_bucket_reso (" + std::to_string(b.min_bucket_reso) + ")",
            std::to_string(b.max_bucket_reso));
  if (b.enable_bucket) {
    const int steps = b.bucket_reso_steps;
    const int min_r = b.min_bucket_reso - b.min_bucket_reso % steps;
    const int max_r = b.max_bucket_reso % steps == 0
                          ? b.max_bucket_reso
                          : b.max_bucket_reso + steps - b.max_bucket_reso % steps;
    const int small = std::min(b.resolution_w, b.resolution_h);
    const int large = std::max(b.resolution_w, b.resolution_h);
    c.require(min_r >= 1, "min_bucket_reso",
              "a value >= bucket_reso_steps (" + std::to_string(steps) + ")",
              std::to_string(b.min_bucket_reso));
    c.require(min_r <= small, "min_bucket_reso",
              "at most the smaller resolution side " + std::to_string(small) +
                  " (after rounding down to a multiple of bucket_reso_steps)",
              std::to_string(b.min_bucket_reso));
    c.require(max_r >= large, "max_bucket_reso",
              "at least the larger resolution side " + std::to_string(large),
              std::to_string(b.max_bucket_reso));
  }
  c.require(batch_size >= 1, "batch_size", "an integer >= 1", std::to_string(batch_size));
  out->buckets = b;
  out->batch_size = batch_size;
  out->validation_split = c.number("validation_split", defaults.validation_split);
  c.require(out->validation_split >= 0.0 && out->validation_split < 1.0, "validation_split",
            "a fraction in [0, 1) of each train subset's images to hold out",
            num(out->validation_split));
  out->validation_seed = defaults.validation_seed;
  if (const Chain::Hit h = c.find("validation_seed"); h.value != nullptr) {
    out->validation_seed = h.value->i;
  }
}

SubsetConfig resolve_subset(const Chain& c, const SubsetConfig& defaults, bool require_image_dir) {
  SubsetConfig s = defaults;
  if (const Chain::Hit h = c.find("image_dir"); h.value != nullptr) {
    s.image_dir = resolve_path(h.level->path_base, h.value->s);
  }
  if (require_image_dir) {
    c.require(!s.image_dir.empty(), "image_dir",
              "a non-empty path to a folder of images (required in every subset)", "nothing");
  }
  s.num_repeats = c.integer("num_repeats", defaults.num_repeats);
  s.is_reg = c.boolean("is_reg", defaults.is_reg);
  if (const Chain::Hit h = c.find("class_tokens"); h.value != nullptr) {
    s.has_class_tokens = true;
    s.class_tokens = h.value->s;
  }
  s.caption_extension = c.string("caption_extension", defaults.caption_extension);
  c.require(!s.caption_extension.empty(), "caption_extension",
            "a file extension such as .caption or .txt", "nothing");
  // kohya adds the leading "." when it is missing (config_util / train_util).
  if (s.caption_extension[0] != '.') s.caption_extension = "." + s.caption_extension;

  CaptionOptions& o = s.caption;
  const CaptionOptions& d = defaults.caption;
  o.shuffle_caption = c.boolean("shuffle_caption", d.shuffle_caption);
  o.caption_separator = c.string("caption_separator", d.caption_separator);
  o.keep_tokens = c.integer("keep_tokens", d.keep_tokens);
  o.keep_tokens_separator = c.string("keep_tokens_separator", d.keep_tokens_separator);
  o.caption_prefix = c.string("caption_prefix", d.caption_prefix);
  o.caption_suffix = c.string("caption_suffix", d.caption_suffix);
  o.caption_dropout_rate = c.number("caption_dropout_rate", d.caption_dropout_rate);
  o.caption_dropout_every_n_epochs =
      c.integer("caption_dropout_every_n_epochs", d.caption_dropout_every_n_epochs);
  o.caption_tag_dropout_rate = c.number("caption_tag_dropout_rate", d.caption_tag_dropout_rate);
  c.require(!o.caption_separator.empty(), "caption_separator",
            "a non-empty separator such as ','", "nothing");
  c.require(o.keep_tokens >= 0, "keep_tokens", "an integer >= 0", std::to_string(o.keep_tokens));
  c.require(o.caption_dropout_every_n_epochs >= 0, "caption_dropout_every_n_epochs",
            "an integer >= 0 (0 turns it off)", std::to_string(o.caption_dropout_every_n_epochs));
  c.require(o.caption_dropout_rate >= 0 && o.caption_dropout_rate <= 1, "caption_dropout_rate",
            "a number in [0, 1]", num(o.caption_dropout_rate));
  c.require(o.caption_tag_dropout_rate >= 0 && o.caption_tag_dropout_rate <= 1,
            "caption_tag_dropout_rate", "a number in [0, 1]", num(o.caption_tag_dropout_rate));

  s.flip_aug = c.boolean("flip_aug", defaults.flip_aug);
  s.random_crop = c.boolean("random_crop", defaults.random_crop);
  s.alpha_mask = c.boolean("alpha_mask", defaults.alpha_mask);
  s.origin = where(c.owner().source, c.owner().line);
  return s;
}

}  // namespace

const std::vector<KeySpec>& all_keys() {
  using T = KeyType;
  static const std::vector<KeySpec> keys = {
      // Subset keys (all but image_dir, is_reg and alpha_mask also act as fallbacks above).
      {"image_dir", T::kString, S, true, nullptr},
      {"num_repeats", T::kInt, S | D | G, true, nullptr},
      {"is_reg", T::kBool, S, true, nullptr},
      {"class_tokens", T::kString, S | D | G, true, nullptr},
      {"caption_extension", T::kString, S | D | G | C, true, nullptr},
      {"caption_extention", T::kString, S | D | G | C, true, "caption_extension"},
      {"alpha_mask", T::kBool, S | C, true, nullptr},
      {"shuffle_caption", T::kBool, S | D | G | C, true, nullptr},
      {"caption_separator", T::kString, S | D | G | C, true, nullptr},
      {"keep_tokens", T::kInt, S | D | G | C, true, nullptr},
      {"keep_tokens_separator", T::kString, S | D | G | C, true, nullptr},
      {"caption_prefix", T::kString, S | D | G | C, true, nullptr},
      {"caption_suffix", T::kString, S | D | G | C, true, nullptr},
      {"caption_dropout_rate", T::kNumber, S | D | G | C, true, nullptr},
      {"caption_dropout_every_n_epochs", T::kInt, S | D | G | C, true, nullptr},
      {"caption_tag_dropout_rate", T::kNumber, S | D | G | C, true, nullptr},
      {"flip_aug", T::kBool, S | D | G | C, true, nullptr},
      {"random_crop", T::kBool, S | D | G | C, true, nullptr},
      // Dataset keys.
      {"resolution", T::kResolution, D | G | C, true, nullptr},
      {"batch_size", T::kInt, D | G | C, true, nullptr},
      {"enable_bucket", T::kBool, D | G | C, true, nullptr},
      {"min_bucket_reso", T::kInt, D | G | C, true, nullptr},
      {"max_bucket_reso", T::kInt, D | G | C, true, nullptr},
      {"bucket_reso_steps", T::kInt, D | G | C, true, nullptr},
      {"bucket_no_upscale", T::kBool, D | G | C, true, nullptr},
      {"validation_split", T::kNumber, D | G | C, true, nullptr},
      {"validation_seed", T::kInt, D | G | C, true, nullptr},
      // kohya keys lorafleet does not implement: only their no-op values, with a warning.
      {"cache_info", T::kBool, S | D | G | C, false, nullptr},
      {"color_aug", T::kBool, S | D | G | C, false, nullptr},
      {"face_crop_aug_range", T::kFloatPair, S | D | G | C, false, nullptr},
      {"token_warmup_min", T::kInt, S | D | G | C, false, nullptr},
      {"token_warmup_step", T::kNumber, S | D | G | C, false, nullptr},
      {"enable_wildcard", T::kBool, S | D | G | C, false, nullptr},
      {"secondary_separator", T::kString, S | D | G | C, false, nullptr},
      {"custom_attributes", T::kTable, S | D | G | C, false, nullptr},
      {"resize_interpolation", T::kString, S | D | G | C, false, nullptr},
      {"metadata_file", T::kString, S, false, nullptr},
      {"conditioning_data_dir", T::kString, S, false, nullptr},
      {"network_multiplier", T::kNumber, D | G | C, false, nullptr},
  };
  return keys;
}

const KeySpec* find_key(const std::string& name, Level level) {
  for (const KeySpec& k : all_keys()) {
    if (name == k.name && (k.levels & level) != 0) return &k;
  }
  return nullptr;
}

std::string expected_of(KeyType type) {
  switch (type) {
    case KeyType::kBool: return "true or false";
    case KeyType::kInt: return "an integer";
    case KeyType::kNumber: return "a number";
    case KeyType::kString: return "a string";
    case KeyType::kResolution: return "an integer or a [width, height] list of integers";
    case KeyType::kFloatPair: return "a [low, high] list of numbers";
    case KeyType::kTable: return "a table of keys";
  }
  return "a value";
}

std::vector<std::string> names_at(Level level) {
  std::vector<std::string> out;
  for (const KeySpec& k : all_keys()) {
    if ((k.levels & level) != 0 && k.canonical == nullptr) out.emplace_back(k.name);
  }
  return out;
}

std::string allowed_levels_text(const std::string& name, bool toml) {
  for (const KeySpec& k : all_keys()) {
    if (name != k.name) continue;
    std::vector<std::string> parts;
    if (k.levels & kSubset) parts.push_back(toml ? "[[datasets.subsets]]" : "subsets: entries");
    if (k.levels & kDataset) parts.push_back(toml ? "[[datasets]]" : "datasets: entries");
    if (k.levels & kGeneral) parts.push_back(toml ? "[general]" : "[general] of a kohya .toml");
    if (k.levels & kSection) parts.push_back(toml ? "the job YAML's dataset: section"
                                                  : "the dataset: section");
    std::string out;
    for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
    return out;
  }
  return "";
}

void store(GivenLevel& level, const KeySpec& spec, GivenValue value,
           std::vector<std::string>* warnings) {
  const std::string at = where(level.source, value.line);
  const std::string key = level.path + "." + spec.name;
  if (!spec.supported) {
    if (!is_noop(spec.name, value)) {
      throw ConfigError(at + ": key '" + key + "': lorafleet does not support " + spec.name +
                        " yet (only kohya's no-op value is accepted: " + noop_text(spec.name) +
                        "), got " + value.text);
    }
    if (warnings != nullptr) {
      warnings->push_back(
          at + ": key '" + key + "': ignored: " +
          (std::string(spec.name) == "cache_info"
               ? std::string("it only speeds up kohya's own folder scan")
               : "lorafleet does not implement " + std::string(spec.name) +
                     ", and this value changes nothing in kohya either"));
    }
    return;
  }
  const std::string canonical = spec.canonical != nullptr ? spec.canonical : spec.name;
  auto it = level.values.find(canonical);
  if (it != level.values.end()) {
    throw ConfigError(at + ": key '" + key + "': '" + canonical + "' is already set on line " +
                      std::to_string(it->second.line) +
                      " (caption_extention is kohya's legacy spelling of caption_extension)");
  }
  level.values.emplace(canonical, std::move(value));
}

std::string resolve_path(const std::string& base, const std::string& path) {
  if (base.empty() || path.empty()) return path;
  const fs::path p(path);
  if (p.is_absolute()) return path;
  return (fs::path(base) / p).lexically_normal().string();
}

std::vector<DatasetConfig> resolve_datasets(const std::vector<DatasetLevels>& datasets,
                                            const GivenLevel* general, const GivenLevel* section,
                                            const DatasetConfig& defaults,
                                            const std::string& defaults_note,
                                            std::vector<std::string>* warnings) {
  auto warn = [warnings](const std::string& w) {
    if (warnings != nullptr) warnings->push_back(w);
  };
  std::vector<DatasetConfig> out;
  for (const DatasetLevels& dl : datasets) {
    const GivenLevel& dataset = dl.dataset;
    const Chain dc({&dataset, general, section}, dataset, defaults_note);
    DatasetConfig ds;
    ds.origin = where(dataset.source, dataset.line);
    resolve_options(dc, defaults, &ds);
    if (dl.subsets.empty()) {
      throw ConfigError(ds.origin + ": key '" + dataset.path +
                        ".subsets': expected a non-empty list of subsets (each with image_dir), "
                        "got none");
    }
    std::vector<std::string> kept_paths;  // level path of each kept subset, for messages
    for (const GivenLevel& subset : dl.subsets) {
      const Chain sc({&subset, &dataset, general, section}, subset, defaults_note);
      SubsetConfig s = resolve_subset(sc, defaults.folder_defaults, true);
      if (s.num_repeats < 1) {
        warn(s.origin + ": " + subset.path + " (image_dir '" + s.image_dir +
             "') ignored: num_repeats " + std::to_string(s.num_repeats) +
             " is less than 1 (as kohya)");
        continue;
      }
      bool duplicate = false;
      for (std::size_t k = 0; k < ds.subsets.size() && !duplicate; ++k) {
        if (ds.subsets[k].image_dir == s.image_dir) {
          warn(s.origin + ": " + subset.path + " ignored: image_dir '" + s.image_dir +
               "' is already used by " + kept_paths[k] + " of this dataset (as kohya)");
          duplicate = true;
        }
      }
      if (duplicate) continue;
      kept_paths.push_back(subset.path);
      ds.subsets.push_back(std::move(s));
    }
    if (ds.subsets.empty()) {
      warn(ds.origin + ": " + dataset.path + " has no subsets left: it contributes no images");
    }
    out.push_back(std::move(ds));
  }
  return out;
}

DatasetConfig resolve_folder_dataset(const GivenLevel& section, const DatasetConfig& defaults) {
  const Chain c({&section}, section, "the default");
  DatasetConfig ds;
  ds.origin = where(section.source, section.line);
  resolve_options(c, defaults, &ds);
  ds.folder_defaults = resolve_subset(c, defaults.folder_defaults, false);
  return ds;
}

}  // namespace dataset_keys
}  // namespace lf
