// LoRANetwork (kohya networks.lora) on the tiny UNet: kohya module names against the diffusers
// Transformer2DModel children, ldm -> diffusers path rule, init, scale, injection math,
// gradient flow, and the kohya state-dict layout.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include <torch/torch.h>

#include "core_references.h"
#include "core_test_util.h"
#include "lora/lora_network.h"
#include "model/model_config.h"
#include "model/unet.h"
#include "train/seeding.h"

namespace lf {
namespace {

constexpr const char* kToQ = "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q";

class TinyLoRA : public ::testing::Test {
 protected:
  TinyLoRA() : unet_(model_preset("tiny").unet) { test::fill_reference_weights(*unet_); }
  std::unique_ptr<LoRANetwork> make(int64_t dim = 4, double alpha = 1.0, uint64_t seed = 3) {
    at::Generator gen = make_cpu_generator(seed);
    return std::make_unique<LoRANetwork>(unet_, dim, alpha, gen);
  }
  torch::Tensor run() {
    torch::Tensor x = test::reference_values("unet.x", {2, 4, 8, 8});
    torch::Tensor context = test::reference_values("unet.context", {2, 7, 64});
    return unet_->forward(x, torch::tensor({10, 981}), context);
  }
  UNetModel unet_;
};

TEST(LoRANames, LdmToDiffusersPathRule) {
  // SD 1.x, L = 2
  EXPECT_EQ(ldm_to_diffusers_attention_path("input_blocks.1.1.proj_in", 2),
            "down_blocks.0.attentions.0.proj_in");
  EXPECT_EQ(ldm_to_diffusers_attention_path("input_blocks.8.1.transformer_blocks.0.attn2.to_k", 2),
            "down_blocks.2.attentions.1.transformer_blocks.0.attn2.to_k");
  EXPECT_EQ(ldm_to_diffusers_attention_path("middle_block.1.proj_out", 2),
            "mid_block.attentions.0.proj_out");
  EXPECT_EQ(ldm_to_diffusers_attention_path("output_blocks.5.1.proj_in", 2),
            "up_blocks.1.attentions.2.proj_in");
  EXPECT_EQ(ldm_to_diffusers_attention_path("output_blocks.9.1.proj_in", 2),
            "up_blocks.3.attentions.0.proj_in");
  // tiny, L = 1
  EXPECT_EQ(ldm_to_diffusers_attention_path("input_blocks.3.1.proj_in", 1),
            "down_blocks.1.attentions.0.proj_in");
  EXPECT_EQ(ldm_to_diffusers_attention_path("output_blocks.3.1.proj_in", 1),
            "up_blocks.1.attentions.1.proj_in");
  EXPECT_THROW(ldm_to_diffusers_attention_path("input_blocks.3.1.x", 2), std::invalid_argument);
  EXPECT_THROW(ldm_to_diffusers_attention_path("input_blocks.1.0.in_layers.0", 2),
               std::invalid_argument);
  EXPECT_THROW(ldm_to_diffusers_attention_path("middle_block.0.x", 2), std::invalid_argument);
  EXPECT_EQ(kohya_lora_name("mid_block.attentions.0.transformer_blocks.0.ff.net.0.proj"),
            "lora_unet_mid_block_attentions_0_transformer_blocks_0_ff_net_0_proj");
}

TEST_F(TinyLoRA, ModuleNamesEqualKohyaNamesOfDiffusersModules) {
  auto lora = make();
  const std::vector<std::string> expected(std::begin(ref::kUNetTinyLoRANames),
                                          std::end(ref::kUNetTinyLoRANames));
  // 7 SpatialTransformers (2 down, 1 mid, 4 up) x 12 targets each.
  ASSERT_EQ(expected.size(), 84u);
  EXPECT_EQ(lora->module_names(), expected);
  const std::set<std::string> names(expected.begin(), expected.end());
  EXPECT_TRUE(names.count(kToQ));
  EXPECT_TRUE(names.count("lora_unet_down_blocks_0_attentions_0_proj_in"));
  EXPECT_TRUE(names.count("lora_unet_mid_block_attentions_0_transformer_blocks_0_attn2_to_out_0"));
  EXPECT_TRUE(names.count("lora_unet_up_blocks_1_attentions_1_transformer_blocks_0_ff_net_2"));
}

TEST_F(TinyLoRA, ShapesInitAlphaAndScale) {
  auto lora = make(/*dim=*/4, /*alpha=*/2.0);
  EXPECT_DOUBLE_EQ(lora->scale(), 0.5);
  auto sd = lora->state_dict();
  EXPECT_EQ(sd.size(), 3u * 84u);
  const torch::Tensor& down = sd.at(std::string(kToQ) + ".lora_down.weight");
  const torch::Tensor& up = sd.at(std::string(kToQ) + ".lora_up.weight");
  EXPECT_EQ(down.sizes(), torch::IntArrayRef({4, 32}));
  EXPECT_EQ(up.sizes(), torch::IntArrayRef({32, 4}));
  const torch::Tensor& alpha = sd.at(std::string(kToQ) + ".alpha");
  EXPECT_EQ(alpha.dim(), 0);
  EXPECT_EQ(alpha.scalar_type(), torch::kFloat32);
  EXPECT_EQ(alpha.item<float>(), 2.0f);
  const std::string proj = "lora_unet_up_blocks_0_attentions_1_proj_out";
  EXPECT_EQ(sd.at(proj + ".lora_down.weight").sizes(), torch::IntArrayRef({4, 64, 1, 1}));
  EXPECT_EQ(sd.at(proj + ".lora_up.weight").sizes(), torch::IntArrayRef({64, 4, 1, 1}));
  const std::string ff = "lora_unet_down_blocks_1_attentions_0_transformer_blocks_0_ff_net_2";
  EXPECT_EQ(sd.at(ff + ".lora_down.weight").sizes(), torch::IntArrayRef({4, 256}));

  // kaiming_uniform(a = sqrt(5)): U(-1/sqrt(in), 1/sqrt(in)); up = 0.
  for (const auto& kv : sd) {
    if (kv.first.find(".lora_down.") != std::string::npos) {
      const double bound = 1.0 / std::sqrt(static_cast<double>(kv.second.size(1)));
      const double max = kv.second.abs().max().item<double>();
      EXPECT_LE(max, bound) << kv.first;
      EXPECT_GT(max, 0.5 * bound) << kv.first;
    } else if (kv.first.find(".lora_up.") != std::string::npos) {
      EXPECT_EQ(kv.second.abs().max().item<float>(), 0.0f) << kv.first;
    }
  }
  size_t total = 0;
  for (const auto& p : lora->parameters()) total += p.numel();
  EXPECT_EQ(lora->num_parameters(), total);
  EXPECT_EQ(lora->parameters().size(), 168u);
  EXPECT_EQ(lora->parameter_names()[0],
            "lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight");
}

TEST_F(TinyLoRA, DefaultAlphaIsRankAndBadRankThrows) {
  auto lora = make(/*dim=*/8, /*alpha=*/0.0);
  EXPECT_DOUBLE_EQ(lora->network_alpha(), 8.0);
  EXPECT_DOUBLE_EQ(lora->scale(), 1.0);
  lora.reset();
  at::Generator gen = make_cpu_generator(1);
  EXPECT_THROW(LoRANetwork(unet_, 0, 1.0, gen), std::invalid_argument);
}

TEST_F(TinyLoRA, SameSeedSameInitOtherSeedDiffers) {
  auto a = make(4, 1.0, 3)->state_dict();
  auto b = make(4, 1.0, 3)->state_dict();
  auto c = make(4, 1.0, 4)->state_dict();
  const std::string key = std::string(kToQ) + ".lora_down.weight";
  EXPECT_TRUE(torch::equal(a.at(key), b.at(key)));
  EXPECT_FALSE(torch::equal(a.at(key), c.at(key)));
}

TEST_F(TinyLoRA, ZeroUpLeavesOutputBitExactAndOnlyLoRARequiresGrad) {
  torch::NoGradGuard no_grad;
  torch::Tensor base = run();
  auto lora = make();
  EXPECT_TRUE(torch::equal(run(), base));
  for (const auto& p : unet_->parameters()) EXPECT_FALSE(p.requires_grad());
  for (const auto& p : lora->parameters()) EXPECT_TRUE(p.requires_grad());
}

TEST_F(TinyLoRA, InjectedLinearEqualsBasePlusScaledUpDown) {
  auto lora = make(/*dim=*/4, /*alpha=*/1.0);
  torch::NoGradGuard no_grad;
  torch::Tensor base = run();
  auto sd = lora->state_dict();
  torch::Tensor up = sd.at(std::string(kToQ) + ".lora_up.weight");  // shares storage
  up.copy_(test::reference_values("lora.up", {32, 4}));
  EXPECT_GT(test::max_abs_diff(run(), base), 1e-4);

  auto layer = unet_->named_modules()["input_blocks.1.1.transformer_blocks.0.attn1.to_q"]
                   ->as<LoRACompatibleLinearImpl>();
  ASSERT_NE(layer, nullptr);
  torch::Tensor x = test::reference_values("lora.x", {2, 5, 32});
  torch::Tensor down = sd.at(std::string(kToQ) + ".lora_down.weight");
  // to_q has no bias: W x + (alpha / r) * up (down x)
  torch::Tensor expected = torch::matmul(x, layer->weight().t()) +
                           0.25 * torch::matmul(torch::matmul(x, down.t()), up.t());
  EXPECT_LT(test::max_abs_diff(layer->forward(x), expected), 1e-6);
  lora->set_multiplier(0.0);
  EXPECT_LT(test::max_abs_diff(layer->forward(x), torch::matmul(x, layer->weight().t())), 1e-6);
}

TEST_F(TinyLoRA, InjectedConv1x1EqualsBasePlusScaledUpDown) {
  auto lora = make(/*dim=*/2, /*alpha=*/4.0);  // scale 2
  torch::NoGradGuard no_grad;
  const std::string name = "lora_unet_down_blocks_1_attentions_0_proj_in";
  auto sd = lora->state_dict();
  sd.at(name + ".lora_up.weight").copy_(test::reference_values("lora.up2", {64, 2, 1, 1}));
  auto layer = unet_->named_modules()["input_blocks.3.1.proj_in"]->as<LoRACompatibleConv1x1Impl>();
  ASSERT_NE(layer, nullptr);
  torch::Tensor x = test::reference_values("lora.xc", {1, 64, 3, 3});
  torch::Tensor w = layer->weight().reshape({64, 64});
  torch::Tensor d = sd.at(name + ".lora_down.weight").reshape({2, 64});
  torch::Tensor u = sd.at(name + ".lora_up.weight").reshape({64, 2});
  torch::Tensor tokens = x.flatten(2).transpose(1, 2);  // [1, 9, 64]
  torch::Tensor expected = torch::matmul(tokens, w.t()) + layer->bias() +
                           2.0 * torch::matmul(torch::matmul(tokens, d.t()), u.t());
  expected = expected.transpose(1, 2).reshape({1, 64, 3, 3});
  EXPECT_LT(test::max_abs_diff(layer->forward(x), expected), 1e-5);
}

TEST_F(TinyLoRA, GradientReachesEveryUpMatrix) {
  auto lora = make();
  torch::Tensor loss = run().square().mean();
  loss.backward();
  auto names = lora->parameter_names();
  auto params = lora->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(params[i].grad().defined()) << names[i];
    if (names[i].find(".lora_up.") != std::string::npos) {
      EXPECT_GT(params[i].grad().abs().max().item<double>(), 0.0) << names[i];
    } else {  // d loss / d down = up^T (...) = 0 while up is zero
      EXPECT_EQ(params[i].grad().abs().max().item<double>(), 0.0) << names[i];
    }
  }
}

TEST_F(TinyLoRA, StateDictRoundTripAndAlphaFromFile) {
  auto a = make(4, 1.0, 3);
  auto saved = a->state_dict();
  for (auto& kv : saved) {
    if (kv.first.find(".lora_up.") != std::string::npos) {
      kv.second = test::reference_values(kv.first, kv.second.sizes().vec());
    } else if (kv.first.find(".alpha") != std::string::npos) {
      kv.second = torch::scalar_tensor(8.0, torch::kFloat16);
    } else {
      kv.second = kv.second.clone();
    }
  }
  a.reset();
  auto b = make(4, 1.0, 99);
  const torch::Tensor down_before = b->parameters()[0];
  b->load_state_dict(saved);
  auto loaded = b->state_dict();
  for (const auto& kv : saved) {
    EXPECT_TRUE(torch::equal(loaded.at(kv.first), kv.second.to(torch::kFloat32))) << kv.first;
  }
  EXPECT_TRUE(b->parameters()[0].is_same(down_before));  // copied in place
  EXPECT_TRUE(b->parameters()[0].requires_grad());

  // alpha 8 with r = 4 -> scale 2 in the forward
  torch::NoGradGuard no_grad;
  auto layer = unet_->named_modules()["input_blocks.1.1.transformer_blocks.0.attn1.to_q"]
                   ->as<LoRACompatibleLinearImpl>();
  torch::Tensor x = test::reference_values("lora.x", {1, 3, 32});
  torch::Tensor d = loaded.at(std::string(kToQ) + ".lora_down.weight");
  torch::Tensor u = loaded.at(std::string(kToQ) + ".lora_up.weight");
  torch::Tensor expected =
      torch::matmul(x, layer->weight().t()) + 2.0 * torch::matmul(torch::matmul(x, d.t()), u.t());
  EXPECT_LT(test::max_abs_diff(layer->forward(x), expected), 1e-6);
}

TEST_F(TinyLoRA, LoadErrorsListMissingUnexpectedAndShapes) {
  auto lora = make();
  auto sd = lora->state_dict();
  auto missing = sd;
  missing.erase(std::string(kToQ) + ".lora_up.weight");
  missing["lora_te_text_model_encoder_layers_0_mlp_fc1.alpha"] = torch::scalar_tensor(1.0);
  missing[std::string(kToQ) + ".lora_down.weight"] = torch::zeros({8, 32});
  try {
    lora->load_state_dict(missing);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(std::string(kToQ) + ".lora_up.weight"), std::string::npos) << what;
    EXPECT_NE(what.find("lora_te_text_model_encoder_layers_0_mlp_fc1.alpha"), std::string::npos)
        << what;
    EXPECT_NE(what.find("expected [4, 32], found [8, 32]"), std::string::npos) << what;
  }
}

TEST_F(TinyLoRA, DestructorDetachesAdapters) {
  torch::NoGradGuard no_grad;
  torch::Tensor base = run();
  {
    auto lora = make();
    for (auto& p : lora->parameters()) p.fill_(0.1);
    EXPECT_GT(test::max_abs_diff(run(), base), 1e-4);
    at::Generator gen = make_cpu_generator(1);
    EXPECT_THROW(LoRANetwork(unet_, 4, 1.0, gen), std::invalid_argument);  // already attached
  }
  EXPECT_TRUE(torch::equal(run(), base));
}

}  // namespace
}  // namespace lf
