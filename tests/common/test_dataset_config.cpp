// Tests for the kohya dataset configuration: a kohya-style dataset-config TOML loaded unchanged
// with every resolved value checked (subset -> dataset -> [general] -> `dataset:` -> default),
// the same datasets written as the job YAML's `datasets:` list, the folder form, and the exact
// "<file>:<line>: ..." errors and warnings for unknown, misplaced, mistyped and unsupported keys.
#include "common/config/dataset_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/config/job_config.h"
#include "tests/common/fixtures.h"

namespace lf {
namespace {

namespace fs = std::filesystem;

// In the style of kohya sd-scripts docs/config_README-en.md: [general] caption options, two
// DreamBooth datasets at 512 and [768, 768] with their own batch_size, subsets with image_dir,
// class_tokens, num_repeats and is_reg; values overridden at every level.
const char* const kKohyaToml = R"(# kohya dataset config
[general]
shuffle_caption = true
caption_extension = '.txt'
keep_tokens = 1
enable_bucket = true

# This is a DreamBooth-style dataset
[[datasets]]
resolution = 512
batch_size = 4
keep_tokens = 2

  [[datasets.subsets]]
  image_dir = '/data/hoge'
  class_tokens = 'hoge girl'
  # This subset uses keep_tokens = 2 (the value of the parent dataset)

  [[datasets.subsets]]
  image_dir = '/data/fuga'
  class_tokens = 'fuga boy'
  keep_tokens = 3
  num_repeats = 10

  [[datasets.subsets]]
  is_reg = true
  image_dir = '/data/reg'
  class_tokens = 'human'
  keep_tokens = 1

# A second dataset at another resolution
[[datasets]]
resolution = [768, 768]
batch_size = 2
flip_aug = true
caption_extension = 'caption'

  [[datasets.subsets]]
  image_dir = 'rel/piyo'
  num_repeats = 5
  flip_aug = false
  caption_prefix = 'piyo style'
)";

// The same datasets as kKohyaToml, in the job YAML: [general]'s keys sit in `dataset:`, next to
// the CLI-level values that the TOML tests pass as defaults.
const char* const kYamlDatasets = R"(model:
  pretrained_model_name_or_path: m.safetensors
dataset:
  shuffle_caption: true
  caption_extension: .txt
  keep_tokens: 1
  enable_bucket: true
  min_bucket_reso: 320
  max_bucket_reso: 1280
  bucket_reso_steps: 32
  batch_size: 7
  random_crop: true
  caption_dropout_rate: 0.25
datasets:
  - resolution: 512
    batch_size: 4
    keep_tokens: 2
    subsets:
      - image_dir: /data/hoge
        class_tokens: hoge girl
      - image_dir: /data/fuga
        class_tokens: fuga boy
        keep_tokens: 3
        num_repeats: 10
      - is_reg: true
        image_dir: /data/reg
        class_tokens: human
        keep_tokens: 1
  - resolution: [768, 768]
    batch_size: 2
    flip_aug: true
    caption_extension: caption
    subsets:
      - image_dir: rel/piyo
        num_repeats: 5
        flip_aug: false
        caption_prefix: piyo style
)";

// The CLI level (the job YAML's `dataset:` section) used with kKohyaToml.
DatasetConfig cli_defaults() {
  DatasetConfig d;
  d.buckets.enable_bucket = false;  // [general] gives true
  d.buckets.min_bucket_reso = 320;
  d.buckets.max_bucket_reso = 1280;
  d.buckets.bucket_reso_steps = 32;
  d.batch_size = 7;  // every dataset gives its own
  d.folder_defaults.random_crop = true;
  d.folder_defaults.caption.caption_dropout_rate = 0.25;
  d.folder_defaults.caption.keep_tokens = 9;         // [general] gives 1
  d.folder_defaults.caption_extension = ".cli";      // [general] gives .txt
  return d;
}

// 1-based line of the first occurrence of `needle` in `text`.
int line_of(const std::string& text, const std::string& needle) {
  const std::size_t pos = text.find(needle);
  if (pos == std::string::npos) return -1;
  int line = 1;
  for (std::size_t i = 0; i < pos; ++i) line += text[i] == '\n';
  return line;
}

class DatasetConfigTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_.str(name);
    test::write_text(path, text);
    return path;
  }

  // The ConfigError text of loading `toml` (with cli_defaults), or "<no ConfigError>".
  std::string toml_error(const std::string& toml) {
    const std::string path = write("bad.toml", toml);
    try {
      load_kohya_dataset_toml(path, cli_defaults(), &warnings_);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "<no ConfigError>";
  }

  std::string yaml_error(const std::string& yaml) {
    try {
      parse_job_config(yaml, "job.yaml");
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "<no ConfigError>";
  }

  test::TempDir dir_{"dataset_config"};
  std::vector<std::string> warnings_;
};

void expect_subset(const SubsetConfig& s, const std::string& image_dir, int num_repeats,
                   bool is_reg, const char* class_tokens, const std::string& caption_extension,
                   int keep_tokens, const std::string& prefix, bool flip_aug) {
  SCOPED_TRACE(image_dir);
  EXPECT_EQ(s.image_dir, image_dir);
  EXPECT_EQ(s.num_repeats, num_repeats);
  EXPECT_EQ(s.is_reg, is_reg);
  EXPECT_EQ(s.has_class_tokens, class_tokens != nullptr);
  EXPECT_EQ(s.class_tokens, class_tokens != nullptr ? class_tokens : "");
  EXPECT_EQ(s.caption_extension, caption_extension);
  EXPECT_TRUE(s.caption.shuffle_caption);                  // [general]
  EXPECT_EQ(s.caption.caption_separator, ",");             // default
  EXPECT_EQ(s.caption.keep_tokens, keep_tokens);
  EXPECT_EQ(s.caption.keep_tokens_separator, "");
  EXPECT_EQ(s.caption.caption_prefix, prefix);
  EXPECT_EQ(s.caption.caption_suffix, "");
  EXPECT_DOUBLE_EQ(s.caption.caption_dropout_rate, 0.25);  // CLI level
  EXPECT_EQ(s.caption.caption_dropout_every_n_epochs, 0);
  EXPECT_DOUBLE_EQ(s.caption.caption_tag_dropout_rate, 0.0);
  EXPECT_EQ(s.flip_aug, flip_aug);
  EXPECT_TRUE(s.random_crop);                              // CLI level
  EXPECT_FALSE(s.alpha_mask);
}

void expect_kohya_example(const std::vector<DatasetConfig>& ds, const std::string& cwd) {
  ASSERT_EQ(ds.size(), 2u);
  const BucketOptions& b0 = ds[0].buckets;
  EXPECT_EQ(b0.resolution_w, 512);
  EXPECT_EQ(b0.resolution_h, 512);
  EXPECT_TRUE(b0.enable_bucket);  // given in [general], over the CLI level's false
  EXPECT_EQ(b0.min_bucket_reso, 320);
  EXPECT_EQ(b0.max_bucket_reso, 1280);
  EXPECT_EQ(b0.bucket_reso_steps, 32);
  EXPECT_FALSE(b0.bucket_no_upscale);
  EXPECT_EQ(ds[0].batch_size, 4);
  EXPECT_EQ(ds[0].train_data_dir, "");
  EXPECT_EQ(ds[0].reg_data_dir, "");
  ASSERT_EQ(ds[0].subsets.size(), 3u);
  expect_subset(ds[0].subsets[0], "/data/hoge", 1, false, "hoge girl", ".txt", 2, "", false);
  expect_subset(ds[0].subsets[1], "/data/fuga", 10, false, "fuga boy", ".txt", 3, "", false);
  expect_subset(ds[0].subsets[2], "/data/reg", 1, true, "human", ".txt", 1, "", false);

  const BucketOptions& b1 = ds[1].buckets;
  EXPECT_EQ(b1.resolution_w, 768);
  EXPECT_EQ(b1.resolution_h, 768);
  EXPECT_TRUE(b1.enable_bucket);
  EXPECT_EQ(b1.min_bucket_reso, 320);
  EXPECT_EQ(b1.max_bucket_reso, 1280);
  EXPECT_EQ(b1.bucket_reso_steps, 32);
  EXPECT_FALSE(b1.bucket_no_upscale);
  EXPECT_EQ(ds[1].batch_size, 2);
  ASSERT_EQ(ds[1].subsets.size(), 1u);
  // keep_tokens from [general]; caption_extension 'caption' from the dataset gets its dot;
  // flip_aug = false in the subset beats the dataset's true (the default value, but given).
  expect_subset(ds[1].subsets[0], (fs::path(cwd) / "rel/piyo").string(), 5, false, nullptr,
                ".caption", 1, "piyo style", false);
}

TEST_F(DatasetConfigTest, KohyaExampleTomlLoadsUnchangedWithEveryLevel) {
  const std::string path = write("kohya.toml", kKohyaToml);
  const std::vector<DatasetConfig> ds = load_kohya_dataset_toml(path, cli_defaults(), &warnings_);
  expect_kohya_example(ds, fs::current_path().string());  // TOML image_dir: vs the cwd
  EXPECT_TRUE(warnings_.empty()) << warnings_.front();
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds[0].origin, path + ":" + std::to_string(line_of(kKohyaToml, "[[datasets]]")));
  EXPECT_EQ(ds[0].subsets[1].origin,
            path + ":" + std::to_string(line_of(kKohyaToml, "image_dir = '/data/fuga'") - 1));
  EXPECT_EQ(ds[1].origin,
            path + ":" + std::to_string(line_of(kKohyaToml, "resolution = [768, 768]") - 1));
}

TEST_F(DatasetConfigTest, TomlThroughJobConfigUsesTheDatasetSectionAsCliLevel) {
  const std::string toml = write("kohya.toml", kKohyaToml);
  const std::string yaml = "model:\n  pretrained_model_name_or_path: m.safetensors\n"
                           "dataset:\n"
                           "  train_data_dir: ignored/train\n"
                           "  dataset_config: " + toml + "\n"
                           "  enable_bucket: false\n  min_bucket_reso: 320\n"
                           "  max_bucket_reso: 1280\n  bucket_reso_steps: 32\n"
                           "  random_crop: true\n  caption_dropout_rate: 0.25\n"
                           "  keep_tokens: 9\n  caption_extension: .cli\n"
                           "training:\n  train_batch_size: 7\n";
  const JobConfig c = parse_job_config(yaml, "job.yaml", fs::current_path().string());
  expect_kohya_example(c.datasets, fs::current_path().string());
  EXPECT_EQ(c.dataset.dataset_config, toml);
  ASSERT_EQ(c.dataset_warnings.size(), 1u);
  EXPECT_EQ(c.dataset_warnings[0],
            "job.yaml:4: key 'dataset.train_data_dir': ignored because 'dataset.dataset_config' "
            "is given (kohya likewise ignores it with --dataset_config)");
}

// Workers get the TOML's text from the coordinator: the file need not exist on their host, and
// relative image_dir values resolve against the coordinator's directory (base_dir).
TEST_F(DatasetConfigTest, TomlTextSentToWorkersParsesWithoutTheFile) {
  const std::string toml =
      "[[datasets]]\nresolution = 512\n[[datasets.subsets]]\nimage_dir = 'rel/imgs'\n";
  const std::string yaml = "model:\n  pretrained_model_name_or_path: m.safetensors\n"
                           "dataset:\n  dataset_config: /nowhere/kohya.toml\n";
  const JobConfig coordinator_side = [&] {
    const std::string path = write("kohya.toml", toml);
    std::string y = yaml;
    y.replace(y.find("/nowhere/kohya.toml"), 19, path);
    return parse_job_config(y, "job.yaml", "/coord/dir");
  }();
  EXPECT_EQ(coordinator_side.dataset_config_text, toml);
  const JobConfig worker_side =
      parse_job_config(yaml, "job.yaml", "/coord/dir", &coordinator_side.dataset_config_text);
  ASSERT_EQ(worker_side.datasets.size(), 1u);
  ASSERT_EQ(worker_side.datasets[0].subsets.size(), 1u);
  EXPECT_EQ(worker_side.datasets[0].subsets[0].image_dir, "/coord/dir/rel/imgs");
  EXPECT_EQ(coordinator_side.datasets[0].subsets[0].image_dir, "/coord/dir/rel/imgs");
  // Without the text, a missing file is an error naming the key and its line.
  try {
    parse_job_config(yaml, "job.yaml", "/coord/dir");
    FAIL() << "a missing dataset_config was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("job.yaml:4: key 'dataset.dataset_config': cannot read "
                                         "'/nowhere/kohya.toml'"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(DatasetConfigTest, YamlDatasetsListGivesTheSameDatasets) {
  const std::string cwd = fs::current_path().string();
  const JobConfig c = parse_job_config(kYamlDatasets, "job.yaml", cwd);
  expect_kohya_example(c.datasets, cwd);  // YAML image_dir: vs base_dir (here the cwd)
  EXPECT_TRUE(c.dataset_warnings.empty());
  ASSERT_EQ(c.datasets.size(), 2u);
  EXPECT_EQ(c.datasets[0].origin,
            "job.yaml:" + std::to_string(line_of(kYamlDatasets, "- resolution: 512")));
  EXPECT_EQ(c.datasets[0].subsets[2].origin,
            "job.yaml:" + std::to_string(line_of(kYamlDatasets, "- is_reg: true")));
  // Every value equal to the TOML form's, field by field.
  const std::string path = write("kohya.toml", kKohyaToml);
  const std::vector<DatasetConfig> t = load_kohya_dataset_toml(path, cli_defaults(), nullptr);
  ASSERT_EQ(t.size(), c.datasets.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    const DatasetConfig& a = t[i];
    const DatasetConfig& b = c.datasets[i];
    EXPECT_EQ(a.buckets.resolution_w, b.buckets.resolution_w);
    EXPECT_EQ(a.buckets.resolution_h, b.buckets.resolution_h);
    EXPECT_EQ(a.buckets.enable_bucket, b.buckets.enable_bucket);
    EXPECT_EQ(a.buckets.min_bucket_reso, b.buckets.min_bucket_reso);
    EXPECT_EQ(a.buckets.max_bucket_reso, b.buckets.max_bucket_reso);
    EXPECT_EQ(a.buckets.bucket_reso_steps, b.buckets.bucket_reso_steps);
    EXPECT_EQ(a.buckets.bucket_no_upscale, b.buckets.bucket_no_upscale);
    EXPECT_EQ(a.batch_size, b.batch_size);
    ASSERT_EQ(a.subsets.size(), b.subsets.size());
    for (std::size_t j = 0; j < a.subsets.size(); ++j) {
      const SubsetConfig& x = a.subsets[j];
      const SubsetConfig& y = b.subsets[j];
      EXPECT_EQ(x.image_dir, y.image_dir);
      EXPECT_EQ(x.num_repeats, y.num_repeats);
      EXPECT_EQ(x.is_reg, y.is_reg);
      EXPECT_EQ(x.has_class_tokens, y.has_class_tokens);
      EXPECT_EQ(x.class_tokens, y.class_tokens);
      EXPECT_EQ(x.caption_extension, y.caption_extension);
      EXPECT_EQ(x.caption.shuffle_caption, y.caption.shuffle_caption);
      EXPECT_EQ(x.caption.caption_separator, y.caption.caption_separator);
      EXPECT_EQ(x.caption.keep_tokens, y.caption.keep_tokens);
      EXPECT_EQ(x.caption.keep_tokens_separator, y.caption.keep_tokens_separator);
      EXPECT_EQ(x.caption.caption_prefix, y.caption.caption_prefix);
      EXPECT_EQ(x.caption.caption_suffix, y.caption.caption_suffix);
      EXPECT_EQ(x.caption.caption_dropout_rate, y.caption.caption_dropout_rate);
      EXPECT_EQ(x.caption.caption_dropout_every_n_epochs,
                y.caption.caption_dropout_every_n_epochs);
      EXPECT_EQ(x.caption.caption_tag_dropout_rate, y.caption.caption_tag_dropout_rate);
      EXPECT_EQ(x.flip_aug, y.flip_aug);
      EXPECT_EQ(x.random_crop, y.random_crop);
      EXPECT_EQ(x.alpha_mask, y.alpha_mask);
    }
  }
}

TEST_F(DatasetConfigTest, FolderFormGivesOneDatasetWithParentDirsAndFolderDefaults) {
  const JobConfig c = parse_job_config(
      "model:\n  pretrained_model_name_or_path: m\n"
      "dataset:\n  train_data_dir: data/train\n  reg_data_dir: data/reg\n"
      "  resolution: [640, 384]\n  shuffle_caption: true\n  keep_tokens: 2\n"
      "  caption_tag_dropout_rate: 0.5\n  flip_aug: true\n  alpha_mask: true\n"
      "  caption_prefix: masterpiece\n  caption_extention: txt\n"
      "training:\n  train_batch_size: 3\n",
      "job.yaml", "/base");
  ASSERT_EQ(c.datasets.size(), 1u);
  const DatasetConfig& d = c.datasets[0];
  EXPECT_EQ(d.train_data_dir, "/base/data/train");
  EXPECT_EQ(d.reg_data_dir, "/base/data/reg");
  EXPECT_TRUE(d.subsets.empty());  // they come from the folder names at scan time
  EXPECT_EQ(d.buckets.resolution_w, 640);
  EXPECT_EQ(d.buckets.resolution_h, 384);
  EXPECT_TRUE(d.buckets.enable_bucket);
  EXPECT_EQ(d.buckets.min_bucket_reso, 256);
  EXPECT_EQ(d.buckets.max_bucket_reso, 1024);
  EXPECT_EQ(d.batch_size, 3);  // training.train_batch_size
  EXPECT_EQ(d.origin, "job.yaml:3");
  const SubsetConfig& f = d.folder_defaults;
  EXPECT_EQ(f.image_dir, "");
  EXPECT_EQ(f.num_repeats, 1);
  EXPECT_FALSE(f.has_class_tokens);
  EXPECT_EQ(f.caption_extension, ".txt");  // legacy spelling, dot added
  EXPECT_TRUE(f.caption.shuffle_caption);
  EXPECT_EQ(f.caption.keep_tokens, 2);
  EXPECT_DOUBLE_EQ(f.caption.caption_tag_dropout_rate, 0.5);
  EXPECT_EQ(f.caption.caption_prefix, "masterpiece");
  EXPECT_EQ(f.caption.caption_separator, ",");
  EXPECT_TRUE(f.flip_aug);
  EXPECT_FALSE(f.random_crop);
  EXPECT_TRUE(f.alpha_mask);
  EXPECT_EQ(f.origin, "job.yaml:3");
  EXPECT_EQ(c.dataset.caption_extension, ".txt");
  EXPECT_EQ(c.dataset.resolution_w, 640);

  // dataset.batch_size beats training.train_batch_size, as a kohya config's batch_size does.
  EXPECT_EQ(parse_job_config("model:\n  pretrained_model_name_or_path: m\n"
                             "dataset:\n  train_data_dir: t\n  batch_size: 5\n"
                             "training:\n  train_batch_size: 3\n",
                             "j")
                .datasets[0]
                .batch_size,
            5);
}

TEST_F(DatasetConfigTest, CaptionExtensionDefaultAndLeadingDot) {
  const std::string path = write("c.toml",
                                 "[[datasets]]\n[[datasets.subsets]]\nimage_dir = '/a'\n"
                                 "[[datasets.subsets]]\nimage_dir = '/b'\n"
                                 "caption_extension = 'txt'\n"
                                 "[[datasets.subsets]]\nimage_dir = '/c'\n"
                                 "caption_extention = 'md'\n");
  const std::vector<DatasetConfig> ds = load_kohya_dataset_toml(path, DatasetConfig(), nullptr);
  ASSERT_EQ(ds.size(), 1u);
  ASSERT_EQ(ds[0].subsets.size(), 3u);
  EXPECT_EQ(ds[0].subsets[0].caption_extension, ".caption");  // kohya's default
  EXPECT_EQ(ds[0].subsets[1].caption_extension, ".txt");
  EXPECT_EQ(ds[0].subsets[2].caption_extension, ".md");
  EXPECT_EQ(ds[0].buckets.resolution_w, 512);  // nothing given: the defaults
  EXPECT_EQ(ds[0].batch_size, 1);

  EXPECT_EQ(toml_error("[[datasets]]\n[[datasets.subsets]]\nimage_dir = '/a'\n"
                       "caption_extension = '.txt'\ncaption_extention = '.md'\n"),
            dir_.str("bad.toml") +
                ":5: key 'datasets[0].subsets[0].caption_extention': 'caption_extension' is "
                "already set on line 4 (caption_extention is kohya's legacy spelling of "
                "caption_extension)");
  EXPECT_EQ(toml_error("[[datasets]]\n[[datasets.subsets]]\nimage_dir = '/a'\n"
                       "caption_extension = ''\n"),
            dir_.str("bad.toml") +
                ":4: key 'datasets[0].subsets[0].caption_extension': expected a file extension "
                "such as .caption or .txt, got nothing");
}

TEST_F(DatasetConfigTest, UnknownKeysNameFileLineAndKey) {
  const std::string bad = dir_.str("bad.toml");
  const std::string toml = "[general]\nshuffle_caption = true\n\n[[datasets]]\nresolution = 512\n"
                           "  [[datasets.subsets]]\n  image_dir = '/a'\n  colour_aug = true\n";
  EXPECT_EQ(toml_error(toml),
            bad + ":8: unknown key 'datasets[0].subsets[0].colour_aug' (expected one of: "
                  "image_dir, num_repeats, is_reg, class_tokens, caption_extension, alpha_mask, "
                  "shuffle_caption, caption_separator, keep_tokens, keep_tokens_separator, "
                  "caption_prefix, caption_suffix, caption_dropout_rate, "
                  "caption_dropout_every_n_epochs, caption_tag_dropout_rate, flip_aug, "
                  "random_crop, cache_info, color_aug, face_crop_aug_range, token_warmup_min, "
                  "token_warmup_step, enable_wildcard, secondary_separator, custom_attributes, "
                  "resize_interpolation, metadata_file, conditioning_data_dir)");
  const std::string general_err = toml_error("[general]\nshuffle_caption = true\nbatchsize = 2\n");
  EXPECT_EQ(general_err.rfind(bad + ":3: unknown key 'general.batchsize' (expected one of: ", 0),
            0u)
      << general_err;
  EXPECT_EQ(toml_error("[generals]\nx = 1\n"),
            bad + ":1: unknown key 'generals' (expected one of: general, datasets)");
  // A kohya key at a level kohya does not allow it.
  EXPECT_EQ(toml_error("[general]\nimage_dir = '/a'\n"),
            bad + ":2: key 'general.image_dir': not allowed here (kohya allows image_dir only "
                  "in: [[datasets.subsets]])");

  const std::string yaml = std::string(kYamlDatasets) + "        colour_aug: true\n";
  EXPECT_EQ(yaml_error(yaml).rfind("job.yaml:" + std::to_string(line_of(yaml, "colour_aug")) +
                                       ": unknown key 'datasets[1].subsets[0].colour_aug' "
                                       "(expected one of: image_dir, num_repeats, ",
                                   0),
            0u)
      << yaml_error(yaml);
  const std::string misplaced =
      "model:\n  pretrained_model_name_or_path: m\ndatasets:\n  - image_dir: /a\n";
  EXPECT_EQ(yaml_error(misplaced),
            "job.yaml:4: key 'datasets[0].image_dir': not allowed here (kohya allows image_dir "
            "only in: subsets: entries)");
}

TEST_F(DatasetConfigTest, WrongTypesNameLineAndExpectedType) {
  const std::string bad = dir_.str("bad.toml");
  EXPECT_EQ(toml_error("[general]\n\nkeep_tokens = 'two'\n"),
            bad + ":3: key 'general.keep_tokens': expected an integer, got 'two'");
  EXPECT_EQ(toml_error("[[datasets]]\nresolution = [512, 512, 3]\n"),
            bad + ":2: key 'datasets[0].resolution': expected an integer or a [width, height] "
                  "list of integers, got an array");
  EXPECT_EQ(toml_error("[[datasets]]\n[[datasets.subsets]]\nimage_dir = '/a'\nis_reg = 1\n"),
            bad + ":4: key 'datasets[0].subsets[0].is_reg': expected true or false, got '1'");
  EXPECT_EQ(toml_error("[[datasets]]\nsubsets = 3\n"),
            bad + ":2: key 'datasets[0].subsets': expected an array of tables "
                  "([[datasets.subsets]]), got '3'");
  EXPECT_EQ(toml_error("general = 1\n"),
            bad + ":1: key 'general': expected a table ([general]), got '1'");
  EXPECT_EQ(toml_error("[general]\nkeep_tokens = 1\n"),
            bad + ":1: key 'datasets': expected at least one [[datasets]] table with "
                  "[[datasets.subsets]], got none");
  // Rates accept integers as kohya's Any(float, int).
  const std::string ok = write("ok.toml", "[[datasets]]\ncaption_dropout_rate = 1\n"
                                          "[[datasets.subsets]]\nimage_dir = '/a'\n");
  const auto rated = load_kohya_dataset_toml(ok, DatasetConfig(), nullptr);
  EXPECT_DOUBLE_EQ(rated[0].subsets[0].caption.caption_dropout_rate, 1.0);

  const std::string yaml = "model:\n  pretrained_model_name_or_path: m\ndatasets:\n"
                           "  - batch_size: many\n    subsets:\n      - image_dir: /a\n";
  EXPECT_EQ(yaml_error(yaml),
            "job.yaml:4: key 'datasets[0].batch_size': expected an integer, got 'many'");
  EXPECT_EQ(yaml_error("model:\n  pretrained_model_name_or_path: m\ndatasets: 3\n"),
            "job.yaml:3: key 'datasets': expected a non-empty list of datasets (mappings with "
            "subsets:), got '3'");
}

TEST_F(DatasetConfigTest, TomlSyntaxErrorGivesFileAndLine) {
  const std::string e = toml_error("[general]\nshuffle_caption = true\nkeep_tokens = = 2\n");
  EXPECT_EQ(e.rfind(dir_.str("bad.toml") + ":3: TOML syntax error: ", 0), 0u) << e;
  const std::string missing = dir_.str("none.toml");
  try {
    load_kohya_dataset_toml(missing, DatasetConfig(), nullptr);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& err) {
    EXPECT_EQ(std::string(err.what()),
              missing + ": cannot read the kohya dataset config (expected a readable .toml file)");
  }
}

TEST_F(DatasetConfigTest, UnsupportedKohyaKeys) {
  const std::string bad = dir_.str("bad.toml");
  EXPECT_EQ(toml_error("[[datasets]]\n[[datasets.subsets]]\nimage_dir = '/a'\ncolor_aug = true\n"),
            bad + ":4: key 'datasets[0].subsets[0].color_aug': lorafleet does not support "
                  "color_aug yet (only kohya's no-op value is accepted: false), got 'true'");
  EXPECT_EQ(toml_error("[general]\nnetwork_multiplier = 0.5\n"),
            bad + ":2: key 'general.network_multiplier': lorafleet does not support "
                  "network_multiplier yet (only kohya's no-op value is accepted: 1.0), got "
                  "'0.5'");
  EXPECT_EQ(toml_error("[[datasets]]\n[[datasets.subsets]]\nimage_dir = '/a'\n"
                       "metadata_file = 'meta.json'\n"),
            bad + ":4: key 'datasets[0].subsets[0].metadata_file': lorafleet does not support "
                  "metadata_file yet (only kohya's no-op value is accepted: \"\"), got "
                  "'meta.json'");
  EXPECT_NE(toml_error("[[datasets]]\nface_crop_aug_range = [2.0, 4.0]\n")
                .find(":2: key 'datasets[0].face_crop_aug_range': lorafleet does not support"),
            std::string::npos);

  // Their no-op values are accepted, each with a warning naming file, line and key.
  warnings_.clear();
  const std::string toml =
      "[general]\ncache_info = true\ncolor_aug = false\n"
      "token_warmup_step = 0\nnetwork_multiplier = 1.0\n"
      "[[datasets]]\nenable_wildcard = false\ntoken_warmup_min = 7\n"
      "[[datasets.subsets]]\nimage_dir = '/a'\nsecondary_separator = ''\n"
      "custom_attributes = {}\n";
  const std::string path = write("noop.toml", toml);
  const auto ds = load_kohya_dataset_toml(path, DatasetConfig(), &warnings_);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].subsets.size(), 1u);
  ASSERT_EQ(warnings_.size(), 8u);
  EXPECT_EQ(warnings_[0], path + ":2: key 'general.cache_info': ignored: it only speeds up "
                                 "kohya's own folder scan");
  EXPECT_EQ(warnings_[1], path + ":3: key 'general.color_aug': ignored: lorafleet does not "
                                 "implement color_aug, and this value changes nothing in kohya "
                                 "either");
  EXPECT_EQ(warnings_[5].rfind(path + ":8: key 'datasets[0].token_warmup_min': ignored", 0), 0u);
  EXPECT_EQ(warnings_[7].rfind(path + ":12: key 'datasets[0].subsets[0].custom_attributes': "
                                      "ignored",
                               0),
            0u);

  // The same in the job YAML, including the `dataset:` section.
  const std::string m = "model:\n  pretrained_model_name_or_path: m\n";
  EXPECT_EQ(yaml_error(m + "dataset:\n  train_data_dir: t\n  enable_wildcard: true\n"),
            "job.yaml:5: key 'dataset.enable_wildcard': lorafleet does not support "
            "enable_wildcard yet (only kohya's no-op value is accepted: false), got 'true'");
  const JobConfig c = parse_job_config(
      m + "dataset:\n  train_data_dir: t\n  face_crop_aug_range:\n  token_warmup_min: 3\n", "j");
  ASSERT_EQ(c.dataset_warnings.size(), 2u);
  EXPECT_EQ(c.dataset_warnings[0].rfind("j:5: key 'dataset.face_crop_aug_range': ignored", 0),
            0u);
  EXPECT_EQ(c.dataset_warnings[1].rfind("j:6: key 'dataset.token_warmup_min': ignored", 0), 0u);
}

TEST_F(DatasetConfigTest, ValidationSplitAndSeedPerDatasetWithGeneralAsFallback) {
  const std::string path = write("val.toml",
                                 "[general]\nvalidation_split = 0.25\n"
                                 "[[datasets]]\nvalidation_seed = 9\n"
                                 "[[datasets.subsets]]\nimage_dir = '/a'\n"
                                 "[[datasets]]\nvalidation_split = 0.0\n"
                                 "[[datasets.subsets]]\nimage_dir = '/b'\n");
  const auto ds = load_kohya_dataset_toml(path, DatasetConfig(), &warnings_);
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_DOUBLE_EQ(ds[0].validation_split, 0.25);
  ASSERT_TRUE(ds[0].validation_seed.has_value());
  EXPECT_EQ(*ds[0].validation_seed, 9);
  EXPECT_DOUBLE_EQ(ds[1].validation_split, 0.0);
  EXPECT_FALSE(ds[1].validation_seed.has_value());  // training.seed then
  const std::string bad = dir_.str("bad.toml");
  EXPECT_EQ(toml_error("[[datasets]]\nvalidation_split = 1.0\n[[datasets.subsets]]\n"
                       "image_dir = '/a'\n"),
            bad +
                ":2: key 'datasets[0].validation_split': expected a fraction in [0, 1) of "
                "each train subset's images to hold out, got 1");
}

TEST_F(DatasetConfigTest, InvalidValuesPointAtTheLevelThatGaveThem) {
  const std::string bad = dir_.str("bad.toml");
  EXPECT_EQ(toml_error("[[datasets]]\n[[datasets.subsets]]\nimage_dir = '/a'\n"
                       "caption_dropout_rate = 1.5\n"),
            bad + ":4: key 'datasets[0].subsets[0].caption_dropout_rate': expected a number in "
                  "[0, 1], got 1.5");
  // Inherited from [general]: the error is at [general]'s line and names the dataset using it.
  EXPECT_EQ(toml_error("[general]\nmin_bucket_reso = 640\nenable_bucket = true\n\n"
                       "[[datasets]]\nresolution = 512\n[[datasets.subsets]]\nimage_dir = '/a'\n"),
            bad + ":2: key 'general.min_bucket_reso': expected at most the smaller resolution "
                  "side 512 (after rounding down to a multiple of bucket_reso_steps), got 640 "
                  "(used by datasets[0] at " + bad + ":5)");
  // Not given anywhere in the file: at the subset, saying where the value came from.
  EXPECT_EQ(toml_error("[[datasets]]\n[[datasets.subsets]]\nnum_repeats = 2\n"),
            bad + ":2: key 'datasets[0].subsets[0].image_dir': expected a non-empty path to a "
                  "folder of images (required in every subset), got nothing (not set in this "
                  "file: from the job config or the default)");
  EXPECT_EQ(toml_error("[[datasets]]\nbatch_size = 0\n[[datasets.subsets]]\nimage_dir = '/a'\n"),
            bad + ":2: key 'datasets[0].batch_size': expected an integer >= 1, got 0");
  EXPECT_EQ(toml_error("[[datasets]]\n[[datasets.subsets]]\nimage_dir = '/a'\n"
                       "keep_tokens = -1\n"),
            bad + ":4: key 'datasets[0].subsets[0].keep_tokens': expected an integer >= 0, got -1");
  EXPECT_EQ(toml_error("[[datasets]]\ncaption_separator = ''\n[[datasets.subsets]]\n"
                       "image_dir = '/a'\n"),
            bad + ":2: key 'datasets[0].caption_separator': expected a non-empty separator such "
                  "as ',', got nothing (used by datasets[0].subsets[0] at " + bad + ":3)");
  EXPECT_EQ(toml_error("[[datasets]]\nresolution = 0\n[[datasets.subsets]]\nimage_dir = '/a'\n"),
            bad + ":2: key 'datasets[0].resolution': expected sizes >= 1, got 0x0");
  EXPECT_EQ(toml_error("[[datasets]]\nresolution = 512\n"),
            bad + ":1: key 'datasets[0].subsets': expected a non-empty list of subsets (each "
                  "with image_dir), got none");

  // In the YAML, a value of the `dataset:` section used by a listed dataset.
  const std::string yaml = "model:\n  pretrained_model_name_or_path: m\n"
                           "dataset:\n  max_bucket_reso: 512\n"
                           "datasets:\n  - resolution: 768\n    subsets:\n      - image_dir: /a\n";
  EXPECT_EQ(yaml_error(yaml),
            "job.yaml:4: key 'dataset.max_bucket_reso': expected at least the larger resolution "
            "side 768, got 512 (used by datasets[0] at job.yaml:6)");
}

TEST_F(DatasetConfigTest, SubsetsWithoutRepeatsOrRepeatedAreDroppedWithWarnings) {
  const std::string toml = "[[datasets]]\n"
                           "[[datasets.subsets]]\nimage_dir = '/a'\nnum_repeats = 0\n"
                           "[[datasets.subsets]]\nimage_dir = '/b'\n"
                           "[[datasets.subsets]]\nimage_dir = '/b'\nnum_repeats = 3\n";
  const std::string path = write("drop.toml", toml);
  const auto ds = load_kohya_dataset_toml(path, DatasetConfig(), &warnings_);
  ASSERT_EQ(ds.size(), 1u);
  ASSERT_EQ(ds[0].subsets.size(), 1u);
  EXPECT_EQ(ds[0].subsets[0].image_dir, "/b");
  EXPECT_EQ(ds[0].subsets[0].num_repeats, 1);
  ASSERT_EQ(warnings_.size(), 2u);
  EXPECT_EQ(warnings_[0], path + ":2: datasets[0].subsets[0] (image_dir '/a') ignored: "
                                 "num_repeats 0 is less than 1 (as kohya)");
  EXPECT_EQ(warnings_[1], path + ":7: datasets[0].subsets[2] ignored: image_dir '/b' is already "
                                 "used by datasets[0].subsets[1] of this dataset (as kohya)");
}

TEST_F(DatasetConfigTest, DatasetsAndDatasetConfigTogetherIsAnError) {
  const std::string toml = write("kohya.toml", kKohyaToml);
  const std::string yaml = "model:\n  pretrained_model_name_or_path: m\n"
                           "dataset:\n  dataset_config: " + toml + "\n"
                           "datasets:\n  - subsets:\n      - image_dir: /a\n";
  EXPECT_EQ(yaml_error(yaml),
            "job.yaml:5: key 'datasets': cannot be combined with 'dataset.dataset_config' (line "
            "4): give the datasets either here or in the kohya .toml file");
  // The YAML list form warns about the parent dirs it ignores, and needs no train_data_dir.
  const JobConfig c = parse_job_config("model:\n  pretrained_model_name_or_path: m\n"
                                       "dataset:\n  reg_data_dir: r\n"
                                       "datasets:\n  - subsets:\n      - image_dir: a\n",
                                       "job.yaml", "/base");
  ASSERT_EQ(c.datasets.size(), 1u);
  EXPECT_EQ(c.datasets[0].subsets[0].image_dir, "/base/a");
  EXPECT_EQ(c.datasets[0].reg_data_dir, "");
  ASSERT_EQ(c.dataset_warnings.size(), 1u);
  EXPECT_EQ(c.dataset_warnings[0],
            "job.yaml:4: key 'dataset.reg_data_dir': ignored because the datasets are listed "
            "under 'datasets:' (kohya likewise ignores it with --dataset_config)");
}

}  // namespace
}  // namespace lf
