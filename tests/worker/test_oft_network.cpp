// network.algo oft (kohya networks.oft) on the tiny UNet: kohya OFTNetwork's targets and names
// (oft_unet_*, the CrossAttention projections by default, every transformer Linear / 1x1 conv
// with enable_all_linear, the ResBlock / sampler layers with enable_conv, never a text encoder),
// zero oft_blocks [k, out / k, out / k] that leave the model as it was, a few SGD steps (finite,
// falling loss, every block moves), the kohya file (oft_blocks and alpha, ss_network_module
// networks.oft) reloaded as network_weights bit for bit, dim_from_weights' block counts, and the
// config's refusals.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>

#include "common/config/job_config.h"
#include "model/model_config.h"
#include "model/unet.h"
#include "tests/worker/tiny_unet_test.h"
#include "train/seeding.h"
#include "worker/io/lora_file.h"
#include "worker/io/tensor_file.h"

namespace lf {
namespace {

namespace fs = std::filesystem;

constexpr const char* kToQ = "oft_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q";
constexpr const char* kFF = "oft_unet_down_blocks_0_attentions_0_transformer_blocks_0_ff_net_2";
constexpr const char* kConv = "oft_unet_down_blocks_0_resnets_0_conv1";

JobConfig oft_config(const std::string& extra = "", const std::string& alpha = "0.01") {
  return test::network_job_config("  algo: oft\n  network_dim: 4\n  network_alpha: " + alpha +
                                  "\n" + extra);
}

using test::same_bytes;

class TinyOFT : public test::TinyUNetTest {
 protected:
  std::unique_ptr<LoRANetwork> make(bool all_linear = false, bool conv = false, int64_t dim = 4) {
    LoRANetworkOptions o;
    o.algo = LoRAAlgo::kOFT;
    o.network_dim = dim;
    o.network_alpha = 0.01;
    o.oft_enable_all_linear = all_linear;
    o.oft_enable_conv = conv;
    at::Generator gen = make_cpu_generator(3);
    return std::make_unique<LoRANetwork>(unet_, unet_lora_naming(unet_, false),
                                         std::vector<LoRATextEncoderTarget>{}, o, gen);
  }
};

TEST_F(TinyOFT, TargetsAndNamesAreKohyaOFTNetworks) {
  torch::NoGradGuard no_grad;
  const torch::Tensor base = run();
  {
    // 7 SpatialTransformers x (attn1, attn2) x (to_q, to_k, to_v, to_out.0).
    auto oft = make();
    EXPECT_EQ(oft->module_names().size(), 56u);
    for (const auto& n : oft->module_names()) {
      EXPECT_EQ(n.rfind("oft_unet_", 0), 0u) << n;
      EXPECT_TRUE(n.find("_attn1_") != std::string::npos || n.find("_attn2_") != std::string::npos)
          << n;
    }
    const auto sd = oft->state_dict();
    EXPECT_EQ(sd.size(), 2u * 56u);
    EXPECT_EQ(sd.at(std::string(kToQ) + ".oft_blocks").sizes(), torch::IntArrayRef({4, 8, 8}));
    EXPECT_EQ(sd.at(std::string(kToQ) + ".oft_blocks").abs().max().item<double>(), 0.0);
    EXPECT_FLOAT_EQ(sd.at(std::string(kToQ) + ".alpha").item<float>(), 0.01f);
    EXPECT_TRUE(same_bytes(run(), base));  // R = I exactly, so R W = W
    EXPECT_EQ(oft->unet_parameters().size(), 56u);
    EXPECT_TRUE(oft->text_encoder_parameters().empty());
    EXPECT_EQ(oft->num_text_encoder_modules(), 0u);
  }
  // enable_all_linear: + proj_in, proj_out, ff.net.0.proj, ff.net.2 per transformer.
  EXPECT_EQ(make(true)->module_names().size(), 84u);
  // enable_conv: + the 31 ResBlock / Downsample / Upsample layers (conv1, time_emb_proj, conv2,
  // conv_shortcut, op, conv).
  auto conv = make(false, true);
  EXPECT_EQ(conv->module_names().size(), 56u + 31u);
  EXPECT_EQ(conv->state_dict().at(std::string(kConv) + ".oft_blocks").sizes(),
            torch::IntArrayRef({4, 8, 8}));
  conv.reset();
  EXPECT_EQ(make(true, true)->module_names().size(), 84u + 31u);
  try {
    make(false, false, 3);  // 32 outputs in 3 blocks
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("OFT network_dim 3 does not divide the 32 outputs of "
                                         "oft_unet_down_blocks_0_attentions_0_transformer_blocks_"
                                         "0_attn1_to_k"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(TinyOFT, TrainsSavesAndReloadsAsNetworkWeights) {
  auto oft = make(true, true);
  // Every block has a gradient from the first step (R = I is no stationary point).
  const std::vector<double> losses =
      train_sgd(oft->parameters(), oft->parameter_names(), 0.5, /*grads_from=*/0);
  for (double l : losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(losses.back(), losses.front());
  const auto trained = oft->state_dict();
  for (const auto& [k, v] : trained) EXPECT_GT(v.abs().max().item<double>(), 0.0) << k;

  const fs::path dir = fs::temp_directory_path() / ("lf_oft_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "oft.safetensors").string();
  const JobConfig config = oft_config("  enable_all_linear: true\n  enable_conv: true\n");
  save_kohya_lora(path, trained, kohya_lora_metadata(config, LoRATrainingFacts{}));
  const LoadedTensors file = load_safetensors(path, /*use_mmap=*/false, kKeepStoredDtype);
  EXPECT_EQ(file.metadata.at("ss_network_module"), "networks.oft");
  EXPECT_EQ(file.metadata.at("ss_network_dim"), "4");
  EXPECT_EQ(file.metadata.at("ss_network_alpha"), "0.01");
  EXPECT_EQ(file.metadata.at("ss_network_args"),
            "{\"enable_all_linear\": \"True\", \"enable_conv\": \"True\"}");
  EXPECT_EQ(file.tensors.size(), 2u * (84u + 31u));
  EXPECT_EQ(file.tensors.at(std::string(kFF) + ".oft_blocks").sizes(),
            torch::IntArrayRef({4, 8, 8}));

  torch::Tensor y_trained;
  {
    torch::NoGradGuard no_grad;
    y_trained = run();
  }
  oft.reset();
  auto reloaded = make(true, true);
  const LoRALoadReport report = load_network_weights(*reloaded, path);
  EXPECT_EQ(report.loaded_modules, 84u + 31u);
  EXPECT_EQ(report.variants, "kohya OFT");
  for (const auto& [k, v] : reloaded->state_dict()) EXPECT_TRUE(same_bytes(v, trained.at(k))) << k;
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(same_bytes(run(), y_trained));
  }
  // dim_from_weights: the file's block counts and alphas.
  const auto dims = network_weights_module_dims(path, reloaded->key_context());
  EXPECT_EQ(dims.size(), 84u + 31u);
  EXPECT_EQ(dims.at(kConv).rank, 4);
  EXPECT_NEAR(dims.at(kConv).alpha, 0.01, 1e-9);
  reloaded.reset();
  // A network with other targets names what to change.
  auto narrow = make(false, false, 2);
  try {
    load_network_weights(*narrow, path);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("hint: the file's OFT modules have 4 blocks; set "
                                         "network.network_dim: 4"),
              std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

// The ConfigError message of parsing the job, "" when it parses.
std::string config_error(const std::string& network) {
  try {
    test::network_job_config(network);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(OFTConfig, OptionsOFTDoesNotTakeAreRefusedByKey) {
  const JobConfig c = oft_config();
  EXPECT_EQ(c.network.algo, "oft");
  EXPECT_FALSE(c.network.trains_text_encoder());
  const std::string oft = "  algo: oft\n  network_alpha: 0.01\n";
  EXPECT_EQ(config_error(oft), "");
  for (const std::string key : {"conv_dim: 4", "module_dropout: 0.1", "rank_dropout: 0.1",
                                "loraplus_lr_ratio: 16", "dora_wd: true"}) {
    const std::string message = config_error(oft + "  " + key + "\n");
    EXPECT_NE(message.find("key 'network." + key.substr(0, key.find(':')) +
                           "': not available with network.algo oft"),
              std::string::npos)
        << message;
  }
  EXPECT_NE(config_error("  enable_conv: true\n")
                .find("key 'network.enable_conv': is a kohya networks.oft option: it needs "
                      "network.algo oft"),
            std::string::npos);
  EXPECT_NE(config_error("  algo: oft\n  network_alpha: 0\n")
                .find("key 'network.network_alpha': expected a number > 0 with network.algo oft"),
            std::string::npos);
}

}  // namespace
}  // namespace lf
