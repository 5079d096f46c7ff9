// lora_parameter_lrs (worker/train/lora_param_lrs.h): each parameter's lr is its part's lr (times
// its block's lr weight) times the LoRA+ ratio for lora_up weights, as kohya networks.lora groups
// them.
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

// kohya's block lr weights times the part lr, times the LoRA+ ratio for lora_up
// (prepare_optimizer_params with set_block_lr_weight): the products for named modules. The
// preset values are kohya's get_list (sine over 12 blocks: sin(pi/2 * 1/11) for block 1).
TEST(LoRAParameterLrs, BlockLrWeightsAndLoRAPlusMultiply) {
  const std::vector<std::string> names = {
      "lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight",  // block 1
      "lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight",
      "lora_unet_mid_block_attentions_0_proj_in.lora_down.weight",  // block 12
      "lora_unet_mid_block_attentions_0_proj_in.lora_up.weight",
      "lora_unet_up_blocks_3_attentions_2_proj_out.lora_down.weight",  // block 24
      "lora_unet_up_blocks_3_attentions_2_proj_out.lora_up.weight",
      "lora_te_text_model_encoder_layers_0_mlp_fc1.lora_down.weight",
      "lora_te_text_model_encoder_layers_0_mlp_fc1.lora_up.weight"};
  const std::vector<bool> te = {false, false, false, false, false, false, true, true};
  const std::vector<double> lrs = lora_parameter_lrs(
      config("  unet_lr: 0.0002\n  text_encoder_lr: 0.00005\n  loraplus_unet_lr_ratio: 16\n"
             "  down_lr_weight: sine\n  mid_lr_weight: 0.5\n  up_lr_weight: cosine+0.25\n"),
      names, te);
  const double sine1 = 0.14231483827328514;
  // up_lr_weight's last block (24) is cosine's last value, 0, plus 0.25.
  const std::vector<double> expected = {
      2e-4 * sine1, 2e-4 * sine1 * 16, 2e-4 * 0.5, 2e-4 * 0.5 * 16,
      2e-4 * 0.25,  2e-4 * 0.25 * 16,  5e-5,       5e-5};
  ASSERT_EQ(lrs.size(), expected.size());
  for (std::size_t i = 0; i < lrs.size(); ++i) EXPECT_DOUBLE_EQ(lrs[i], expected[i]) << names[i];

  // SDXL (ldm names): 9 down / 3 mid / 9 up; a weight not above the threshold is 0.
  const std::vector<std::string> xl = {
      "lora_unet_input_blocks_4_1_proj_in.lora_down.weight",     // block 5: down[4]
      "lora_unet_middle_block_1_proj_in.lora_up.weight",         // block 11: mid[1]
      "lora_unet_output_blocks_8_1_proj_out.lora_down.weight"};  // block 21: up[8]
  const std::vector<double> xl_lrs = lora_parameter_lrs(
      config("  loraplus_lr_ratio: 4\n  down_lr_weight: sine\n  mid_lr_weight: 1,0.5,1\n"
             "  up_lr_weight: reverse_linear\n  block_lr_zero_threshold: 0.01\n"),
      xl, {false, false, false});
  EXPECT_DOUBLE_EQ(xl_lrs[0], 1e-4 * 0.7071067811865475);
  EXPECT_DOUBLE_EQ(xl_lrs[1], 1e-4 * 0.5 * 4);
  EXPECT_EQ(xl_lrs[2], 0.0);
}

}  // namespace
}  // namespace lf
