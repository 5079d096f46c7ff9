// kohya's training --config_file TOML read as-is (common/config/kohya_training_toml.h): a
// recipe with 30+ commonly used arguments gives the same JobConfig, key by key, as the
// equivalent job YAML; the fate table covers kohya's committed argument list and is what the
// docs show; unknown, refused and no-op arguments are reported with file:line.
#include "common/config/kohya_training_toml.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/config/kohya_arg_fates.h"
#include "tests/common/fixtures.h"

namespace lf {
namespace {

using test::TempDir;
using test::write_text;

// ---- a canonical dump of every job key -------------------------------------------------------

std::string text(bool v) { return v ? "true" : "false"; }
std::string text(const std::string& v) { return "'" + v + "'"; }
std::string text(const StepsOrRatio& v) {
  return v.ratio ? "ratio " + text(std::to_string(*v.ratio)) : std::to_string(v.steps);
}
std::string text(double v) {
  std::ostringstream os;
  os << std::setprecision(17) << v;
  return os.str();
}
template <typename T>
std::string text(const std::optional<T>& v) {
  return v ? text(*v) : "unset";
}
template <typename T>
std::string text(const std::vector<T>& v) {
  std::string out = "[";
  for (const T& x : v) out += text(x) + ",";
  return out + "]";
}
template <typename T>
std::string text(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Every key of job_keys() -> its value, plus what the datasets resolved to.
std::map<std::string, std::string> dump(const JobConfig& c) {
  std::map<std::string, std::string> out;
#define LF_DUMP_KEY(type, name, default_value, rule, doc) out[section + "." #name] = text(s.name);
#define LF_DUMP_SECTION(section_name, member, KEYS) \
  {                                                 \
    const std::string section = section_name;       \
    const auto& s = c.member;                       \
    KEYS(LF_DUMP_KEY)                               \
  }
  LF_DUMP_SECTION("model", model, LF_MODEL_KEYS)
  LF_DUMP_SECTION("dataset", dataset, LF_DATASET_KEYS)
  LF_DUMP_SECTION("network", network, LF_NETWORK_KEYS)
  LF_DUMP_SECTION("training", training, LF_TRAINING_KEYS)
  LF_DUMP_SECTION("output", output, LF_OUTPUT_KEYS)
  LF_DUMP_SECTION("coordinator", coordinator, LF_COORDINATOR_KEYS)
  LF_DUMP_SECTION("worker", worker, LF_WORKER_KEYS)
  LF_DUMP_SECTION("cluster", cluster, LF_CLUSTER_KEYS)
#undef LF_DUMP_SECTION
#undef LF_DUMP_KEY
  EXPECT_EQ(out.size(), job_keys().size());
  const DatasetSection& d = c.dataset;
  out["dataset:resolution"] = text(d.resolution_w) + "x" + text(d.resolution_h);
  out["dataset:enable_bucket"] = text(d.enable_bucket);
  out["dataset:bucket_no_upscale"] = text(d.bucket_no_upscale);
  out["dataset:caption_extension"] = text(d.caption_extension);
  for (std::size_t i = 0; i < c.datasets.size(); ++i) {
    const DatasetConfig& ds = c.datasets[i];
    const std::string p = "datasets[" + std::to_string(i) + "].";
    const BucketOptions& b = ds.buckets;
    out[p + "buckets"] = text(b.resolution_w) + "x" + text(b.resolution_h) + " " +
                         text(b.enable_bucket) + " " + text(b.min_bucket_reso) + "-" +
                         text(b.max_bucket_reso) + "/" + text(b.bucket_reso_steps) + " " +
                         text(b.bucket_no_upscale);
    out[p + "batch_size"] = text(ds.batch_size);
    for (std::size_t j = 0; j < ds.subsets.size(); ++j) {
      const SubsetConfig& s = ds.subsets[j];
      const CaptionOptions& k = s.caption;
      out[p + "subsets[" + std::to_string(j) + "]"] =
          s.image_dir + " " + text(s.num_repeats) + " " + text(s.is_reg) + " " +
          text(s.class_tokens) + " " + text(s.caption_extension) + " " + text(k.shuffle_caption) +
          " " + text(k.keep_tokens) + " " + text(k.caption_dropout_rate) + " " + text(s.flip_aug);
    }
  }
  return out;
}

void expect_same(const std::map<std::string, std::string>& a,
                 const std::map<std::string, std::string>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, value] : a) {
    ASSERT_TRUE(b.count(key)) << key;
    EXPECT_EQ(value, b.at(key)) << key;
  }
}

// ---- the recipe ------------------------------------------------------------------------------

// A kohya GUI-style training TOML: 52 arguments in kohya's argument tables.
const char* const kRecipeToml = R"([model_arguments]
pretrained_model_name_or_path = "models/sd15.safetensors"
v_parameterization = false
v2 = false

[additional_network_arguments]
network_module = "networks.lora"
network_dim = 16
network_alpha = 8.0
network_args = [ "conv_dim=4", "conv_alpha=1", "loraplus_lr_ratio=16",]
unet_lr = 0.0001
text_encoder_lr = [ 5e-5 ]
network_train_unet_only = false
training_comment = "kohya recipe"
scale_weight_norms = 1.0

[optimizer_arguments]
optimizer_type = "AdamW"
optimizer_args = [ "weight_decay=0.05", "betas=0.9,0.99",]
learning_rate = 0.0001
max_grad_norm = 1.0
lr_scheduler = "cosine_with_restarts"
lr_scheduler_num_cycles = 3
lr_warmup_steps = 0.1

[dataset_arguments]
dataset_config = "datasets.toml"
caption_extension = ".txt"
shuffle_caption = true
keep_tokens = 1
resolution = "512,768"
enable_bucket = true
min_bucket_reso = 256
max_bucket_reso = 1024
bucket_no_upscale = true
cache_latents = true
cache_latents_to_disk = true
max_data_loader_n_workers = 2
persistent_data_loader_workers = true

[training_arguments]
output_dir = "out"
output_name = "my_lora"
save_model_as = "safetensors"
save_precision = "fp16"
save_every_n_epochs = 1
save_last_n_epochs = 3
train_batch_size = 2
max_train_steps = 400
seed = 1234
mixed_precision = "bf16"
gradient_checkpointing = true
gradient_accumulation_steps = 2
xformers = true
min_snr_gamma = 5.0
noise_offset = 0.0357
clip_skip = 2
loss_type = "huber"
huber_c = 0.1
prior_loss_weight = 1.0
no_half_vae = true
metadata_author = "me"
sample_prompts = ""
)";

// The same job, written as the job YAML.
const char* const kRecipeYaml = R"(model:
  pretrained_model_name_or_path: models/sd15.safetensors
  v_parameterization: false
  vae_dtype: fp32
dataset:
  dataset_config: datasets.toml
  caption_extension: .txt
  shuffle_caption: true
  keep_tokens: 1
  resolution: [512, 768]
  enable_bucket: true
  min_bucket_reso: 256
  max_bucket_reso: 1024
  bucket_no_upscale: true
  cache_latents_to_disk: true
network:
  network_dim: 16
  network_alpha: 8
  conv_dim: 4
  conv_alpha: 1
  loraplus_lr_ratio: 16
  unet_lr: 1e-4
  text_encoder_lr: 5e-5
  network_train_unet_only: false
  network_weights: ""
training:
  optimizer_type: AdamW
  optimizer_args: ["weight_decay=0.05", "betas=0.9,0.99"]
  learning_rate: 1e-4
  max_grad_norm: 1.0
  lr_scheduler: cosine_with_restarts
  lr_scheduler_num_cycles: 3
  lr_warmup_steps: 0.1
  save_every_n_epochs: 1
  save_last_n_epochs: 3
  train_batch_size: 2
  max_train_steps: 400
  seed: 1234
  mixed_precision: bf16
  gradient_checkpointing: true
  gradient_accumulation_steps: 2
  min_snr_gamma: 5
  noise_offset: 0.0357
  clip_skip: 2
  loss_type: huber
  huber_c: 0.1
  prior_loss_weight: 1.0
  scale_weight_norms: 1.0
output:
  output_dir: out
  output_name: my_lora
  save_precision: fp16
  training_comment: kohya recipe
  metadata_author: me
)";

const char* const kDatasetToml = R"([general]
caption_dropout_rate = 0.05

[[datasets]]
batch_size = 2

  [[datasets.subsets]]
  image_dir = "img"
  num_repeats = 2
  class_tokens = "sks dog"

  [[datasets.subsets]]
  image_dir = "reg"
  is_reg = true
  class_tokens = "dog"
)";

class KohyaTrainingToml : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.path() / "img");
    std::filesystem::create_directories(dir_.path() / "reg");
    write_text(dir_.path() / "datasets.toml", kDatasetToml);
  }
  JobConfig from_toml(const std::string& toml, const std::string* yaml = nullptr) const {
    return parse_kohya_training_toml(toml, "train.toml", yaml, "job.yaml", dir_.str());
  }
  // The ConfigError message of parsing `toml`, or "" when it parses.
  std::string error_of(const std::string& toml, const std::string* yaml = nullptr) const {
    try {
      from_toml(toml, yaml);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }
  // A minimal recipe followed by `extra` lines (from line 4 on).
  static std::string minimal(const std::string& extra) {
    return "pretrained_model_name_or_path = \"m.safetensors\"\ndataset_config = "
           "\"datasets.toml\"\nmax_train_steps = 10\n" +
           extra;
  }
  TempDir dir_{"kohya_training_toml"};
};

TEST_F(KohyaTrainingToml, RecipeGivesTheSameJobAsTheEquivalentYaml) {
  const JobConfig kohya = from_toml(kRecipeToml);
  const JobConfig yaml = parse_job_config(kRecipeYaml, "job.yaml", dir_.str());
  expect_same(dump(kohya), dump(yaml));

  // A few resolved values, stated outright.
  EXPECT_EQ(kohya.network.conv_dim, 4);
  EXPECT_EQ(kohya.network.loraplus_lr_ratio, 16.0);
  EXPECT_EQ(kohya.network.text_encoder_lr, 5e-5);
  ASSERT_TRUE(kohya.training.lr_warmup_steps.ratio.has_value());
  EXPECT_DOUBLE_EQ(*kohya.training.lr_warmup_steps.ratio, 0.1);
  EXPECT_EQ(kohya.training.lr_warmup_steps.resolve(400), 40);
  EXPECT_EQ(kohya.training.optimizer_args,
            (std::vector<std::string>{"weight_decay=0.05", "betas=0.9,0.99"}));
  EXPECT_EQ(kohya.dataset.resolution_w, 512);
  EXPECT_EQ(kohya.dataset.resolution_h, 768);
  EXPECT_EQ(kohya.model.vae_dtype, "fp32");
  EXPECT_EQ(kohya.model.pretrained_model_name_or_path, dir_.str("models/sd15.safetensors"));
  ASSERT_EQ(kohya.datasets.size(), 1u);
  ASSERT_EQ(kohya.datasets[0].subsets.size(), 2u);
  EXPECT_EQ(kohya.datasets[0].subsets[0].caption_extension, ".txt");
  EXPECT_DOUBLE_EQ(kohya.datasets[0].subsets[0].caption.caption_dropout_rate, 0.05);
  EXPECT_TRUE(kohya.datasets[0].subsets[1].is_reg);
  EXPECT_EQ(kohya.source_name, "train.toml (as job YAML)");
}

TEST_F(KohyaTrainingToml, WorkersParsingTheSentYamlGetTheSameJob) {
  const JobConfig kohya = from_toml(kRecipeToml);
  const JobConfig worker =
      parse_job_config(kohya.yaml_text, kohya.source_name, dir_.str(), &kohya.dataset_config_text);
  expect_same(dump(worker), dump(kohya));
}

TEST_F(KohyaTrainingToml, IgnoredAndNoOpArgumentsAreWarnedWithTheirLine) {
  const JobConfig c = from_toml(kRecipeToml);
  const std::string all = [&c] {
    std::string s;
    for (const std::string& w : c.dataset_warnings) s += w + "\n";
    return s;
  }();
  EXPECT_NE(all.find("train.toml:4: kohya argument 'v2': ignored: lorafleet decides this "
                     "itself"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("train.toml:54: kohya argument 'xformers': ignored: lorafleet decides"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("train.toml:36: kohya argument 'cache_latents': has no effect at this "
                     "value: lorafleet always caches the latents"),
            std::string::npos)
      << all;
  // sample_prompts is output.sample_prompts now: its empty value is no warning.
  EXPECT_EQ(all.find("'sample_prompts'"), std::string::npos) << all;
}

TEST_F(KohyaTrainingToml, LorafleetKeysComeFromTheJobYaml) {
  const std::string yaml =
      "model:\n  architecture: sd15\ncoordinator:\n  linger_seconds: 7\ncluster:\n"
      "  world_size: 2\n";
  const JobConfig c = from_toml(kRecipeToml, &yaml);
  EXPECT_EQ(c.model.architecture, "sd15");
  EXPECT_EQ(c.coordinator.linger_seconds, 7);
  EXPECT_EQ(c.cluster.world_size, 2);
  EXPECT_EQ(c.training.seed, 1234u);
  // In the TOML, a lorafleet key is refused with a pointer to the job YAML.
  EXPECT_EQ(error_of(minimal("architecture = \"sd15\"\n")),
            "train.toml:4: kohya argument 'architecture': not a kohya argument but lorafleet's "
            "job key 'model.architecture': give it in the job YAML (lorafleet-coordinator "
            "--config)");
}

// The job YAML may hold lorafleet's `datasets:` list (form 2); it travels as one flow line.
TEST_F(KohyaTrainingToml, DatasetsListOfTheJobYaml) {
  const std::string yaml =
      "datasets:\n  - resolution: [640, 448]\n    batch_size: 3\n    subsets:\n"
      "      - image_dir: img\n        num_repeats: 4\n        class_tokens: \"a: b\"\n"
      "output:\n  training_comment: |\n    two\n    lines\n";
  const JobConfig c =
      from_toml("pretrained_model_name_or_path = \"m.safetensors\"\nmax_train_steps = 10\n", &yaml);
  ASSERT_EQ(c.datasets.size(), 1u);
  EXPECT_EQ(c.datasets[0].batch_size, 3);
  EXPECT_EQ(c.datasets[0].buckets.resolution_w, 640);
  EXPECT_EQ(c.datasets[0].buckets.resolution_h, 448);
  ASSERT_EQ(c.datasets[0].subsets.size(), 1u);
  EXPECT_EQ(c.datasets[0].subsets[0].image_dir, dir_.str("img"));
  EXPECT_EQ(c.datasets[0].subsets[0].num_repeats, 4);
  EXPECT_EQ(c.datasets[0].subsets[0].class_tokens, "a: b");
  EXPECT_EQ(c.output.training_comment, "two\nlines\n");
}

TEST_F(KohyaTrainingToml, AKeyInBothFilesIsRefusedNamingBoth) {
  const std::string yaml = "cluster:\n  world_size: 2\ntraining:\n  seed: 7\n";
  EXPECT_EQ(error_of(minimal("seed = 1\n"), &yaml),
            "job.yaml:4: key 'training.seed': already given at train.toml:4 (kohya argument "
            "'seed'); give it once");
}

TEST_F(KohyaTrainingToml, UnknownArgumentIsRefusedWithFileAndLine) {
  EXPECT_EQ(error_of(minimal("\n[training_arguments]\nmax_train_stepz = 5\n")),
            "train.toml:6: kohya argument 'max_train_stepz': unknown: not a train_network.py "
            "argument lorafleet knows (lorafleet-coordinator --list-kohya-args lists them)");
  // A networks.lora option written as an argument of its own.
  EXPECT_EQ(error_of(minimal("conv_dim = 4\n")),
            "train.toml:4: kohya argument 'conv_dim': not a train_network.py argument: kohya "
            "passes it in network_args, e.g. network_args = [\"conv_dim=...\"]");
}

TEST_F(KohyaTrainingToml, RefusedArgumentsAreNamedWithTheReason) {
  EXPECT_EQ(error_of(minimal("vae = \"vae.safetensors\"\n")),
            "train.toml:4: kohya argument 'vae': refused: not implemented in lorafleet yet: the "
            "checkpoint's own VAE is used (only off (false, 0, \"\" or []) is accepted, got "
            "'vae.safetensors')");
  // Sample images are output.sample_*: a cadence without prompts is refused by the job's rule.
  EXPECT_EQ(error_of(minimal("sample_every_n_steps = 100\n")),
            "train.toml:4: kohya argument 'sample_every_n_steps', key "
            "'output.sample_every_n_steps': expected output.sample_prompts set too (the prompts "
            "of the sample images), got no sample_prompts");
  EXPECT_EQ(error_of(minimal("network_module = \"networks.dylora\"\n")),
            "train.toml:4: kohya argument 'network_module': 'networks.dylora' is not implemented "
            "in lorafleet yet: lorafleet trains networks.lora, networks.oft and lycoris.kohya "
            "(algo=loha / lokr) only");
  EXPECT_EQ(error_of(minimal("save_model_as = \"ckpt\"\n")),
            "train.toml:4: kohya argument 'save_model_as': 'ckpt' refused: lorafleet writes "
            ".safetensors only");
  EXPECT_EQ(
      error_of(minimal("cache_latents = false\n"))
          .rfind("train.toml:4: kohya argument 'cache_latents': refused: lorafleet always caches "
                 "the latents",
                 0),
      0u);
  // At the no-op value it is accepted (with a warning, see above).
  EXPECT_EQ(error_of(minimal("vae = \"\"\nsample_every_n_steps = 0\ninitial_epoch = 1\n")), "");
}

TEST_F(KohyaTrainingToml, NetworkArgsSetTheNetworkKeysOfTheirNames) {
  const JobConfig c = from_toml(minimal(
      "network_args = [\"conv_dim=8\", \"conv_alpha=2.5\", \"loraplus_unet_lr_ratio=4\"]\n"));
  EXPECT_EQ(c.network.conv_dim, 8);
  EXPECT_EQ(c.network.conv_alpha, 2.5);
  EXPECT_EQ(c.network.loraplus_unet_lr_ratio, 4.0);
  EXPECT_FALSE(c.network.loraplus_lr_ratio.has_value());

  const std::string unknown = error_of(minimal("network_args = [\"algox=loha\"]\n"));
  EXPECT_EQ(unknown.rfind("train.toml:4: kohya argument 'network_args': 'algox' is not a network "
                          "option lorafleet has (not implemented in lorafleet yet); the network "
                          "keys are: network_dim, ",
                          0),
            0u)
      << unknown;
  EXPECT_EQ(error_of(minimal("network_args = [\"conv_dim\"]\n")),
            "train.toml:4: kohya argument 'network_args': expected \"key=value\", got 'conv_dim'");
  // A bad value is checked by the network key and pointed back at network_args.
  EXPECT_EQ(error_of(minimal("network_args = [\"conv_dim=four\"]\n")),
            "train.toml:4: kohya argument 'network_args', key 'network.conv_dim': expected an "
            "integer, got 'four'");
}

// LyCORIS: network_module lycoris.kohya with network_args algo=loha / lokr sets network.algo
// (and LoKr's factor, decompose_both); the module without an algo lorafleet has, or the algo
// without the module, is refused.
TEST_F(KohyaTrainingToml, LycorisModuleWithAlgoLoHaOrLoKr) {
  const JobConfig c = from_toml(minimal(
      "network_module = \"lycoris.kohya\"\nnetwork_args = [\"algo=loha\", \"conv_dim=2\"]\n"));
  EXPECT_EQ(c.network.algo, "loha");
  EXPECT_EQ(c.network.conv_dim, 2);
  const JobConfig lokr =
      from_toml(minimal("network_module = \"lycoris.kohya\"\n"
                        "network_args = [\"algo=lokr\", \"factor=8\", \"decompose_both=True\"]\n"));
  EXPECT_EQ(lokr.network.algo, "lokr");
  EXPECT_EQ(lokr.network.factor, 8);
  EXPECT_TRUE(lokr.network.decompose_both);
  EXPECT_EQ(error_of(minimal("network_module = \"lycoris.kohya\"\n")),
            "train.toml:4: kohya argument 'network_module': 'lycoris.kohya' needs network_args "
            "\"algo=loha\" or \"algo=lokr\" (LyCORIS's algo lora, its LoCon, is not implemented "
            "in lorafleet yet; for LoRA use networks.lora)");
  EXPECT_EQ(error_of(minimal("network_args = [\"algo=loha\"]\n")),
            "train.toml:4: kohya argument 'network_args': algo=loha is a LyCORIS algorithm: it "
            "needs network_module = \"lycoris.kohya\"");
  EXPECT_EQ(error_of(minimal("network_args = [\"dora_wd=True\"]\n")),
            "train.toml:4: kohya argument 'network_args': dora_wd is a LyCORIS option: it needs "
            "network_module = \"lycoris.kohya\"");
  EXPECT_TRUE(from_toml(minimal("network_module = \"lycoris.kohya\"\n"
                                "network_args = [\"algo=loha\", \"dora_wd=True\"]\n"))
                  .network.dora_wd);
  EXPECT_NE(
      error_of(minimal("network_module = \"lycoris.kohya\"\nnetwork_args = [\"algo=diag-oft\"]\n"))
          .find("network.algo"),
      std::string::npos);
  EXPECT_EQ(
      error_of(minimal("network_module = \"lycoris.kohya\"\nnetwork_args = [\"algo=oft\"]\n")),
      "train.toml:5: kohya argument 'network_args': LyCORIS's OFT (algo=diag-oft) is not "
      "implemented in lorafleet yet; kohya's OFT is: network_module = \"networks.oft\"");
}

// kohya networks.oft: network_module selects network.algo oft, its two network_args are
// Python bool() of a string (so only a true spelling is taken), and algo= does not belong.
TEST_F(KohyaTrainingToml, NetworksOftModuleWithItsArguments) {
  const JobConfig c = from_toml(
      minimal("network_module = \"networks.oft\"\nnetwork_dim = 8\nnetwork_alpha = 0.001\n"
              "network_args = [\"enable_all_linear=True\", \"enable_conv=True\"]\n"));
  EXPECT_EQ(c.network.algo, "oft");
  EXPECT_EQ(c.network.network_dim, 8);
  EXPECT_DOUBLE_EQ(c.network.network_alpha, 0.001);
  EXPECT_TRUE(c.network.enable_all_linear);
  EXPECT_TRUE(c.network.enable_conv);
  EXPECT_FALSE(c.network.trains_text_encoder());  // kohya's OFT: the U-Net only
  const JobConfig plain = from_toml(minimal("network_module = \"networks.oft\"\n"));
  EXPECT_FALSE(plain.network.enable_all_linear);
  EXPECT_FALSE(plain.network.enable_conv);
  std::string warnings;
  for (const std::string& w : plain.dataset_warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("key 'network.network_alpha': 1.000000 is large for OFT"),
            std::string::npos)
      << warnings;
  EXPECT_EQ(error_of(minimal("network_module = \"networks.oft\"\n"
                             "network_args = [\"enable_conv=False\"]\n")),
            "train.toml:5: kohya argument 'network_args': enable_conv=False would be true in kohya "
            "networks.oft (it takes bool() of the string, so any value turns it on); write "
            "enable_conv=True, or leave the argument out to keep it off");
  EXPECT_EQ(error_of(minimal("network_args = [\"enable_conv=True\"]\n")),
            "train.toml:4: kohya argument 'network_args': enable_all_linear / enable_conv are "
            "networks.oft arguments: they need network_module = \"networks.oft\"");
  EXPECT_EQ(error_of(minimal("network_module = \"networks.oft\"\n"
                             "network_args = [\"algo=loha\"]\n")),
            "train.toml:5: kohya argument 'network_args': networks.oft has no algo argument "
            "(kohya's OFT module ignores it); remove algo=loha");
  EXPECT_NE(error_of(minimal("network_module = \"networks.oft\"\n"
                             "network_args = [\"conv_dim=4\"]\n"))
                .find("network.conv_dim': not available with network.algo oft"),
            std::string::npos);
}

TEST_F(KohyaTrainingToml, WarmupAsARatioOrAPercentage) {
  const JobConfig ratio = from_toml(minimal("lr_scheduler = \"linear\"\nlr_warmup_steps = 0.25\n"));
  ASSERT_TRUE(ratio.training.lr_warmup_steps.ratio.has_value());
  EXPECT_DOUBLE_EQ(*ratio.training.lr_warmup_steps.ratio, 0.25);
  EXPECT_EQ(ratio.training.lr_warmup_steps.resolve(10), 2);  // int(0.25 * 10), as kohya
  const JobConfig percent =
      from_toml(minimal("lr_scheduler = \"linear\"\nlr_warmup_steps = \"10%\"\n"));
  ASSERT_TRUE(percent.training.lr_warmup_steps.ratio.has_value());
  EXPECT_DOUBLE_EQ(*percent.training.lr_warmup_steps.ratio, 0.1);
  const JobConfig steps = from_toml(minimal("lr_scheduler = \"linear\"\nlr_warmup_steps = 3\n"));
  EXPECT_FALSE(steps.training.lr_warmup_steps.ratio.has_value());
  EXPECT_EQ(steps.training.lr_warmup_steps.steps, 3);
}

TEST_F(KohyaTrainingToml, SchedulerArgsAndUnimplementedDatasetArguments) {
  const JobConfig c =
      from_toml(minimal("lr_scheduler = \"polynomial\"\nlr_scheduler_power = 2.0\n"
                        "lr_scheduler_args = [\"lr_end=1e-7\"]\ncolor_aug = false\n"));
  EXPECT_EQ(c.training.lr_scheduler, "polynomial");
  EXPECT_EQ(c.training.lr_scheduler_power, 2.0);
  EXPECT_EQ(c.training.lr_scheduler_args, (std::vector<std::string>{"lr_end=1e-7"}));
  // A kohya dataset argument lorafleet does not implement, at another value than its no-op.
  EXPECT_EQ(error_of(minimal("\ncolor_aug = true\n")),
            "train.toml:5: kohya argument 'color_aug', key 'dataset.color_aug': lorafleet does "
            "not support color_aug yet (only kohya's no-op value is accepted: false), got "
            "'true'");
}

TEST_F(KohyaTrainingToml, KohyasDefaultsApplyWhereTheyDifferFromLorafleets) {
  const JobConfig c = from_toml(minimal(""));
  EXPECT_EQ(c.training.lr_scheduler, "constant");  // lorafleet's own default: cosine
  EXPECT_DOUBLE_EQ(c.training.learning_rate, 2e-6);
  ASSERT_EQ(c.datasets.size(), 1u);
  EXPECT_FALSE(c.datasets[0].buckets.enable_bucket);  // kohya's --enable_bucket is off
  // kohya refuses a warmup on its default constant schedule; so does lorafleet.
  const std::string e = error_of(minimal("lr_warmup_steps = 5\n"));
  EXPECT_EQ(e.rfind("train.toml:4: kohya argument 'lr_warmup_steps', key "
                    "'training.lr_warmup_steps': ",
                    0),
            0u)
      << e;
}

TEST_F(KohyaTrainingToml, ValueErrorsPointAtTheArgumentsLine) {
  EXPECT_EQ(error_of(minimal("\n\nlearning_rate = \"fast\"\n")),
            "train.toml:6: kohya argument 'learning_rate', key 'training.learning_rate': "
            "expected a number, got 'fast'");
  EXPECT_EQ(error_of(minimal("seed = \"42\"\n")),
            "train.toml:4: kohya argument 'seed', key 'training.seed': expected a "
            "non-negative integer, got the quoted string '42' (remove the quotes)");
  EXPECT_EQ(error_of(minimal("mixed_precision = \"fp8\"\n")),
            "train.toml:4: kohya argument 'mixed_precision', key 'training.mixed_precision': "
            "expected one of: no, fp16, bf16 (kohya --mixed_precision), got 'fp8'");
  EXPECT_EQ(error_of(minimal("[a]\nseed = 1\n[b]\nseed = 2\n")),
            "train.toml:7: kohya argument 'seed': given twice (also at line 5); kohya flattens "
            "the tables and keeps the last silently, lorafleet refuses it");
  EXPECT_EQ(error_of(minimal("seed = 1\nseed = 2\n")).rfind("train.toml:5: TOML syntax error", 0),
            0u);
  EXPECT_EQ(error_of(minimal("[a.b]\nseed = 1\n")),
            "train.toml:4: kohya argument 'b': expected a value (kohya flattens one level of "
            "tables), got a table");
  EXPECT_EQ(error_of(minimal("text_encoder_lr = [1e-5, 2e-5]\n")),
            "train.toml:4: kohya argument 'text_encoder_lr': lorafleet has one text_encoder_lr "
            "for both SDXL text encoders, got 2 different values (not implemented in lorafleet "
            "yet)");
}

TEST_F(KohyaTrainingToml, OldOptimizerSpellingsAndTheirConflict) {
  EXPECT_EQ(from_toml(minimal("use_lion_optimizer = true\n")).training.optimizer_type, "Lion");
  EXPECT_EQ(from_toml(minimal("use_8bit_adam = false\n")).training.optimizer_type, "AdamW");
  EXPECT_EQ(error_of(minimal("use_8bit_adam = true\noptimizer_type = \"AdamW\"\n")),
            "train.toml:5: key 'training.optimizer_type' (kohya argument 'optimizer_type'): "
            "already given at train.toml:4 (kohya argument 'use_8bit_adam'); give it once");
}

TEST_F(KohyaTrainingToml, LoadAppendsTomlAsKohyaDoes) {
  write_text(dir_.path() / "train.toml",
             "pretrained_model_name_or_path = \"m.safetensors\"\ndataset_config = \"" +
                 dir_.str("datasets.toml") + "\"\nmax_train_steps = 10\n");
  const JobConfig c = load_kohya_training_config(dir_.str("train"), "");
  EXPECT_EQ(c.training.max_train_steps, 10);
  EXPECT_EQ(c.source_name, dir_.str("train.toml") + " (as job YAML)");
  try {
    load_kohya_training_config(dir_.str("missing.toml"), "");
    FAIL() << "no error for a missing file";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), dir_.str("missing.toml") +
                                         ": cannot read the kohya training config file "
                                         "(--config_file)");
  }
}

// ---- the fate table --------------------------------------------------------------------------

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.is_open()) << path;
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(KohyaArgFates, CoverExactlyKohyasCommittedArgumentList) {
  std::set<std::string> listed;
  for (const std::string& line :
       lines_of(std::string(LF_SOURCE_DIR) + "/tests/fixtures/kohya/train_network_args.txt")) {
    if (line.empty() || line[0] == '#') continue;
    EXPECT_TRUE(listed.insert(line).second) << line << " listed twice";
  }
  std::set<std::string> table;
  for (const KohyaArg& a : kohya_args()) {
    EXPECT_TRUE(table.insert(a.name).second) << a.name << " declared twice";
  }
  EXPECT_GE(listed.size(), 190u);
  EXPECT_EQ(table, listed);
}

TEST(KohyaArgFates, EachFateIsWellFormed) {
  for (const KohyaArg& a : kohya_args()) {
    const std::string target = kohya_arg_target(a.name);
    if (a.fate == KohyaArgFate::kKey) {
      EXPECT_FALSE(target.empty()) << a.name << ": no job key or dataset key of that name";
    } else {
      EXPECT_FALSE(std::string(a.detail).empty()) << a.name << ": no reason given";
    }
    EXPECT_EQ(std::string(a.noop).empty(), a.fate != KohyaArgFate::kNoOpOnly) << a.name;
    EXPECT_EQ(find_kohya_arg(a.name), &a);
  }
  EXPECT_EQ(find_kohya_arg("not_an_argument"), nullptr);
}

// docs/configuration.md shows the table as `lorafleet-coordinator --list-kohya-args` prints it.
TEST(KohyaArgFates, DocsListEveryArgumentWithItsFate) {
  std::set<std::string> doc;
  for (const std::string& line : lines_of(std::string(LF_SOURCE_DIR) + "/docs/configuration.md")) {
    doc.insert(line);
  }
  std::istringstream rows(kohya_args_markdown());
  int n = 0;
  for (std::string row; std::getline(rows, row); ++n) {
    EXPECT_TRUE(doc.count(row)) << "docs/configuration.md lacks the row (regenerate it with "
                                   "lorafleet-coordinator --list-kohya-args):\n"
                                << row;
  }
  EXPECT_EQ(n, static_cast<int>(kohya_args().size()));
}

TEST(KohyaArgFates, ReadmeNamesEveryRefusedArgument) {
  std::string readme;
  for (const std::string& line : lines_of(std::string(LF_SOURCE_DIR) + "/README.md")) {
    readme += line + "\n";
  }
  // The arguments refused at any value but their no-op one: the "no-op only" rows.
  std::istringstream rows(kohya_args_markdown());
  int refused = 0;
  for (std::string row; std::getline(rows, row);) {
    if (row.find("` | no-op only | ") == std::string::npos) continue;
    const std::string name = row.substr(3, row.find('`', 3) - 3);
    EXPECT_NE(readme.find("`" + name + "`"), std::string::npos)
        << "README.md does not name the refused kohya argument " << name;
    ++refused;
  }
  EXPECT_GE(refused, 40);
}

}  // namespace
}  // namespace lf
