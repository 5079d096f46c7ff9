// lora_parameter_lrs (worker/train/lora_param_lrs.h): each parameter's lr is its part's lr times
// the LoRA+ ratio for lora_up weights, as kohya networks.lora groups them.
#include <gtest/gtest.h>

#include "common/config/job_config.h"
#include "worker/train/lora_param_lrs.h"

namespace lf {
namespace {

JobConfig config(const std::string& network) {
  return parse_job_config(
      "model:\n  pretrained_model_name_or_path: /m.safetensors\ndataset:\n  train_data_dir: /d\n"
      "training:\n  learning_rate: 0.0001\nnetwork:\n" +
          network,
      "t.yaml");
}

const std::vector<std::string> kNames = {
    "lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight",
    "lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight",
    "lora_te_text_model_encoder_layers_0_mlp_fc1.lora_down.weight",
    "lora_te_text_model_encoder_layers_0_mlp_fc1.lora_up.weight"};
const std::vector<bool> kTextEncoder = {false, false, true, true};

TEST(LoRAParameterLrs, PartLrsWithoutLoRAPlus) {
  EXPECT_EQ(lora_parameter_lrs(config("  unet_lr: 0.0002\n  text_encoder_lr: 0.00005\n"), kNames,
                               kTextEncoder),
            (std::vector<double>{2e-4, 2e-4, 5e-5, 5e-5}));
  EXPECT_EQ(lora_parameter_lrs(config("  network_dim: 4\n"), kNames, kTextEncoder),
            (std::vector<double>(4, 1e-4)));
}

TEST(LoRAParameterLrs, LoRAPlusMultipliesTheUpWeightsOfEachPart) {
  // loraplus_lr_ratio for both parts: lora_up at 16x its part's lr, lora_down unchanged.
  EXPECT_EQ(lora_parameter_lrs(config("  unet_lr: 0.0002\n  loraplus_lr_ratio: 16\n"), kNames,
                               kTextEncoder),
            (std::vector<double>{2e-4, 2e-4 * 16, 1e-4, 1e-4 * 16}));
  // The per-part ratios win over loraplus_lr_ratio.
  EXPECT_EQ(lora_parameter_lrs(config("  loraplus_lr_ratio: 16\n  loraplus_unet_lr_ratio: 8\n"
                                      "  loraplus_text_encoder_lr_ratio: 4\n"),
                               kNames, kTextEncoder),
            (std::vector<double>{1e-4, 1e-4 * 8, 1e-4, 1e-4 * 4}));
  EXPECT_EQ(lora_parameter_lrs(config("  loraplus_unet_lr_ratio: 8\n"), kNames, kTextEncoder),
            (std::vector<double>{1e-4, 1e-4 * 8, 1e-4, 1e-4}));
  EXPECT_THROW(lora_parameter_lrs(config(""), kNames, {true}), std::invalid_argument);
}

}  // namespace
}  // namespace lf
