// kohya's block-wise ranks (lora/lora_blocks.h, LoRANetworkOptions::block_dims) and
// dim_from_weights (module_dims): the block index of kohya module names for SD 1.x/2.x and SDXL
// (the literals are kohya get_block_index's formulas worked by hand), the shapes and alphas each
// module gets from its block, blocks left out at rank 0, and a network rebuilt from a file's
// ranks.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include <torch/torch.h>

#include "lora/lora_blocks.h"
#include "lora/lora_network.h"
#include "model/model_config.h"
#include "model/unet.h"
#include "train/seeding.h"

namespace lf {
namespace {

TEST(KohyaBlockIndex, SdNamesFollowGetBlockIndex) {
  // down: 1 + 3i + j, samplers 3i + 2 + 1; mid 12; up: 13 + 3i + j, samplers 13 + 3i + 2.
  EXPECT_EQ(kohya_block_index("lora_unet_down_blocks_0_attentions_0_proj_in", false), 1);
  EXPECT_EQ(kohya_block_index("lora_unet_down_blocks_0_resnets_1_conv1", false), 2);
  EXPECT_EQ(kohya_block_index("lora_unet_down_blocks_0_downsamplers_0_conv", false), 3);
  EXPECT_EQ(kohya_block_index("lora_unet_down_blocks_2_attentions_1_proj_in", false), 8);
  EXPECT_EQ(kohya_block_index("lora_unet_down_blocks_2_downsamplers_0_conv", false), 9);
  EXPECT_EQ(kohya_block_index("lora_unet_down_blocks_3_resnets_1_conv2", false), 11);
  EXPECT_EQ(kohya_block_index("lora_unet_mid_block_attentions_0_proj_out", false), 12);
  EXPECT_EQ(kohya_block_index("lora_unet_mid_block_resnets_1_time_emb_proj", false), 12);
  EXPECT_EQ(kohya_block_index("lora_unet_up_blocks_0_resnets_0_conv1", false), 13);
  EXPECT_EQ(kohya_block_index("lora_unet_up_blocks_0_upsamplers_0_conv", false), 15);
  EXPECT_EQ(kohya_block_index("lora_unet_up_blocks_1_resnets_2_conv1", false), 18);
  EXPECT_EQ(kohya_block_index("lora_unet_up_blocks_3_attentions_2_transformer_blocks_0_attn2_to_k",
                              false),
            24);
  EXPECT_EQ(kohya_block_index("lora_te_text_model_encoder_layers_0_mlp_fc1", false), -1);
}

TEST(KohyaBlockIndex, SdxlNamesFollowGetBlockIndex) {
  // input_blocks_n: 1 + n, middle_block_n: 10 + n, output_blocks_n: 13 + n.
  EXPECT_EQ(kohya_block_index("lora_unet_input_blocks_1_0_in_layers_2", true), 2);
  EXPECT_EQ(kohya_block_index("lora_unet_input_blocks_4_1_transformer_blocks_0_attn2_to_k", true),
            5);
  EXPECT_EQ(kohya_block_index("lora_unet_input_blocks_8_1_proj_out", true), 9);
  EXPECT_EQ(kohya_block_index("lora_unet_middle_block_1_proj_in", true), 11);
  EXPECT_EQ(kohya_block_index("lora_unet_output_blocks_0_0_emb_layers_1", true), 13);
  EXPECT_EQ(kohya_block_index("lora_unet_output_blocks_8_1_proj_out", true), 21);
  EXPECT_EQ(kohya_block_index("lora_unet_time_embed_0", true), 0);
  EXPECT_EQ(kohya_block_index("lora_unet_out_2", true), 22);
  EXPECT_EQ(kohya_block_index("lora_te1_text_model_encoder_layers_0_mlp_fc1", true), -1);
}

// Ranks and alphas of a network against the per-block lists it was built with.
void expect_block_ranks(const LoRANetwork& lora, const LoRANetworkOptions& o, bool sdxl) {
  std::size_t checked = 0;
  const std::map<std::string, torch::Tensor> sd = lora.state_dict();
  for (const auto& [key, t] : sd) {
    const auto dot = key.find('.');
    const std::string name = key.substr(0, dot);
    const std::size_t b = static_cast<std::size_t>(kohya_block_index(name, sdxl));
    ASSERT_LT(b, o.block_dims.size()) << name;
    const torch::Tensor& down = sd.at(name + ".lora_down.weight");
    const bool kxk = down.dim() == 4 && down.size(2) > 1;
    const int64_t rank = kxk ? o.conv_block_dims[b] : o.block_dims[b];
    const double alpha = kxk ? o.conv_block_alphas[b] : o.block_alphas[b];
    const std::string part = key.substr(dot);
    if (part == ".lora_down.weight") {
      EXPECT_EQ(t.size(0), rank) << key;
    } else if (part == ".lora_up.weight") {
      EXPECT_EQ(t.size(1), rank) << key;
    } else {
      EXPECT_EQ(t.item<double>(), alpha > 0 ? alpha : static_cast<double>(rank)) << key;
    }
    ++checked;
  }
  EXPECT_GT(checked, 60u);
}

TEST(LoRABlockDims, SdModulesTakeTheirBlocksRankAndAlphaAndRankZeroLeavesThemOut) {
  UNetModel unet(model_preset("tiny").unet);
  LoRANetworkOptions o;
  o.network_dim = 8;  // not used by the UNet once block_dims is set
  o.block_dims.assign(25, 2);
  o.block_alphas.assign(25, 1.0);
  o.block_dims[4] = 0;  // down_blocks_1: no Linear / 1x1 modules
  o.block_dims[12] = 1;
  o.block_alphas[12] = 0.0;  // alpha 0 = the rank
  o.block_dims[13] = 3;
  o.block_alphas[13] = 13.0;
  o.conv_block_dims.assign(25, 1);
  o.conv_block_alphas.assign(25, 0.5);
  o.conv_block_dims[3] = 5;  // the downsampler
  at::Generator gen = make_cpu_generator(4);
  LoRANetwork lora(unet, unet_lora_naming(unet, false), {}, o, gen);
  expect_block_ranks(lora, o, false);
  const auto sd = lora.state_dict();
  const std::string q = "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q";
  EXPECT_EQ(sd.at(q + ".lora_down.weight").sizes(), torch::IntArrayRef({2, 32}));
  EXPECT_EQ(sd.at("lora_unet_mid_block_attentions_0_proj_in.lora_down.weight").size(0), 1);
  EXPECT_EQ(sd.at("lora_unet_mid_block_attentions_0_proj_in.alpha").item<float>(), 1.0f);
  EXPECT_EQ(sd.at("lora_unet_up_blocks_0_attentions_0_proj_out.lora_up.weight").sizes(),
            torch::IntArrayRef({64, 3, 1, 1}));
  EXPECT_EQ(sd.at("lora_unet_up_blocks_0_attentions_0_proj_out.alpha").item<float>(), 13.0f);
  EXPECT_EQ(sd.at("lora_unet_down_blocks_0_downsamplers_0_conv.lora_down.weight").sizes(),
            torch::IntArrayRef({5, 32, 3, 3}));
  EXPECT_EQ(sd.at("lora_unet_down_blocks_0_resnets_0_conv1.alpha").item<float>(), 0.5f);
  // Block 4 keeps its 3x3 convs (conv_block_dims[4] = 1) but loses every Linear / 1x1 module.
  EXPECT_EQ(sd.at("lora_unet_down_blocks_1_resnets_0_conv1.lora_down.weight").size(0), 1);
  for (const std::string& name : lora.module_names()) {
    if (name.rfind("lora_unet_down_blocks_1_", 0) != 0) continue;
    EXPECT_NE(name.find("_conv"), std::string::npos) << name << " should be left out";
  }
  // 84 transformer modules minus down_blocks_1's 12, plus the 31 LoCon modules minus
  // down_blocks_1's Linear / 1x1 ones (its time_emb_proj and conv_shortcut).
  EXPECT_EQ(lora.module_names().size(), 72u + 29u);
}

TEST(LoRABlockDims, SdxlUsesTheLdmNamesTwentyThreeBlocks) {
  UNetModel unet(model_preset("tiny-sdxl").unet);
  LoRANetworkOptions o;
  o.train_text_encoder = false;
  o.block_dims.resize(23);
  o.block_alphas.resize(23);
  for (int i = 0; i < 23; ++i) {
    o.block_dims[static_cast<std::size_t>(i)] = 1 + i % 3;
    o.block_alphas[static_cast<std::size_t>(i)] = 0.5 * i;
  }
  at::Generator gen = make_cpu_generator(4);
  LoRANetwork lora(unet, unet_lora_naming(unet, true), {}, o, gen);
  expect_block_ranks(lora, o, true);
  std::set<int64_t> ranks;
  for (const auto& [key, t] : lora.state_dict()) {
    if (key.find(".lora_down.") != std::string::npos) ranks.insert(t.size(0));
  }
  EXPECT_GE(ranks.size(), 2u);  // more than one block, so more than one rank
  o.block_alphas.resize(22);
  EXPECT_THROW(LoRANetwork(unet, unet_lora_naming(unet, true), {}, o, gen), std::invalid_argument);
}

TEST(LoRADimFromWeights, NetworkHasExactlyTheFilesModulesRanksAndAlphas) {
  UNetModel unet(model_preset("tiny").unet);
  LoRANetworkOptions a;
  a.block_dims.assign(25, 3);
  a.block_alphas.assign(25, 1.5);
  a.block_dims[16] = 0;
  a.block_dims[1] = 2;
  a.conv_block_dims.assign(25, 1);
  a.conv_block_alphas.assign(25, 0.0);
  std::map<std::string, torch::Tensor> file;
  {
    at::Generator gen = make_cpu_generator(4);
    LoRANetwork source(unet, unet_lora_naming(unet, false), {}, a, gen);
    for (const auto& [k, t] : source.state_dict()) file[k] = t.clone();
  }
  const std::string old = "lora_unet_up_blocks_1_attentions_1_proj_in";
  file[old + ".lora_down.weight"] = torch::zeros({6, 32, 1, 1});
  file[old + ".lora_up.weight"] = torch::zeros({32, 6, 1, 1});  // no .alpha: alpha = rank
  file.erase(old + ".alpha");
  const std::map<std::string, LoRAModuleDim> dims = lora_module_dims(file);
  EXPECT_EQ(dims.at(old).rank, 6);
  EXPECT_EQ(dims.at(old).alpha, 6.0);

  LoRANetworkOptions b;
  b.network_dim = 8;  // ignored: the file's ranks
  b.module_dims = dims;
  at::Generator gen = make_cpu_generator(4);
  LoRANetwork rebuilt(unet, unet_lora_naming(unet, false), {}, b, gen);
  EXPECT_EQ(rebuilt.module_names().size(), dims.size());
  const auto sd = rebuilt.state_dict();
  for (const auto& [key, t] : file) {
    ASSERT_TRUE(sd.count(key)) << key;
    if (key.find(".alpha") == std::string::npos) {
      EXPECT_EQ(sd.at(key).sizes(), t.sizes()) << key;
    }
  }
  EXPECT_EQ(sd.at("lora_unet_down_blocks_0_resnets_0_conv1.alpha").item<float>(), 1.0f);
  EXPECT_EQ(sd.at(old + ".alpha").item<float>(), 6.0f);
  EXPECT_NO_THROW(rebuilt.load_state_dict(file));
}

}  // namespace
}  // namespace lf
