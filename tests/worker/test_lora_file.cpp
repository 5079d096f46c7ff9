// kohya LoRA files: tensors round-trip, ss_* metadata values, and the sshs hashes computed the
// way kohya's precalculate_safetensors_hashes does (checked against an independent SHA-256 of
// the file's data section).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "common/config/job_config.h"
#include "common/io/safetensors.h"
#include "common/io/sha256.h"
#include "worker/io/lora_file.h"
#include "worker/io/tensor_file.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

JobConfig demo_config() {
  return parse_job_config(
      "model:\n  pretrained_model_name_or_path: /m/base.safetensors\n"
      "dataset:\n  train_data_dir: /d\n  resolution: [384, 256]\n"
      "network:\n  network_dim: 8\n  network_alpha: 4\n"
      "training:\n  seed: 9\n  train_batch_size: 3\n  learning_rate: 0.0002\n"
      "output:\n  output_name: mine\n",
      "t.yaml");
}

TEST(LoRAFile, MetadataCarriesKohyaKeys) {
  LoRATrainingFacts f;
  f.steps = 50;
  f.epoch = 2;
  f.num_train_images = 100;
  f.num_reg_images = 9;
  f.world_size = 2;
  const auto m = kohya_lora_metadata(demo_config(), f);
  EXPECT_EQ(m.at("ss_network_module"), "networks.lora");
  EXPECT_EQ(m.at("ss_network_dim"), "8");
  EXPECT_EQ(m.at("ss_network_alpha"), "4.0");
  EXPECT_EQ(m.at("ss_learning_rate"), "0.0002");
  EXPECT_EQ(m.at("ss_steps"), "50");
  EXPECT_EQ(m.at("ss_epoch"), "2");
  EXPECT_EQ(m.at("ss_num_train_images"), "100");
  EXPECT_EQ(m.at("ss_num_reg_images"), "9");
  EXPECT_EQ(m.at("ss_total_batch_size"), "6");
  EXPECT_EQ(m.at("ss_resolution"), "(384, 256)");
  EXPECT_EQ(m.at("ss_seed"), "9");
  EXPECT_EQ(m.at("ss_sd_model_name"), "base.safetensors");
  EXPECT_EQ(m.at("ss_base_model_version"), "sd_v1");
  // The objective options kohya records, at kohya's unset defaults.
  EXPECT_EQ(m.at("ss_noise_offset"), "None");
  EXPECT_EQ(m.at("ss_min_snr_gamma"), "None");
  EXPECT_EQ(m.at("ss_loss_type"), "l2");
  EXPECT_EQ(m.at("ss_huber_schedule"), "snr");
  EXPECT_EQ(m.at("ss_huber_c"), "0.1");
  EXPECT_EQ(m.at("ss_multires_noise_discount"), "0.3");
  EXPECT_EQ(m.at("ss_debiased_estimation"), "False");
  // No validation split: kohya's defaults.
  EXPECT_EQ(m.at("ss_num_validation_images"), "0");
  EXPECT_EQ(m.at("ss_validation_split"), "0.0");
  EXPECT_EQ(m.at("ss_validation_seed"), "None");
  EXPECT_EQ(m.at("ss_validate_every_n_steps"), "None");
  EXPECT_EQ(m.at("ss_max_validation_steps"), "None");
  EXPECT_EQ(m.count("ss_network_args"), 0u);
  EXPECT_EQ(m.at("modelspec.architecture"), "stable-diffusion-v1/lora");
  EXPECT_EQ(m.at("modelspec.resolution"), "384x256");
}

// With a dataset config (ss_datasets given), kohya writes no per-job dataset keys.
TEST(LoRAFile, DatasetConfigMetadataReplacesTheLegacyKeys) {
  LoRATrainingFacts f;
  f.tag_frequency_json = "{\"10_x\": {\"ohwx\": 3}}";
  f.dataset_dirs_json = "{\"10_x\": {\"n_repeats\": 10, \"img_count\": 3}}";
  f.reg_dataset_dirs_json = "{}";
  f.bucket_info_json = "{}";
  const auto legacy = kohya_lora_metadata(demo_config(), f);
  EXPECT_EQ(legacy.at("ss_tag_frequency"), f.tag_frequency_json);
  EXPECT_EQ(legacy.at("ss_dataset_dirs"), f.dataset_dirs_json);
  EXPECT_EQ(legacy.at("ss_reg_dataset_dirs"), "{}");
  EXPECT_EQ(legacy.count("ss_datasets"), 0u);
  EXPECT_EQ(legacy.at("ss_resolution"), "(384, 256)");
  f.datasets_json = "[{\"batch_size_per_device\": 3}]";
  const auto with_config = kohya_lora_metadata(demo_config(), f);
  EXPECT_EQ(with_config.at("ss_datasets"), f.datasets_json);
  EXPECT_EQ(with_config.at("ss_tag_frequency"), f.tag_frequency_json);
  for (const char* key : {"ss_resolution", "ss_batch_size_per_device", "ss_flip_aug",
                          "ss_bucket_info", "ss_reg_dataset_dirs"}) {
    EXPECT_EQ(with_config.count(key), 0u) << key;
  }
  EXPECT_EQ(with_config.at("modelspec.resolution"), "384x256");
}

TEST(LoRAFile, FloatsAreWrittenAsPythonStrDoes) {
  // Expected strings are CPython 3.11's str(float) of the same values.
  EXPECT_EQ(py_float(1795993460.0), "1795993460.0");
  EXPECT_EQ(py_float(1764450000.125), "1764450000.125");
  EXPECT_EQ(py_float(1.0), "1.0");
  EXPECT_EQ(py_float(0.0002), "0.0002");
  EXPECT_EQ(py_float(0.0001), "0.0001");
  EXPECT_EQ(py_float(1e-05), "1e-05");
  EXPECT_EQ(py_float(1e-08), "1e-08");
  EXPECT_EQ(py_float(0.999), "0.999");
  EXPECT_EQ(py_float(1e16), "1e+16");
  EXPECT_EQ(py_float(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(py_float(-2.5), "-2.5");
  EXPECT_EQ(py_float(0.1 + 0.2), "0.30000000000000004");
}

TEST(LoRAFile, BucketInfoCountsPlanSamplesPerBucket) {
  Dataset d;
  d.images.resize(2);
  d.images[0].bucket.ar_error = 0.25;
  d.images[1].bucket.ar_error = -0.75;
  EpochPlan plan;
  auto batch = [](BucketReso bucket, std::vector<int> images) {
    GlobalBatch b;
    b.bucket = bucket;
    for (int i : images) b.samples.push_back(PlanSample{i, 1.f, {}, false, ""});
    return b;
  };
  plan.batches.push_back(batch({256, 320}, {0, 0}));
  plan.batches.push_back(batch({128, 64}, {1}));
  plan.batches.push_back(batch({256, 320}, {0}));
  EXPECT_EQ(kohya_bucket_info_json(d, plan),
            "{\"buckets\": {\"0\": {\"resolution\": [128, 64], \"count\": 1}, "
            "\"1\": {\"resolution\": [256, 320], \"count\": 3}}, \"mean_img_ar_error\": 0.5}");
}

TEST(LoRAFile, SavedFileRoundTripsWithSshsHashes) {
  const fs::path dir = fs::temp_directory_path() / ("lf_lora_file_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "x.safetensors").string();
  torch::manual_seed(3);
  std::map<std::string, at::Tensor> state = {
      {"lora_unet_a.lora_down.weight", torch::randn({4, 32})},
      {"lora_unet_a.lora_up.weight", torch::randn({32, 4})},
      {"lora_unet_a.alpha", torch::tensor(2.0f)},
  };
  save_kohya_lora(path, state, {{"ss_network_dim", "4"}, {"modelspec.title", "x"}});

  const SafetensorsFile file = SafetensorsFile::open(path);
  const auto& meta = file.metadata();
  // sshs_model_hash = SHA-256 of the data section, which does not depend on the metadata.
  EXPECT_EQ(meta.at("sshs_model_hash"), sha256_hex(file.data_section(), file.data_size()));
  // The file is < 1 MiB, so kohya's legacy slice at 0x100000 is empty: SHA-256("")[:8].
  EXPECT_EQ(meta.at("sshs_legacy_hash"), "e3b0c442");
  EXPECT_EQ(meta.at("modelspec.title"), "x");
  const auto loaded = load_safetensors(path);
  ASSERT_EQ(loaded.tensors.size(), 3u);
  for (const auto& [k, v] : state) EXPECT_TRUE(torch::equal(loaded.tensors.at(k), v)) << k;
  EXPECT_EQ(loaded.tensors.at("lora_unet_a.alpha").dim(), 0);
  fs::remove_all(dir);
}

// Above 1 MiB kohya's legacy hash covers real bytes: SHA-256 over [0x100000, 0x110000) of the
// file as safetensors.torch.save(tensors, ss_* metadata only) writes it, computed here from that
// whole serialisation; the returned digest is the written file's.
TEST(LoRAFile, LegacyHashOfALargeFileIsOfTheSsOnlyImage) {
  const fs::path dir = fs::temp_directory_path() / ("lf_lora_large_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "x.safetensors").string();
  torch::manual_seed(4);
  std::map<std::string, at::Tensor> state = {
      {"lora_unet_a.lora_down.weight", torch::randn({32, 320})},
      {"lora_unet_a.lora_up.weight", torch::randn({10240, 32})},  // 1.25 MiB
      {"lora_unet_a.alpha", torch::tensor(16.0f)},
  };
  const std::map<std::string, std::string> metadata = {{"ss_network_dim", "32"},
                                                       {"modelspec.title", "large"}};
  const FileDigest digest = save_kohya_lora(path, state, metadata);
  const std::vector<std::uint8_t> ss_image =
      serialize_safetensors(state, {{"ss_network_dim", "32"}});
  ASSERT_GT(ss_image.size(), 0x110000u);
  const SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.metadata().at("sshs_legacy_hash"),
            sha256_hex(ss_image.data() + 0x100000, 0x10000).substr(0, 8));
  EXPECT_EQ(file.metadata().at("sshs_model_hash"),
            sha256_hex(file.data_section(), file.data_size()));
  EXPECT_EQ(digest.size, fs::file_size(path));
  EXPECT_EQ(digest.sha256, sha256_file_hex(path));
  fs::remove_all(dir);
}

TEST(LoRAFile, MetadataPerFamily) {
  JobConfig c = demo_config();
  LoRATrainingFacts f;
  auto m = kohya_lora_metadata(c, f);  // sd1 by default
  EXPECT_EQ(m.at("ss_v2"), "False");
  EXPECT_EQ(m.at("modelspec.implementation"), "diffusers");
  EXPECT_EQ(m.at("modelspec.prediction_type"), "epsilon");
  EXPECT_EQ(m.at("modelspec.sai_model_spec"), "1.0.1");
  EXPECT_EQ(m.at("modelspec.title"), "mine");
  EXPECT_EQ(m.at("ss_clip_skip"), "None");
  EXPECT_EQ(m.at("ss_max_token_length"), "None");  // 75: kohya's unset
  EXPECT_EQ(m.count("modelspec.encoder_layer"), 0u);
  EXPECT_EQ(m.count("ss_network_args"), 0u);
  EXPECT_EQ(m.at("ss_unet_lr"), "None");
  EXPECT_EQ(m.at("ss_text_encoder_lr"), "None");
  const std::string date = m.at("modelspec.date");  // e.g. 2025-01-31T12:34:56
  ASSERT_EQ(date.size(), 19u) << date;
  EXPECT_EQ(date[4], '-');
  EXPECT_EQ(date[10], 'T');
  EXPECT_EQ(date[16], ':');

  f.family = "sd2";
  m = kohya_lora_metadata(c, f);
  EXPECT_EQ(m.at("ss_v2"), "True");
  EXPECT_EQ(m.at("ss_base_model_version"), "sd_v2");
  EXPECT_EQ(m.at("modelspec.architecture"), "stable-diffusion-v2-512/lora");
  f.v_parameterization = true;
  f.clip_skip = 2;
  c.training.max_token_length = 225;
  m = kohya_lora_metadata(c, f);
  EXPECT_EQ(m.at("ss_max_token_length"), "225");
  EXPECT_EQ(m.at("ss_base_model_version"), "sd_v2_v");
  EXPECT_EQ(m.at("modelspec.architecture"), "stable-diffusion-v2-768-v/lora");
  EXPECT_EQ(m.at("modelspec.prediction_type"), "v");
  EXPECT_EQ(m.at("modelspec.implementation"), "diffusers");
  EXPECT_EQ(m.at("ss_clip_skip"), "2");
  EXPECT_EQ(m.at("modelspec.encoder_layer"), "2");

  f = LoRATrainingFacts{};
  f.family = "sdxl";
  c.network.conv_dim = 4;
  c.network.conv_alpha = 1.0;
  c.network.unet_lr = 0.0001;
  c.network.text_encoder_lr = 5e-05;
  m = kohya_lora_metadata(c, f);
  EXPECT_EQ(m.at("ss_v2"), "False");
  EXPECT_EQ(m.at("ss_base_model_version"), "sdxl_base_v1-0");
  EXPECT_EQ(m.at("modelspec.architecture"), "stable-diffusion-xl-v1-base/lora");
  EXPECT_EQ(m.at("modelspec.implementation"), "https://github.com/Stability-AI/generative-models");
  EXPECT_EQ(m.at("ss_network_args"), "{\"conv_dim\": \"4\", \"conv_alpha\": \"1.0\"}");
  EXPECT_EQ(m.at("ss_unet_lr"), "0.0001");
  EXPECT_EQ(m.at("ss_text_encoder_lr"), "5e-05");

  f.family = "sd3";
  EXPECT_THROW(kohya_lora_metadata(c, f), std::invalid_argument);
}

TEST(LoRAFile, SaveRefusesAHeaderOverTheSafetensorsLimit) {
  const fs::path dir = fs::temp_directory_path() / ("lf_lora_cap_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "big.safetensors").string();
  std::map<std::string, at::Tensor> state = {{"lora_unet_a.alpha", torch::tensor(2.0f)}};
  // Just under the limit is written (the bound counts the other keys' bytes too).
  save_kohya_lora(path, state, {{"ss_tag_frequency", std::string(99000000, 'x')}});
  EXPECT_TRUE(fs::exists(path));
  fs::remove(path);
  try {
    save_kohya_lora(path, state, {{"ss_tag_frequency", std::string(100000000, 'x')}});
    FAIL();
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("over the safetensors limit of 100000000"), std::string::npos) << what;
    EXPECT_NE(what.find("ss_tag_frequency"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(path));
  fs::remove_all(dir);
}

TEST(LoRAFile, PeftAdapterMetadataParses) {
  const auto m = parse_peft_adapter_metadata(
      "{\"unet.lora_alpha\": 8, \"unet.r\": 4, \"unet.alpha_pattern\": {\"attn1.to_q\": 2}, "
      "\"text_encoder_2.lora_alpha\": 16.5, \"text_encoder_2.use_rslora\": true, "
      "\"lora_alpha\": 3, \"target_modules\": [\"to_q\"]}");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m.at("unet").lora_alpha, 8.0);
  EXPECT_EQ(m.at("unet").r, 4);
  EXPECT_EQ(m.at("unet").alpha_pattern.at("attn1.to_q"), 2.0);
  EXPECT_EQ(m.at("text_encoder_2").lora_alpha, 16.5);
  EXPECT_TRUE(m.at("text_encoder_2").use_rslora);
  EXPECT_EQ(m.at("").lora_alpha, 3.0);
  EXPECT_THROW(parse_peft_adapter_metadata("{oops"), std::runtime_error);
}

// Found while writing the lora_file fuzz target (regressions/lora_file/peft_rank_past_int64): an
// "r" of 1e300 was converted to int64 (undefined behaviour; INT64_MIN on x86), not refused.
TEST(LoRAFile, PeftAdapterMetadataRefusesARankPastInt64) {
  // The JSON value as given, and as the message quotes it (nlohmann's dump).
  const std::pair<const char*, const char*> refused[] = {
      {"1e300", "1e+300"}, {"1e10", "10000000000.0"}, {"-4", "-4"}};
  for (const auto& [r, quoted] : refused) {
    try {
      parse_peft_adapter_metadata(std::string("{\"unet.r\": ") + r + "}");
      ADD_FAILURE() << "r " << r << " was accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(
          std::string(e.what()),
          std::string("lora_adapter_metadata: bad value for 'unet.r': expected a rank, got ") +
              quoted);
    }
  }
  EXPECT_EQ(parse_peft_adapter_metadata("{\"r\": 16.0}").at("").r, 16);
}

}  // namespace
}  // namespace lf

namespace lf {
namespace {

// A recipe with LoRA+, noise offset, min-SNR and Huber: kohya's ss_* values, as str() of args.
TEST(LoRAFile, MetadataRecordsTheObjectiveOptions) {
  const JobConfig c = parse_job_config(
      "model:\n  pretrained_model_name_or_path: /m/base.safetensors\n"
      "dataset:\n  train_data_dir: /d\n"
      "network:\n  loraplus_lr_ratio: 16\n"
      "training:\n  noise_offset: 0.0357\n  min_snr_gamma: 5\n  loss_type: huber\n"
      "  huber_schedule: exponential\n  multires_noise_discount: 0.4\n  ip_noise_gamma: 0.1\n"
      "  min_timestep: 100\n  debiased_estimation_loss: true\n",
      "t.yaml");
  LoRATrainingFacts f;
  f.family = "sd1";
  const auto m = kohya_lora_metadata(c, f);
  EXPECT_EQ(m.at("ss_network_args"), "{\"loraplus_lr_ratio\": \"16.0\"}");  // kohya network_args
  EXPECT_EQ(m.at("ss_noise_offset"), "0.0357");
  EXPECT_EQ(m.at("ss_min_snr_gamma"), "5.0");
  EXPECT_EQ(m.at("ss_loss_type"), "huber");
  EXPECT_EQ(m.at("ss_huber_schedule"), "exponential");
  EXPECT_EQ(m.at("ss_multires_noise_discount"), "0.4");
  EXPECT_EQ(m.at("ss_ip_noise_gamma"), "0.1");
  EXPECT_EQ(m.at("ss_huber_scale"), "1.0");
  EXPECT_EQ(m.at("ss_debiased_estimation"), "True");
}

// kohya --dim_from_weights: the rank and alpha of every module of a LoRA file (alpha = rank
// where the file has none), read through the same layouts network_weights accepts.
TEST(LoRAFile, NetworkWeightsModuleDimsAreTheFilesRanksAndAlphas) {
  const fs::path dir = fs::temp_directory_path() / ("lf_lora_dims_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "dims.safetensors").string();
  const std::string unet = "lora_unet_down_blocks_0_attentions_0_proj_in";
  const std::string te = "lora_te_text_model_encoder_layers_0_mlp_fc1";
  save_kohya_lora(path,
                  {{unet + ".lora_down.weight", torch::zeros({3, 32, 1, 1})},
                   {unet + ".lora_up.weight", torch::zeros({32, 3, 1, 1})},
                   {unet + ".alpha", torch::tensor(1.5f)},
                   {te + ".lora_down.weight", torch::zeros({2, 64})},
                   {te + ".lora_up.weight", torch::zeros({128, 2})}},
                  {});
  LoRAKeyContext ctx;
  ctx.unet = UNetLoRANaming{false, 1, {true, true}};
  ctx.text_encoder_prefixes = {"lora_te"};
  const std::map<std::string, LoRAModuleDim> dims = network_weights_module_dims(path, ctx);
  ASSERT_EQ(dims.size(), 2u);
  EXPECT_EQ(dims.at(unet).rank, 3);
  EXPECT_EQ(dims.at(unet).alpha, 1.5);
  EXPECT_EQ(dims.at(te).rank, 2);
  EXPECT_EQ(dims.at(te).alpha, 2.0);
  EXPECT_THROW(network_weights_module_dims((dir / "missing.safetensors").string(), ctx),
               std::runtime_error);
  fs::remove_all(dir);
}

// Found while writing the lora_file fuzz target (regressions/lora_file/
// dim_from_weights_1d_lora_down): a 1-D lora_down escaped dim_from_weights as lora_module_dims'
// std::invalid_argument, without the path, instead of the documented std::runtime_error naming
// the file.
TEST(LoRAFile, NetworkWeightsModuleDimsRefuseA1DLoraDownNamingTheFile) {
  const fs::path dir = fs::temp_directory_path() / ("lf_lora_dims1d_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "bad.safetensors").string();
  const std::string te = "lora_te_text_model_encoder_layers_0_mlp_fc1";
  save_kohya_lora(path,
                  {{te + ".lora_down.weight", torch::zeros({2})},
                   {te + ".lora_up.weight", torch::zeros({128, 2})}},
                  {});
  LoRAKeyContext ctx;
  ctx.unet = UNetLoRANaming{false, 1, {true, true}};
  ctx.text_encoder_prefixes = {"lora_te"};
  try {
    network_weights_module_dims(path, ctx);
    ADD_FAILURE() << "a 1-D lora_down was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": lora_module_dims: " + te +
                                         ".lora_down.weight has [2], expected [rank, ...]");
  }
  fs::remove_all(dir);
}

// kohya's block-wise and dropout network_args land in ss_network_args as given (kohya records
// the "key=value" strings), --network_dropout in ss_network_dropout (None when unset).
TEST(LoRAFile, MetadataRecordsBlockWiseAndDropoutNetworkArgs) {
  const JobConfig c = parse_job_config(
      "model:\n  pretrained_model_name_or_path: /m/base.safetensors\n"
      "dataset:\n  train_data_dir: /d\n"
      "network:\n  down_lr_weight: sine+0.5\n  mid_lr_weight: 2\n"
      "  up_lr_weight: 0,0,1,1,1,1,1,1,1,1,1,1\n  block_lr_zero_threshold: 0.1\n"
      "  network_dropout: 0.1\n  rank_dropout: 0.2\n  module_dropout: 0.05\n",
      "t.yaml");
  LoRATrainingFacts f;
  f.family = "sd1";
  const auto m = kohya_lora_metadata(c, f);
  EXPECT_EQ(m.at("ss_network_args"),
            "{\"down_lr_weight\": \"sine+0.5\", \"mid_lr_weight\": \"2\", "
            "\"up_lr_weight\": \"0,0,1,1,1,1,1,1,1,1,1,1\", \"block_lr_zero_threshold\": "
            "\"0.1\", \"rank_dropout\": \"0.2\", \"module_dropout\": \"0.05\"}");
  EXPECT_EQ(m.at("ss_network_dropout"), "0.1");
  EXPECT_EQ(kohya_lora_metadata(demo_config(), f).at("ss_network_dropout"), "None");
}

}  // namespace
}  // namespace lf

namespace lf {
namespace {

// kohya's training_comment, metadata_* (ModelSpec) and no_metadata.
TEST(LoRAFile, ModelSpecFieldsCommentAndNoMetadata) {
  const JobConfig c = parse_job_config(
      "model:\n  pretrained_model_name_or_path: /m/base.safetensors\n"
      "dataset:\n  train_data_dir: /d\n"
      "training:\n  min_timestep: 100\n"
      "output:\n  output_name: mine\n  training_comment: first try\n"
      "  metadata_title: My Style\n  metadata_author: me\n  metadata_license: CC-BY-4.0\n"
      "  metadata_tags: style, test\n",
      "t.yaml");
  LoRATrainingFacts f;
  f.family = "sdxl";
  const auto m = kohya_lora_metadata(c, f);
  EXPECT_EQ(m.at("ss_training_comment"), "first try");
  EXPECT_EQ(m.at("modelspec.title"), "My Style");
  EXPECT_EQ(m.at("modelspec.author"), "me");
  EXPECT_EQ(m.at("modelspec.license"), "CC-BY-4.0");
  EXPECT_EQ(m.at("modelspec.tags"), "style, test");
  EXPECT_EQ(m.count("modelspec.description"), 0u);
  EXPECT_EQ(m.at("modelspec.timestep_range"), "100,1000");
  EXPECT_EQ(m.at("modelspec.architecture"), "stable-diffusion-xl-v1-base/lora");
  const auto minimum = kohya_minimum_metadata(m);
  EXPECT_EQ(minimum.count("ss_training_comment"), 0u);
  EXPECT_EQ(minimum.count("ss_learning_rate"), 0u);
  EXPECT_EQ(minimum.at("ss_network_module"), "networks.lora");
  EXPECT_EQ(minimum.at("ss_base_model_version"), "sdxl_base_v1-0");
  EXPECT_EQ(minimum.at("modelspec.title"), "My Style");
  std::size_t ss = 0;
  for (const auto& [key, value] : minimum) ss += key.rfind("ss_", 0) == 0;
  EXPECT_EQ(ss, 5u);  // v2, base_model_version, network_module / _dim / _alpha (no args here)
  const JobConfig plain = parse_job_config(
      "model:\n  pretrained_model_name_or_path: /m/base.safetensors\ndataset:\n"
      "  train_data_dir: /d\noutput:\n  output_name: mine\n",
      "t.yaml");
  const auto defaults = kohya_lora_metadata(plain, f);
  EXPECT_EQ(defaults.at("ss_training_comment"), "None");
  EXPECT_EQ(defaults.at("modelspec.title"), "mine");
  EXPECT_EQ(defaults.count("modelspec.timestep_range"), 0u);
}

}  // namespace
}  // namespace lf
