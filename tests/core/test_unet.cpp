// UNetModel (ldm openaimodel.UNetModel) against diffusers.UNet2DConditionModel: exact ldm key
// set, output on name-hashed weights, timestep embedding, determinism, and the presets.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>

#include <torch/torch.h>

#include "core_references.h"
#include "core_test_util.h"
#include "lora/lora_network.h"
#include "model/checkpoint.h"
#include "model/model_config.h"
#include "model/state_dict.h"
#include "model/unet.h"
#include "train/seeding.h"

namespace lf {
namespace {

torch::Tensor tiny_unet_output(UNetModel& unet, const torch::Tensor& timesteps) {
  torch::NoGradGuard no_grad;
  torch::Tensor x = test::reference_values("unet.x", {2, 4, 8, 8});
  torch::Tensor context = test::reference_values("unet.context", {2, 7, 64});
  return unet->forward(x, timesteps, context);
}

TEST(UNetModel, TinyKeySetEqualsDiffusersDerivedLdmKeys) {
  UNetModel unet(model_preset("tiny").unet);
  const std::vector<std::string> names = test::parameter_names(*unet);
  const std::vector<std::string> expected(std::begin(ref::kUNetTinyKeys),
                                          std::end(ref::kUNetTinyKeys));
  EXPECT_EQ(names, expected);
  const std::set<std::string> keys(names.begin(), names.end());
  // L = 1: downsample after level 0 at input_blocks.(0+1)(1+1) = 2; the level-1 upsample sits at
  // output_blocks.0*2+1 = 1, index 2 because the level has attention.
  EXPECT_TRUE(keys.count("input_blocks.1.1.transformer_blocks.0.attn1.to_q.weight"));
  EXPECT_TRUE(keys.count("input_blocks.2.0.op.weight"));
  EXPECT_TRUE(keys.count("input_blocks.3.0.skip_connection.weight"));
  EXPECT_TRUE(keys.count("output_blocks.1.2.conv.weight"));
  EXPECT_FALSE(keys.count("output_blocks.2.1.conv.weight"));
  EXPECT_FALSE(keys.count("input_blocks.1.1.transformer_blocks.0.attn1.to_q.bias"));
  EXPECT_TRUE(keys.count("middle_block.1.proj_out.bias"));
  EXPECT_TRUE(keys.count("out.2.weight"));
}

TEST(UNetModel, TinyParameterShapes) {
  UNetModel unet(model_preset("tiny").unet);
  auto params = unet->named_parameters();
  EXPECT_EQ(params["input_blocks.1.1.proj_in.weight"].sizes(), torch::IntArrayRef({32, 32, 1, 1}));
  EXPECT_EQ(params["input_blocks.1.1.transformer_blocks.0.attn2.to_k.weight"].sizes(),
            torch::IntArrayRef({32, 64}));
  EXPECT_EQ(params["input_blocks.3.1.transformer_blocks.0.ff.net.0.proj.weight"].sizes(),
            torch::IntArrayRef({512, 64}));
  EXPECT_EQ(params["output_blocks.0.0.in_layers.2.weight"].sizes(),
            torch::IntArrayRef({64, 128, 3, 3}));
  EXPECT_EQ(params["time_embed.0.weight"].sizes(), torch::IntArrayRef({128, 32}));
  EXPECT_EQ(params["out.2.weight"].sizes(), torch::IntArrayRef({4, 32, 3, 3}));
}

TEST(UNetModel, TinyOutputMatchesDiffusersWithin1e5) {
  UNetModel unet(model_preset("tiny").unet);
  test::fill_reference_weights(*unet);
  torch::Tensor t = torch::tensor({ref::kUNetTimesteps[0], ref::kUNetTimesteps[1]});
  torch::Tensor out = tiny_unet_output(unet, t);
  torch::Tensor expected = test::from_array(ref::kUNetTinyOutput, ref::kUNetTinyOutput_shape);
  ASSERT_EQ(out.sizes(), expected.sizes());
  EXPECT_GT(expected.abs().max().item<double>(), 0.5);  // a non-trivial reference
  EXPECT_LT(test::max_abs_diff(out, expected), 1e-5);   // measured 2.2e-6
}

TEST(UNetModel, FloatAndIntegerTimestepsAgree) {
  UNetModel unet(model_preset("tiny").unet);
  test::fill_reference_weights(*unet);
  torch::Tensor a = tiny_unet_output(unet, torch::tensor({10, 981}, torch::kInt64));
  torch::Tensor b = tiny_unet_output(unet, torch::tensor({10.0f, 981.0f}));
  EXPECT_TRUE(torch::equal(a, b));
}

// Latent sizes that are multiples of 8 px but not of 64 (sample images --w 200 --h 72): the
// downsample rounds 25 x 9 up to 13 x 5 and the upsample meets the skip connection's 25 x 9
// (diffusers' upsample_size) instead of failing the concatenation.
TEST(UNetModel, OddLatentSizesUpsampleToTheSkipConnection) {
  torch::NoGradGuard no_grad;
  UNetModel unet(model_preset("tiny").unet);
  test::fill_reference_weights(*unet);
  const auto& c = model_preset("tiny").unet;
  const torch::Tensor x = torch::randn({2, 4, 9, 25});
  const torch::Tensor context = torch::randn({2, 7, c.context_dim});
  const torch::Tensor out = unet->forward(x, torch::tensor({10.0f, 500.0f}), context, {});
  EXPECT_EQ(out.sizes(), x.sizes());
  EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
  // Upsample alone: nearest to the given size, and the plain 2x without one.
  Upsample up(4);
  const torch::Tensor small = torch::randn({1, 4, 5, 13});
  EXPECT_EQ(up->forward(small, std::vector<int64_t>{9, 25}).sizes(),
            torch::IntArrayRef({1, 4, 9, 25}));
  EXPECT_EQ(up->forward(small).sizes(), torch::IntArrayRef({1, 4, 10, 26}));
}

TEST(UNetModel, TimestepEmbeddingMatchesDiffusersWithin1e6) {
  torch::Tensor emb = timestep_embedding(torch::tensor({0, 10, 981}), 32);
  torch::Tensor expected =
      test::from_array(ref::kTimestepEmbedding32, ref::kTimestepEmbedding32_shape);
  ASSERT_EQ(emb.sizes(), expected.sizes());
  EXPECT_LT(test::max_abs_diff(emb, expected), 1e-6);
  // t = 0: [cos 0 | sin 0] = [1 ... | 0 ...]
  EXPECT_EQ(emb[0].slice(0, 0, 16).sum().item<float>(), 16.0f);
  EXPECT_EQ(emb[0].slice(0, 16, 32).abs().sum().item<float>(), 0.0f);
}

TEST(UNetModel, SameSeedCheckpointGivesIdenticalBytes) {
  const ModelPreset preset = model_preset("tiny");
  torch::Tensor t = torch::tensor({10, 981});
  auto run = [&](uint64_t seed) {
    UNetModel unet(preset.unet);
    load_state_dict(unet, make_random_checkpoint(preset, seed));
    return tiny_unet_output(unet, t);
  };
  torch::Tensor a = run(7), b = run(7), c = run(8);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(torch::allclose(a, c));
  EXPECT_GT(a.abs().mean().item<double>(), 1e-2);  // default init: output not trivially zero
}

TEST(UNetModel, ParametersAreFrozen) {
  UNetModel unet(model_preset("tiny").unet);
  for (const auto& p : unet->parameters()) EXPECT_FALSE(p.requires_grad());
}

TEST(UNetModel, SD15ParameterAndLoRACountsMatchDiffusers) {
  const auto start = std::chrono::steady_clock::now();
  UNetModel unet(model_preset("sd15").unet);
  int64_t count = 0;
  for (const auto& p : unet->parameters()) count += p.numel();
  EXPECT_EQ(count, ref::kSD15UNetParameters[0]);
  EXPECT_EQ(count, 859520964);
  auto params = unet->named_parameters();
  EXPECT_EQ(params.size(), 686u);
  EXPECT_TRUE(params.contains("output_blocks.11.0.skip_connection.weight"));  // SD1 marker
  EXPECT_TRUE(params.contains("output_blocks.2.1.conv.weight"));  // no attention at level 3
  EXPECT_EQ(params["input_blocks.1.1.transformer_blocks.0.attn2.to_k.weight"].sizes(),
            torch::IntArrayRef({320, 768}));

  at::Generator gen = make_cpu_generator(0);
  LoRANetwork lora(unet, /*network_dim=*/4, /*network_alpha=*/1.0, gen);
  EXPECT_EQ(static_cast<int64_t>(lora.module_names().size()), ref::kSD15LoRAModules[0]);
  EXPECT_EQ(lora.module_names().size(), 192u);  // 16 SpatialTransformers x 12
  EXPECT_EQ(static_cast<int64_t>(lora.num_parameters()), ref::kSD15LoRARank4Parameters[0]);
  const auto names = lora.module_names();
  EXPECT_TRUE(
      std::binary_search(names.begin(), names.end(),
                         "lora_unet_up_blocks_3_attentions_2_transformer_blocks_0_ff_net_2"));
  EXPECT_TRUE(std::binary_search(names.begin(), names.end(),
                                 "lora_unet_down_blocks_2_attentions_1_proj_out"));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("seconds", std::to_string(seconds));
}

TEST(UNetModel, LinearProjectionVariantEqualsConvVariant) {
  // SD2-style Linear proj_in/proj_out compute the same map as SD1's 1x1 convs; the loader
  // reshapes [C, C, 1, 1] <-> [C, C].
  UNetConfig conv_cfg = model_preset("tiny").unet;
  UNetConfig linear_cfg = conv_cfg;
  linear_cfg.use_linear_in_transformer = true;
  UNetModel conv_unet(conv_cfg), linear_unet(linear_cfg);
  test::fill_reference_weights(*conv_unet);
  EXPECT_EQ(linear_unet->named_parameters()["input_blocks.1.1.proj_in.weight"].sizes(),
            torch::IntArrayRef({32, 32}));
  load_state_dict(linear_unet, module_weights(*conv_unet, "p."), "p.");
  torch::Tensor t = torch::tensor({10, 981});
  EXPECT_LT(test::max_abs_diff(tiny_unet_output(linear_unet, t), tiny_unet_output(conv_unet, t)),
            1e-5);
}

TEST(ModelPreset, UnknownNameThrowsNamingValidOnes) {
  try {
    model_preset("sdxl-huge");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("sdxl-huge"), std::string::npos) << what;
    EXPECT_NE(what.find("tiny"), std::string::npos) << what;
    EXPECT_NE(what.find("sd15"), std::string::npos) << what;
  }
}

TEST(UNetConfig, ValidateRejectsInconsistentFields) {
  UNetConfig c = model_preset("tiny").unet;
  c.transformer_depth = {1};
  EXPECT_THROW(UNetModel{c}, std::invalid_argument);
  c = model_preset("tiny").unet;
  c.transformer_depth_middle = 0;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c = model_preset("tiny").unet;
  c.transformer_depth = {1, -1};
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c = model_preset("tiny").unet;
  c.norm_num_groups = 5;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c = model_preset("tiny").unet;
  c.num_head_channels = 16;  // both set
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c.num_heads = -1;
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(c.heads_for(64), 4);
}

}  // namespace
}  // namespace lf
