// Tests for the strict job-config parser: a full valid file, defaults, path resolution, and the
// exact "<file>:<line>: ..." messages for unknown keys, wrong types, bad values, syntax errors.
#include "common/config/job_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/common/fixtures.h"

namespace lf {
namespace {

const char* const kValid = R"(# demo job
model:
  pretrained_model_name_or_path: models/tiny.safetensors
  architecture: sd15
  tokenizer_vocab: /opt/vocab/bpe_simple_vocab_16e6.txt.gz
dataset:
  train_data_dir: data/train
  reg_data_dir: data/reg
  resolution: [768, 512]
  enable_bucket: true
  min_bucket_reso: 320
  max_bucket_reso: 1280
  bucket_reso_steps: 64
  bucket_no_upscale: false
  caption_extension: .caption
  reg_selection: first
network:
  network_dim: 8
  network_alpha: 4
  network_weights: ""
training:
  seed: 18446744073709551615
  train_batch_size: 2
  learning_rate: 1e-4
  lr_scheduler: constant_with_warmup
  lr_warmup_steps: 10
  max_train_steps: 300
  max_train_epochs: 0
  save_every_n_steps: 100
  prior_loss_weight: 0.75
  max_grad_norm: 0
  adam_beta1: 0.8
  adam_beta2: 0.99
  adam_epsilon: 1.0e-6
  adam_weight_decay: 0
output:
  output_dir: out
  output_name: my_lora
  keep_last_n_checkpoints: 3
coordinator:
  listen_address: 0.0.0.0:6000
  metrics_address: ""
  linger_seconds: 5
worker:
  metrics_host: 10.0.0.2
  metrics_port_base: 9500
  num_threads: 4
  device: cpu
)";

const char* const kMinimal = R"(model:
  pretrained_model_name_or_path: /m/model.safetensors
dataset:
  train_data_dir: /d/train
)";

std::string error_of(const std::string& yaml, const std::string& name = "job.yaml") {
  try {
    parse_job_config(yaml, name);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no ConfigError>";
}

TEST(JobConfig, ValidFileParsesEveryKey) {
  const JobConfig c = parse_job_config(kValid, "configs/demo.yaml", "/base");
  EXPECT_EQ(c.source_name, "configs/demo.yaml");
  EXPECT_EQ(c.yaml_text, kValid);
  EXPECT_EQ(c.model.pretrained_model_name_or_path, "/base/models/tiny.safetensors");
  EXPECT_EQ(c.model.architecture, "sd15");
  EXPECT_EQ(c.model.tokenizer_vocab, "/opt/vocab/bpe_simple_vocab_16e6.txt.gz");  // absolute
  EXPECT_EQ(c.dataset.train_data_dir, "/base/data/train");
  EXPECT_EQ(c.dataset.reg_data_dir, "/base/data/reg");
  EXPECT_EQ(c.dataset.resolution_w, 768);
  EXPECT_EQ(c.dataset.resolution_h, 512);
  EXPECT_TRUE(c.dataset.enable_bucket);
  EXPECT_EQ(c.dataset.min_bucket_reso, 320);
  EXPECT_EQ(c.dataset.max_bucket_reso, 1280);
  EXPECT_EQ(c.dataset.bucket_reso_steps, 64);
  EXPECT_FALSE(c.dataset.bucket_no_upscale);
  EXPECT_EQ(c.dataset.caption_extension, ".caption");
  EXPECT_EQ(c.dataset.reg_selection, "first");
  EXPECT_EQ(c.network.network_dim, 8);
  EXPECT_DOUBLE_EQ(c.network.network_alpha, 4.0);
  EXPECT_EQ(c.network.network_weights, "");  // empty stays empty, not "/base"
  EXPECT_EQ(c.training.seed, 18446744073709551615ULL);
  EXPECT_EQ(c.training.train_batch_size, 2);
  EXPECT_DOUBLE_EQ(c.training.learning_rate, 1e-4);
  EXPECT_EQ(c.training.lr_scheduler, "constant_with_warmup");
  EXPECT_EQ(c.training.lr_warmup_steps.steps, 10);
  EXPECT_FALSE(c.training.lr_warmup_steps.ratio.has_value());
  EXPECT_EQ(c.training.max_train_steps, 300);
  EXPECT_EQ(c.training.max_train_epochs, 0);
  EXPECT_EQ(c.training.save_every_n_steps, 100);
  EXPECT_DOUBLE_EQ(c.training.prior_loss_weight, 0.75);
  EXPECT_DOUBLE_EQ(c.training.max_grad_norm, 0.0);
  EXPECT_DOUBLE_EQ(c.training.adam_beta1, 0.8);
  EXPECT_DOUBLE_EQ(c.training.adam_beta2, 0.99);
  EXPECT_DOUBLE_EQ(c.training.adam_epsilon, 1e-6);
  EXPECT_DOUBLE_EQ(c.training.adam_weight_decay, 0.0);
  EXPECT_EQ(c.output.output_dir, "/base/out");
  EXPECT_EQ(c.output.output_name, "my_lora");
  EXPECT_EQ(c.output.keep_last_n_checkpoints, 3);
  EXPECT_EQ(c.coordinator.listen_address, "0.0.0.0:6000");
  EXPECT_EQ(c.coordinator.metrics_address, "");
  EXPECT_EQ(c.coordinator.linger_seconds, 5);
  EXPECT_EQ(c.worker.metrics_host, "10.0.0.2");
  EXPECT_EQ(c.worker.metrics_port_base, 9500);
  EXPECT_EQ(c.worker.num_threads, 4);
  EXPECT_EQ(c.worker.device, "cpu");
}

TEST(JobConfig, MinimalFileKeepsDefaults) {
  const JobConfig c = parse_job_config(kMinimal, "<string>");
  EXPECT_EQ(c.model.architecture, "auto");
  EXPECT_FALSE(c.model.v_parameterization);
  EXPECT_FALSE(c.model.disable_mmap_load_safetensors);
  EXPECT_EQ(c.training.clip_skip, 0);
  EXPECT_EQ(c.model.tokenizer_vocab, ".deps/bpe_simple_vocab_16e6.txt.gz");  // no base_dir
  EXPECT_EQ(c.dataset.resolution_w, 512);
  EXPECT_EQ(c.dataset.resolution_h, 512);
  EXPECT_EQ(c.dataset.reg_data_dir, "");
  EXPECT_EQ(c.dataset.caption_extension, ".caption");  // kohya's default
  EXPECT_EQ(c.dataset.reg_selection, "first");
  EXPECT_EQ(c.dataset.dataset_config, "");
  EXPECT_EQ(c.dataset.on_bad_image, "error");
  EXPECT_EQ(c.dataset.max_image_pixels, 178956970);
  EXPECT_EQ(c.dataset.scan_threads, 0);
  EXPECT_FALSE(c.dataset.cache_latents_to_disk);
  EXPECT_FALSE(c.dataset.cache_text_encoder_outputs_to_disk);
  EXPECT_EQ(c.dataset.cache_dir, "output/cache");  // "" means <output_dir>/cache
  ASSERT_EQ(c.datasets.size(), 1u);
  EXPECT_EQ(c.datasets[0].train_data_dir, "/d/train");
  EXPECT_EQ(c.datasets[0].batch_size, 1);  // training.train_batch_size
  EXPECT_EQ(c.datasets[0].folder_defaults.caption_extension, ".caption");
  EXPECT_TRUE(c.dataset_warnings.empty());
  EXPECT_EQ(c.network.network_dim, 4);
  EXPECT_DOUBLE_EQ(c.network.network_alpha, 1.0);
  EXPECT_EQ(c.training.seed, 42u);
  EXPECT_EQ(c.training.lr_scheduler, "cosine");
  EXPECT_EQ(c.training.max_train_steps, 1600);
  EXPECT_EQ(c.output.output_dir, "output");
  EXPECT_EQ(c.coordinator.listen_address, "127.0.0.1:50051");
  EXPECT_EQ(c.worker.device, "auto");
  EXPECT_EQ(c.coordinator.job_token_file, "");
  EXPECT_EQ(c.coordinator.tls_cert_file, "");
  EXPECT_EQ(c.cluster.world_size, 0);
  EXPECT_EQ(c.cluster.collective_timeout, 60);
  EXPECT_EQ(c.cluster.preempt_grace_seconds, 25);  // under Kubernetes' default 30 s
  EXPECT_EQ(c.cluster.max_restarts, 3);
  EXPECT_DOUBLE_EQ(c.cluster.restart_backoff_seconds, 2.0);
  EXPECT_DOUBLE_EQ(c.cluster.restart_backoff_max_seconds, 60.0);
  EXPECT_EQ(c.cluster.rendezvous_timeout_seconds, 300);
}

TEST(JobConfig, ClusterAndSecurityKeys) {
  const std::string m(kMinimal);
  const JobConfig c = parse_job_config(
      m + "coordinator:\n  job_token_file: secrets/token\n  tls_cert_file: tls/server.crt\n"
          "  tls_key_file: tls/server.key\ncluster:\n  world_size: 4\n  collective_timeout: 20\n"
          "  preempt_grace_seconds: 10\n  max_restarts: 5\n  restart_backoff_seconds: 0.5\n"
          "  restart_backoff_max_seconds: 8\n  rendezvous_timeout_seconds: 90\n",
      "job.yaml", "/base");
  EXPECT_EQ(c.coordinator.job_token_file, "/base/secrets/token");
  EXPECT_EQ(c.coordinator.tls_cert_file, "/base/tls/server.crt");
  EXPECT_EQ(c.coordinator.tls_key_file, "/base/tls/server.key");
  EXPECT_EQ(c.cluster.world_size, 4);
  EXPECT_EQ(c.cluster.collective_timeout, 20);
  EXPECT_EQ(c.cluster.preempt_grace_seconds, 10);
  EXPECT_EQ(c.cluster.max_restarts, 5);
  EXPECT_DOUBLE_EQ(c.cluster.restart_backoff_seconds, 0.5);
  EXPECT_DOUBLE_EQ(c.cluster.restart_backoff_max_seconds, 8.0);
  EXPECT_EQ(c.cluster.rendezvous_timeout_seconds, 90);
  EXPECT_EQ(error_of(m + "cluster:\n  collective_timeout: 0\n"),
            "job.yaml:6: key 'cluster.collective_timeout': expected seconds >= 1, got 0");
  EXPECT_EQ(error_of(m + "coordinator:\n  tls_cert_file: a.crt\n"),
            "job.yaml:6: key 'coordinator.tls_cert_file': expected tls_cert_file and "
            "tls_key_file together (or neither), got only tls_cert_file");
}

TEST(JobConfig, ScalarResolutionAndKohyaNormalisations) {
  const JobConfig c = parse_job_config(std::string(kMinimal) +
                                           "  resolution: 640\n"
                                           "  caption_extension: txt\n"
                                           "network:\n  network_dim: 16\n  network_alpha: 0\n",
                                       "j.yaml");
  EXPECT_EQ(c.dataset.resolution_w, 640);
  EXPECT_EQ(c.dataset.resolution_h, 640);
  EXPECT_EQ(c.dataset.caption_extension, ".txt");      // kohya adds the dot
  // Kept as given (and written so in ss_network_alpha, as kohya); the LoRA network reads 0 as
  // network_dim (kohya_alpha, tested in test_lora_network).
  EXPECT_DOUBLE_EQ(c.network.network_alpha, 0.0);
}

TEST(JobConfig, NetworkConvLoRATrainPartsAndLearningRates) {
  const std::string m(kMinimal);
  JobConfig c = parse_job_config(m, "j.yaml");
  EXPECT_EQ(c.network.conv_dim, 0);
  EXPECT_DOUBLE_EQ(c.network.conv_alpha, 1.0);  // kohya create_network default
  EXPECT_FALSE(c.network.network_train_unet_only);
  EXPECT_FALSE(c.network.network_train_text_encoder_only);
  EXPECT_FALSE(c.network.unet_lr.has_value());  // unset: training.learning_rate
  EXPECT_FALSE(c.network.text_encoder_lr.has_value());
  c = parse_job_config(m + "network:\n  conv_dim: 8\n  conv_alpha: 0\n"
                           "  network_train_unet_only: true\n  unet_lr: 0.0002\n"
                           "  text_encoder_lr: 0\n",
                       "j.yaml");
  EXPECT_EQ(c.network.conv_dim, 8);
  EXPECT_DOUBLE_EQ(c.network.conv_alpha, 0.0);  // as given; the network reads it as conv_dim
  EXPECT_TRUE(c.network.network_train_unet_only);
  // kohya: text_encoder_lr 0 leaves the text encoders out, as network_train_unet_only does.
  EXPECT_TRUE(c.network.trains_unet());
  EXPECT_FALSE(c.network.trains_text_encoder());
  EXPECT_DOUBLE_EQ(c.network.unet_lr.value(), 0.0002);
  EXPECT_DOUBLE_EQ(c.network.text_encoder_lr.value(), 0.0);
  c = parse_job_config(m + "network:\n  conv_dim: 4\n  conv_alpha: 2\n  unet_lr:\n", "j.yaml");
  EXPECT_DOUBLE_EQ(c.network.conv_alpha, 2.0);
  EXPECT_FALSE(c.network.unet_lr.has_value());

  EXPECT_EQ(error_of(m + "network:\n  conv_dim: -1\n"),
            "job.yaml:6: key 'network.conv_dim': expected an integer >= 0 (0 = no conv LoRA), "
            "got -1");
  EXPECT_EQ(error_of(m + "network:\n  conv_alpha: -2\n"),
            "job.yaml:6: key 'network.conv_alpha': expected a number >= 0, got -2");
  EXPECT_EQ(error_of(m + "network:\n  unet_lr: -0.5\n"),
            "job.yaml:6: key 'network.unet_lr': expected a number >= 0, got -0.5");
  EXPECT_EQ(error_of(m + "network:\n  text_encoder_lr: abc\n"),
            "job.yaml:6: key 'network.text_encoder_lr': expected a number, got 'abc'");
  EXPECT_EQ(error_of(m + "network:\n  network_train_unet_only: true\n"
                         "  network_train_text_encoder_only: true\n"),
            "job.yaml:7: key 'network.network_train_text_encoder_only': expected not both "
            "network_train_unet_only and network_train_text_encoder_only (nothing would be "
            "trained), got both true");
  EXPECT_EQ(error_of(m + "  cache_text_encoder_outputs_to_disk: true\n"),
            "job.yaml:5: key 'dataset.cache_text_encoder_outputs_to_disk': expected false unless "
            "network.network_train_unet_only is true (the text encoders' LoRA trains by default "
            "and changes their outputs every step), got true");
  EXPECT_EQ(error_of(m + "network:\n  unet_lr: 0\n  text_encoder_lr: 0\n"),
            "job.yaml:6: key 'network.unet_lr': expected a UNet or text-encoder part to train "
            "(network_train_*_only and the lrs set to 0 leave none), got none");
  EXPECT_EQ(error_of(m + "training:\n  learning_rate: 0\n"),
            "job.yaml:6: key 'training.learning_rate': expected a learning rate > 0 for the UNet "
            "or the text encoders (nothing would be trained), got 0 for every trained part");
  EXPECT_EQ(parse_job_config(m + "network:\n  unet_lr: 0\n  network_train_unet_only: false\n",
                             "j.yaml")
                .network.unet_lr.value(),
            0.0);  // the text encoders still train at learning_rate
}

TEST(JobConfig, LorafleetDatasetKeys) {
  const JobConfig c = parse_job_config(std::string(kMinimal) +
                                           "  on_bad_image: skip\n"
                                           "  max_image_pixels: 4000000000\n"
                                           "  scan_threads: 4\n"
                                           "  cache_latents_to_disk: true\n"
                                           "  cache_text_encoder_outputs_to_disk: true\n"
                                           "  cache_dir: caches/../cache2\n"
                                           "network:\n  network_train_unet_only: true\n",
                                       "j.yaml", "/base");
  EXPECT_EQ(c.dataset.on_bad_image, "skip");
  EXPECT_EQ(c.dataset.max_image_pixels, 4000000000LL);
  EXPECT_EQ(c.dataset.scan_threads, 4);
  EXPECT_TRUE(c.dataset.cache_latents_to_disk);
  EXPECT_TRUE(c.dataset.cache_text_encoder_outputs_to_disk);
  EXPECT_EQ(c.dataset.cache_dir, "/base/cache2");
  EXPECT_EQ(parse_job_config(kMinimal, "j.yaml", "/base").dataset.cache_dir, "/base/output/cache");
}

TEST(JobConfig, UnknownKeyNamesFileLineAndChoices) {
  EXPECT_EQ(error_of(std::string(kMinimal) + "  foo: 1\n"),
            "job.yaml:5: unknown key 'dataset.foo' (expected one of: train_data_dir, "
            "reg_data_dir, dataset_config, reg_selection, on_bad_image, max_image_pixels, "
            "scan_threads, cache_latents_to_disk, cache_text_encoder_outputs_to_disk, cache_dir, "
            "caption_extension, alpha_mask, shuffle_caption, "
            "caption_separator, keep_tokens, keep_tokens_separator, caption_prefix, "
            "caption_suffix, caption_dropout_rate, caption_dropout_every_n_epochs, "
            "caption_tag_dropout_rate, flip_aug, random_crop, resolution, batch_size, "
            "enable_bucket, min_bucket_reso, max_bucket_reso, bucket_reso_steps, "
            "bucket_no_upscale, validation_split, validation_seed, cache_info, color_aug, "
            "face_crop_aug_range, token_warmup_min, token_warmup_step, enable_wildcard, "
            "secondary_separator, custom_attributes, resize_interpolation, network_multiplier)");
  EXPECT_EQ(error_of("model:\n  pretrained_model_name_or_path: m\ntrainig:\n  seed: 1\n"),
            "job.yaml:3: unknown key 'trainig' (expected one of: model, dataset, datasets, "
            "network, training, output, coordinator, worker, cluster)");
  // A kohya subset-only key in the CLI-level section is named as misplaced.
  EXPECT_EQ(error_of(std::string(kMinimal) + "  num_repeats: 3\n"),
            "job.yaml:5: key 'dataset.num_repeats': not allowed here (kohya allows num_repeats "
            "only in: subsets: entries, datasets: entries, [general] of a kohya .toml)");
}

TEST(JobConfig, WrongTypesNameKeyAndValue) {
  EXPECT_EQ(error_of(std::string(kMinimal) + "training:\n  learning_rate: abc\n"),
            "job.yaml:6: key 'training.learning_rate': expected a number, got 'abc'");
  EXPECT_EQ(error_of(std::string(kMinimal) + "network:\n  network_dim: 4.5\n"),
            "job.yaml:6: key 'network.network_dim': expected an integer, got '4.5'");
  EXPECT_EQ(error_of(std::string(kMinimal) + "  enable_bucket: maybe\n"),
            "job.yaml:5: key 'dataset.enable_bucket': expected true or false, got 'maybe'");
  EXPECT_EQ(error_of(std::string(kMinimal) + "training:\n  seed: -1\n"),
            "job.yaml:6: key 'training.seed': expected a non-negative integer, got '-1'");
  EXPECT_EQ(error_of(std::string(kMinimal) + "  resolution: [512, 512, 3]\n"),
            "job.yaml:5: key 'dataset.resolution': expected an integer or a [width, height] "
            "list of integers, got a list");
  EXPECT_EQ(error_of(std::string(kMinimal) + "  reg_data_dir: [a, b]\n"),
            "job.yaml:5: key 'dataset.reg_data_dir': expected a string, got a list");
  EXPECT_EQ(error_of("model: 3\n"),
            "job.yaml:1: section 'model': expected a mapping of keys, got '3'");
}

TEST(JobConfig, InvalidValuesNameKeyAndExpectation) {
  const std::string m(kMinimal);
  EXPECT_EQ(error_of(m + "network:\n  network_dim: 0\n"),
            "job.yaml:6: key 'network.network_dim': expected an integer >= 1, got 0");
  EXPECT_EQ(error_of(m + "training:\n  train_batch_size: 0\n"),
            "job.yaml:6: key 'training.train_batch_size': expected an integer >= 1, got 0");
  EXPECT_EQ(error_of(m + "training:\n  gradient_accumulation_steps: 0\n"),
            "job.yaml:6: key 'training.gradient_accumulation_steps': expected an integer >= 1, "
            "got 0");
  // A quoted value is a string, in YAML as in TOML.
  EXPECT_EQ(error_of(m + "training:\n  train_batch_size: '2'\n"),
            "job.yaml:6: key 'training.train_batch_size': expected an integer, got the quoted "
            "string '2' (remove the quotes)");
  EXPECT_EQ(error_of(m + "training:\n  lr_scheduler: exponential\n"),
            "job.yaml:6: key 'training.lr_scheduler': expected one of: constant, "
            "constant_with_warmup, linear, cosine, cosine_with_restarts, polynomial, "
            "inverse_sqrt, cosine_with_min_lr, warmup_stable_decay, piecewise_constant, "
            "adafactor, got 'exponential'");
  EXPECT_EQ(error_of(m + "  reg_selection: newest\n"),
            "job.yaml:5: key 'dataset.reg_selection': expected one of: first, random, rotate, "
            "got 'newest'");
  for (const char* mode : {"first", "random", "rotate"}) {
    EXPECT_EQ(parse_job_config(m + "  reg_selection: " + mode + "\n", "j").dataset.reg_selection,
              mode);
  }
  EXPECT_EQ(error_of(m + "  on_bad_image: ignore\n"),
            "job.yaml:5: key 'dataset.on_bad_image': expected one of: error, skip, got 'ignore'");
  EXPECT_EQ(error_of(m + "  max_image_pixels: 0\n"),
            "job.yaml:5: key 'dataset.max_image_pixels': expected an integer >= 1, got 0");
  EXPECT_EQ(error_of(m + "  scan_threads: -1\n"),
            "job.yaml:5: key 'dataset.scan_threads': expected an integer >= 0 (0 = all cores), "
            "got -1");
  EXPECT_EQ(error_of(m + "  batch_size: 0\n"),
            "job.yaml:5: key 'dataset.batch_size': expected an integer >= 1, got 0");
  EXPECT_EQ(error_of(m + "  bucket_reso_steps: 0\n"),
            "job.yaml:5: key 'dataset.bucket_reso_steps': expected a multiple of 8 (64 for SD "
            "1.x/2.x, as kohya), got 0");
  // Bucket sides become latent sides / 8.
  EXPECT_EQ(error_of(m + "  bucket_reso_steps: 60\n"),
            "job.yaml:5: key 'dataset.bucket_reso_steps': expected a multiple of 8 (64 for SD "
            "1.x/2.x, as kohya), got 60");
  EXPECT_EQ(error_of(m + "  enable_bucket: false\n  resolution: 500\n"),
            "job.yaml:6: key 'dataset.resolution': expected sides that are multiples of 8 when "
            "enable_bucket is false, got 500x500");
  EXPECT_EQ(error_of(m + "training:\n  max_train_steps: 0\n"),
            "job.yaml:6: key 'training.max_train_steps': expected an integer >= 1 (or "
            "max_train_epochs > 0), got 0");
  EXPECT_EQ(parse_job_config(m + "training:\n  max_train_steps: 0\n  max_train_epochs: 3\n", "j")
                .training.max_train_epochs,
            3);
  EXPECT_EQ(error_of("model:\n  pretrained_model_name_or_path: m\n  architecture: sd3\n"
                     "dataset:\n  train_data_dir: d\n"),
            "job.yaml:3: key 'model.architecture': expected one of: auto, tiny, tiny-sd2, "
            "tiny-sdxl, sd15, sd2, sdxl, got 'sd3'");
  EXPECT_EQ(error_of(m + "training:\n  clip_skip: -1\n"),
            "job.yaml:6: key 'training.clip_skip': expected an integer >= 0 (0 = the model "
            "family's default layer), got -1");
  // kohya --max_token_length: None (75 here), 150 or 225.
  EXPECT_EQ(parse_job_config(m, "j").training.max_token_length, 75);
  EXPECT_EQ(
      parse_job_config(m + "training:\n  max_token_length: 225\n", "j").training.max_token_length,
      225);
  EXPECT_EQ(error_of(m + "training:\n  max_token_length: 100\n"),
            "job.yaml:6: key 'training.max_token_length': expected 75, 150 or 225 (whole "
            "75-token windows; 75 = kohya's unset), got 100");
  EXPECT_EQ(error_of(m + "training:\n  max_token_length: 300\n"),
            "job.yaml:6: key 'training.max_token_length': expected an integer in [75, 225] (75, "
            "150 or 225), got 300");
  const JobConfig xl = parse_job_config(
      "model:\n  pretrained_model_name_or_path: m\n  architecture: sdxl\n"
      "  v_parameterization: true\n  disable_mmap_load_safetensors: true\n"
      "dataset:\n  train_data_dir: d\ntraining:\n  clip_skip: 2\n",
      "j");
  EXPECT_EQ(xl.model.architecture, "sdxl");
  EXPECT_TRUE(xl.model.v_parameterization);
  EXPECT_TRUE(xl.model.disable_mmap_load_safetensors);
  EXPECT_EQ(xl.training.clip_skip, 2);
  EXPECT_EQ(error_of("model:\n  pretrained_model_name_or_path: m\ndataset:\n  train_data_dir:\n"),
            "job.yaml:4: key 'dataset.train_data_dir': expected a non-empty path to a folder of "
            "<num_repeats>_<class tokens> subfolders, got nothing");
  EXPECT_EQ(error_of("dataset:\n  train_data_dir: d\n"),
            "job.yaml:1: key 'model.pretrained_model_name_or_path': expected a non-empty path "
            "to a .safetensors checkpoint, got nothing");
  EXPECT_NE(error_of(m + "  min_bucket_reso: 640\n")
                .find("job.yaml:5: key 'dataset.min_bucket_reso': expected at most the smaller "
                      "resolution side 512"),
            std::string::npos);
  EXPECT_NE(error_of(m + "worker:\n  device: tpu\n").find("job.yaml:6: key 'worker.device'"),
            std::string::npos);
}

TEST(JobConfig, DuplicateKeyAndSyntaxErrors) {
  EXPECT_EQ(error_of(std::string(kMinimal) + "  train_data_dir: /again\n"),
            "job.yaml:5: duplicate key 'dataset.train_data_dir' (first set on line 4)");
  const std::string syntax = error_of("model:\n  a: [1, 2\n  b: 3\n", "bad.yaml");
  EXPECT_EQ(syntax.rfind("bad.yaml:", 0), 0u) << syntax;
  EXPECT_NE(syntax.find("YAML syntax error"), std::string::npos) << syntax;
  EXPECT_EQ(error_of("- a\n- b\n"),
            "job.yaml:1: expected a mapping of sections (model, dataset, datasets, network, "
            "training, output, coordinator, worker, cluster), got a list");
}

TEST(JobConfig, LoadFileResolvesAgainstWorkingDirectory) {
  test::TempDir dir("job_config");
  const std::string path = dir.str("job.yaml");
  test::write_text(path, "model:\n  pretrained_model_name_or_path: m.safetensors\n"
                         "dataset:\n  train_data_dir: ./data/../train\n");
  const JobConfig c = load_job_config(path);
  const std::filesystem::path cwd = std::filesystem::current_path();
  EXPECT_EQ(c.source_name, path);
  EXPECT_EQ(c.model.pretrained_model_name_or_path, (cwd / "m.safetensors").string());
  EXPECT_EQ(c.dataset.train_data_dir, (cwd / "train").string());
  EXPECT_EQ(c.yaml_text.substr(0, 6), "model:");

  const std::string missing = dir.str("nope.yaml");
  try {
    load_job_config(missing);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(missing + ": cannot read", 0), 0u) << e.what();
  }
  EXPECT_THROW(load_job_config(dir.str("")), ConfigError);  // a directory
}

}  // namespace
}  // namespace lf

namespace lf {
namespace {

TEST(JobConfig, PrecisionAndMemoryKeysWithKohyasPreconditions) {
  const std::string m(kMinimal);
  const JobConfig c = parse_job_config(
      "model:\n  pretrained_model_name_or_path: m\n  vae_dtype: bf16\n  fp8_base: true\n"
      "dataset:\n  train_data_dir: d\n"
      "training:\n  mixed_precision: bf16\n  full_bf16: true\n  gradient_checkpointing: true\n"
      "  deterministic: true\n"
      "output:\n  save_precision: fp16\n"
      "worker:\n  vram_budget_gb: 7.5\n  offload_streams: 3\n",
      "j");
  EXPECT_EQ(c.model.vae_dtype, "bf16");
  EXPECT_TRUE(c.model.fp8_base);
  EXPECT_EQ(c.training.mixed_precision, "bf16");
  EXPECT_TRUE(c.training.full_bf16);
  EXPECT_TRUE(c.training.gradient_checkpointing);
  EXPECT_TRUE(c.training.deterministic);
  EXPECT_EQ(c.output.save_precision, "fp16");
  EXPECT_EQ(c.worker.vram_budget_gb, 7.5);
  EXPECT_EQ(c.worker.offload_streams, 3);
  const JobConfig d = parse_job_config(m, "j");  // kohya's defaults
  EXPECT_EQ(d.training.mixed_precision, "no");
  EXPECT_FALSE(d.training.gradient_checkpointing);
  EXPECT_EQ(d.model.vae_dtype, "fp32");
  EXPECT_EQ(d.output.save_precision, "");  // kohya's None: the training dtype
  EXPECT_EQ(d.worker.vram_budget_gb, 0.0);

  EXPECT_EQ(error_of(m + "training:\n  full_bf16: true\n"),
            "job.yaml:6: key 'training.full_bf16': needs training.mixed_precision: bf16 (as "
            "kohya), got 'no'");
  EXPECT_EQ(error_of(m + "training:\n  mixed_precision: bf16\n  full_fp16: true\n"),
            "job.yaml:7: key 'training.full_fp16': needs training.mixed_precision: fp16 (as "
            "kohya), got 'bf16'");
  EXPECT_EQ(error_of(m + "training:\n  mixed_precision: fp8\n"),
            "job.yaml:6: key 'training.mixed_precision': expected one of: no, fp16, bf16 (kohya "
            "--mixed_precision), got 'fp8'");
  EXPECT_EQ(error_of("model:\n  pretrained_model_name_or_path: m\n  fp8_base: true\n"
                     "dataset:\n  train_data_dir: d\n"),
            "job.yaml:3: key 'model.fp8_base': needs training.mixed_precision fp16 or bf16 (the "
            "compute dtype the float8 weights are upcast to, as kohya), got 'no'");
  EXPECT_EQ(error_of("model:\n  pretrained_model_name_or_path: m\n  vae_dtype: half\n"
                     "dataset:\n  train_data_dir: d\n"),
            "job.yaml:3: key 'model.vae_dtype': expected one of: fp32, fp16, bf16, got 'half'");
  EXPECT_EQ(error_of(m + "output:\n  save_precision: fp32\n"),
            "job.yaml:6: key 'output.save_precision': expected one of: float, fp16, bf16 (kohya "
            "--save_precision), or unset for the training dtype, got 'fp32'");
  EXPECT_EQ(error_of(m + "worker:\n  vram_budget_gb: 8\n"),
            "job.yaml:6: key 'worker.vram_budget_gb': expected 0 unless "
            "training.gradient_checkpointing is true (a streamed block's weights must be fetched "
            "again when its backward recomputes it), got 8");
  EXPECT_EQ(error_of(m + "worker:\n  vram_budget_gb: 8\n  device: cpu\n"),
            "job.yaml:6: key 'worker.vram_budget_gb': expected 0 with worker.device cpu (the "
            "budget streams UNet weights to a GPU), got 8");
  EXPECT_EQ(error_of(m + "worker:\n  offload_streams: 0\n"),
            "job.yaml:6: key 'worker.offload_streams': expected an integer in [1, 8], got 0");
}

// The example for a 24 GB card parses, sets what it says it sets, and shows every precision
// and memory key; each of those keys is documented in docs/configuration.md.
TEST(JobConfig, SdxlExampleAndDocsCoverThePrecisionKeys) {
  const std::string root = LF_SOURCE_DIR;
  const JobConfig c = load_job_config(root + "/configs/examples/sdxl_bf16_24gb.yaml");
  EXPECT_EQ(c.training.mixed_precision, "bf16");
  EXPECT_TRUE(c.training.gradient_checkpointing);
  EXPECT_EQ(c.model.vae_dtype, "fp32");
  EXPECT_EQ(c.output.save_precision, "fp16");
  EXPECT_EQ(c.dataset.resolution_w, 1024);
  std::ifstream example_file(root + "/configs/examples/sdxl_bf16_24gb.yaml");
  std::ifstream docs_file(root + "/docs/configuration.md");
  const std::string example((std::istreambuf_iterator<char>(example_file)), {});
  const std::string docs((std::istreambuf_iterator<char>(docs_file)), {});
  for (const char* key :
       {"vae_dtype", "fp8_base", "mixed_precision", "full_bf16", "full_fp16",
        "gradient_checkpointing", "deterministic", "save_precision", "vram_budget_gb",
        "offload_streams"}) {
    EXPECT_NE(example.find(std::string(key)), std::string::npos) << key << " not in the example";
    EXPECT_NE(docs.find("`" + std::string(key) + "`"), std::string::npos)
        << key << " not in docs/configuration.md";
  }
}

std::string training(const std::string& keys) {
  return std::string(kMinimal) + "training:\n  max_train_steps: 1000\n" + keys;
}

TEST(JobConfigLRSchedule, WarmupAndDecayTakeKohyasStepsRatiosAndPercentages) {
  auto warmup_of = [](const std::string& value) {
    return parse_job_config(training("  lr_scheduler: linear\n  lr_warmup_steps: " + value + "\n"),
                            "j.yaml")
        .training.lr_warmup_steps;
  };
  EXPECT_EQ(warmup_of("100").steps, 100);
  EXPECT_FALSE(warmup_of("100").ratio.has_value());
  EXPECT_DOUBLE_EQ(warmup_of("0.1").ratio.value(), 0.1);
  EXPECT_DOUBLE_EQ(warmup_of("10%").ratio.value(), 0.1);
  EXPECT_DOUBLE_EQ(warmup_of("\"12.5%\"").ratio.value(), 0.125);
  EXPECT_EQ(warmup_of("0.1234").resolve(999), 123);  // kohya: int(0.1234 * 999) = int(123.28)
  EXPECT_EQ(warmup_of("0.123456789").text(), "0.123456789");  // ss_lr_warmup_steps, as str()
  EXPECT_EQ(warmup_of("10%").text(), "0.1");
  EXPECT_EQ(error_of(training("  lr_warmup_steps: 1.5\n")),
            "job.yaml:7: key 'training.lr_warmup_steps': expected a step count (an integer) or a "
            "ratio of the total steps (a number below 1, or a percentage such as 10%), got '1.5'");
  EXPECT_NE(error_of(training("  lr_warmup_steps: 100%\n")).find("got '100%'"), std::string::npos);
  EXPECT_NE(error_of(training("  lr_warmup_steps: -3\n")).find("got '-3'"), std::string::npos);
}

TEST(JobConfigLRSchedule, RefusesWhatKohyaAndTransformersRefuseNamingTheKey) {
  EXPECT_EQ(error_of(training("  lr_scheduler: cosine\n  lr_warmup_steps: 1000\n")),
            "job.yaml:8: key 'training.lr_warmup_steps': expected fewer warmup steps than the "
            "run's total of 1000 steps, got 1000 (nothing would train at the full lr)");
  EXPECT_EQ(error_of(training("  lr_scheduler: cosine\n  lr_warmup_steps: 100%\n")).substr(0, 5),
            "job.y");
  EXPECT_EQ(error_of(training("  lr_scheduler: constant\n  lr_warmup_steps: 10\n")),
            "job.yaml:8: key 'training.lr_warmup_steps': expected 0 with lr_scheduler constant "
            "(as kohya; use constant_with_warmup for a warmup), got 10");
  EXPECT_EQ(error_of(training("  lr_scheduler: warmup_stable_decay\n  lr_warmup_steps: 0.5\n"
                              "  lr_decay_steps: 600\n")),
            "job.yaml:9: key 'training.lr_decay_steps': expected warmup + decay steps within the "
            "run's total of 1000 steps, got 500 + 600");
  EXPECT_NE(error_of(training("  lr_scheduler: cosine_with_min_lr\n"))
                .find("key 'training.lr_scheduler_min_lr_ratio': expected a floor for "
                      "cosine_with_min_lr"),
            std::string::npos);
  EXPECT_NE(error_of(training("  lr_scheduler: adafactor\n"))
                .find("job.yaml:7: key 'training.lr_scheduler': 'adafactor' reports the "
                      "AdaFactor optimizer's own relative-step lr: it needs optimizer_type "
                      "AdaFactor (as kohya asserts), got 'AdamW'"),
            std::string::npos);
  EXPECT_EQ(error_of(training("  lr_scheduler: polynomial\n  learning_rate: 1e-8\n")),
            "job.yaml:8: key 'training.learning_rate': expected more than the polynomial "
            "schedule's lr_end (1e-07, as transformers requires), got 1e-08");
}

TEST(JobConfigLRSchedule, SchedulerArgsInKohyasKeyValueForm) {
  const JobConfig c =
      parse_job_config(training("  lr_scheduler: piecewise_constant\n  lr_scheduler_args:\n"
                                "    - step_rules='1:10,0.1:20,0.01'\n"),
                       "j.yaml");
  EXPECT_EQ(c.training.lr_scheduler_args,
            std::vector<std::string>{"step_rules='1:10,0.1:20,0.01'"});
  EXPECT_EQ(error_of(training("  lr_scheduler: piecewise_constant\n")),
            "job.yaml:5: key 'training.lr_scheduler_args': piecewise_constant needs "
            "step_rules=\"m1:s1,...,m_last\" (diffusers' get_piecewise_constant_schedule)");
  EXPECT_EQ(error_of(training("  lr_scheduler: cosine_with_restarts\n"
                              "  lr_scheduler_args: [num_cycles=3]\n")),
            "job.yaml:8: key 'training.lr_scheduler_args': 'num_cycles' is set by "
            "training.lr_scheduler_num_cycles (as kohya passes it)");
  EXPECT_EQ(error_of(training("  lr_scheduler: polynomial\n  lr_scheduler_args: [min_lr=1]\n")),
            "job.yaml:8: key 'training.lr_scheduler_args': 'min_lr' is not an argument of the "
            "polynomial schedule (it takes: lr_end)");
  EXPECT_EQ(error_of(training("  lr_scheduler: warmup_stable_decay\n"
                              "  lr_scheduler_args: [decay_type=exp]\n")),
            "job.yaml:8: key 'training.lr_scheduler_args': expected decay_type one of: linear, "
            "cosine, 1-sqrt, got 'exp'");
  EXPECT_EQ(error_of(training("  lr_scheduler: piecewise_constant\n"
                              "  lr_scheduler_args: [\"step_rules=1:x,0.1\"]\n")),
            "job.yaml:8: key 'training.lr_scheduler_args': step_rules as "
            "\"multiple:step,...,last_multiple\", e.g. \"1:100,0.5:500,0.1\", got '1:x'");
}

// kohya's preconditions of the noise and loss keys (train_util.verify_training_args).
TEST(JobConfigObjective, KohyasPreconditionsNameTheKey) {
  const JobConfig ok = parse_job_config(
      training("  loss_type: huber\n  huber_schedule: exponential\n  min_snr_gamma: 5\n"
               "  noise_offset: 0.0357\n  adaptive_noise_scale: 0.00357\n"
               "  min_timestep: 100\n  max_timestep: 900\n"),
      "j.yaml");
  EXPECT_EQ(ok.training.loss_type, "huber");
  EXPECT_DOUBLE_EQ(ok.training.min_snr_gamma.value(), 5.0);
  EXPECT_EQ(ok.training.max_timestep, 900);
  const std::pair<const char*, const char*> refused[] = {
      {"  adaptive_noise_scale: 0.01\n",
       "job.yaml:7: key 'training.adaptive_noise_scale': needs training.noise_offset > 0 (as "
       "kohya)"},
      {"  scale_v_pred_loss_like_noise_pred: true\n",
       "job.yaml:7: key 'training.scale_v_pred_loss_like_noise_pred': needs "
       "model.v_parameterization: true (as kohya)"},
      {"  min_timestep: 600\n  max_timestep: 500\n",
       "job.yaml:8: key 'training.max_timestep': expected at least training.min_timestep (600; "
       "equal: one fixed timestep below 1000), got 500"},

      {"  loss_type: huber\n  huber_c: 0\n",
       "job.yaml:8: key 'training.huber_c': expected a number in (0, 1] for loss_type huber, "
       "got 0"},
      {"  loss_type: mse\n",
       "job.yaml:7: key 'training.loss_type': expected one of: l2, l1, huber, smooth_l1, got "
       "'mse'"}};
  for (const auto& [keys, message] : refused) EXPECT_EQ(error_of(training(keys)), message);
  // kohya's combinations: an offset with pyramid noise, a fixed timestep, zero terminal SNR
  // with min-SNR (its weights keep the original SNR).
  EXPECT_NO_THROW(parse_job_config(
      training("  noise_offset: 0.1\n  multires_noise_iterations: 6\n  min_timestep: 500\n"
               "  max_timestep: 500\n  zero_terminal_snr: true\n  min_snr_gamma: 5\n"),
      "j.yaml"));
  EXPECT_EQ(error_of(std::string(kMinimal) + "network:\n  loraplus_unet_lr_ratio: 0\n"),
            "job.yaml:6: key 'network.loraplus_unet_lr_ratio': expected a number > 0 (lora_up "
            "would not train), got 0");
  const JobConfig zt = parse_job_config(training("  zero_terminal_snr: true\n"), "j.yaml");
  ASSERT_EQ(zt.dataset_warnings.size(), 1u);
  EXPECT_EQ(zt.dataset_warnings[0],
            "j.yaml:7: key 'training.zero_terminal_snr': without model.v_parameterization "
            "training is unexpected (as kohya warns)");
}

}  // namespace
}  // namespace lf
