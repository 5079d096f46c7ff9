// LoRANetwork (kohya networks.lora) on the tiny UNet: kohya module names against the diffusers
// Transformer2DModel children, ldm -> diffusers path rule, init, scale, injection math,
// gradient flow, and the kohya state-dict layout.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <type_traits>

#include <torch/torch.h>

#include "core_references.h"
#include "core_test_util.h"
#include "lora/lora_network.h"
#include "lora/max_norm.h"
#include "model/clip_text_model.h"
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
  const UNetLoRANaming sd1{false, 2, {true, true, true, false}};  // SD 1.x, L = 2
  EXPECT_EQ(ldm_to_diffusers_unet_path("input_blocks.1.1.proj_in", sd1),
            "down_blocks.0.attentions.0.proj_in");
  EXPECT_EQ(ldm_to_diffusers_unet_path("input_blocks.8.1.transformer_blocks.0.attn2.to_k", sd1),
            "down_blocks.2.attentions.1.transformer_blocks.0.attn2.to_k");
  EXPECT_EQ(ldm_to_diffusers_unet_path("middle_block.1.proj_out", sd1),
            "mid_block.attentions.0.proj_out");
  EXPECT_EQ(ldm_to_diffusers_unet_path("output_blocks.5.1.proj_in", sd1),
            "up_blocks.1.attentions.2.proj_in");
  EXPECT_EQ(ldm_to_diffusers_unet_path("output_blocks.9.1.proj_in", sd1),
            "up_blocks.3.attentions.0.proj_in");
  const UNetLoRANaming tiny{false, 1, {true, true}};  // tiny, L = 1
  EXPECT_EQ(ldm_to_diffusers_unet_path("input_blocks.3.1.proj_in", tiny),
            "down_blocks.1.attentions.0.proj_in");
  EXPECT_EQ(ldm_to_diffusers_unet_path("output_blocks.3.1.proj_in", tiny),
            "up_blocks.1.attentions.1.proj_in");
  EXPECT_THROW(ldm_to_diffusers_unet_path("input_blocks.3.1.x", sd1), std::invalid_argument);
  EXPECT_THROW(ldm_to_diffusers_unet_path("input_blocks.1.0.in_layers.0", sd1),
               std::invalid_argument);
  EXPECT_THROW(ldm_to_diffusers_unet_path("middle_block.0.x", sd1), std::invalid_argument);
  EXPECT_EQ(
      kohya_unet_lora_name("middle_block.1.transformer_blocks.0.ff.net.0.proj", sd1).name,
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

CLIPTextModel small_clip(int64_t layers) {
  CLIPTextConfig c = model_preset("tiny").text_encoders.at(0).config;
  c.num_layers = layers;
  CLIPTextModel m(c);
  return m;
}

TEST_F(TinyLoRA, TextEncoderModulesPerFamilyAndParameterGroups) {
  LoRANetworkOptions o;
  o.network_dim = 4;
  o.network_alpha = 2.0;
  // SD 1.5-like: one 12-layer encoder, prefix lora_te: 72 modules (+ 84 UNet ones).
  at::Generator gen = make_cpu_generator(5);
  auto sd1 = std::make_unique<LoRANetwork>(
      unet_, unet_lora_naming(unet_, false),
      std::vector<LoRATextEncoderTarget>{{small_clip(12), "lora_te", 0}}, o, gen);
  EXPECT_EQ(sd1->module_names().size(), 84u + 72u);
  EXPECT_EQ(sd1->module_names()[0], "lora_te_text_model_encoder_layers_0_mlp_fc1");
  EXPECT_EQ(sd1->unet_parameters().size(), 2u * 84u);
  EXPECT_EQ(sd1->text_encoder_parameters().size(), 2u * 72u);
  EXPECT_EQ(sd1->num_text_encoder_modules(), 72u);
  EXPECT_TRUE(sd1->text_encoder_parameters()[0].is_same(sd1->parameters()[0]));
  auto sd = sd1->state_dict();
  EXPECT_EQ(sd.at("lora_te_text_model_encoder_layers_11_self_attn_q_proj.lora_down.weight").sizes(),
            torch::IntArrayRef({4, 64}));
  EXPECT_EQ(sd.at("lora_te_text_model_encoder_layers_11_mlp_fc1.lora_up.weight").sizes(),
            torch::IntArrayRef({128, 4}));
  EXPECT_EQ(sd.at("lora_te_text_model_encoder_layers_11_mlp_fc2.alpha").item<float>(), 2.0f);
  sd1.reset();
  // SDXL-like: te1 (12 layers) 72 + te2 (32 layers) 192; UNet only / TE only options.
  std::vector<LoRATextEncoderTarget> xl{{small_clip(12), "lora_te1", 0},
                                        {small_clip(32), "lora_te2", 0}};
  o.train_unet = false;
  auto te_only = std::make_unique<LoRANetwork>(unet_, unet_lora_naming(unet_, true), xl, o, gen);
  EXPECT_EQ(te_only->module_names().size(), 72u + 192u);
  EXPECT_EQ(te_only->module_names().back(),
            "lora_te2_text_model_encoder_layers_9_self_attn_v_proj");
  EXPECT_TRUE(te_only->unet_parameters().empty());
  EXPECT_EQ(te_only->key_context().text_encoder_prefixes,
            (std::vector<std::string>{"lora_te1", "lora_te2"}));
  te_only.reset();
  o.train_unet = true;
  o.train_text_encoder = false;
  auto unet_only = std::make_unique<LoRANetwork>(unet_, unet_lora_naming(unet_, false), xl, o, gen);
  EXPECT_EQ(unet_only->module_names().size(), 84u);
  unet_only.reset();
  // SD 2.x as kohya converts it: 23 of 24 open_clip layers.
  o.train_text_encoder = true;
  o.train_unet = false;
  auto sd2 = std::make_unique<LoRANetwork>(
      unet_, unet_lora_naming(unet_, false),
      std::vector<LoRATextEncoderTarget>{{small_clip(24), "lora_te", 23}}, o, gen);
  EXPECT_EQ(sd2->module_names().size(), 138u);
  sd2.reset();
  o.train_unet = false;
  o.train_text_encoder = false;
  EXPECT_THROW(LoRANetwork(unet_, unet_lora_naming(unet_, false), xl, o, gen),
               std::invalid_argument);
}

TEST_F(TinyLoRA, NamingFactsComeFromTheModuleTree) {
  const UNetLoRANaming n = unet_lora_naming(unet_, false);
  EXPECT_FALSE(n.ldm_names);
  EXPECT_EQ(n.num_res_blocks, 1);
  EXPECT_EQ(n.level_has_attention, (std::vector<bool>{true, true}));
}

// A continued LoRA that does not fit says which network option to change.
TEST_F(TinyLoRA, FailedLoadsHintAtTheOptionToChange) {
  auto error_of = [](LoRANetwork& n, const std::map<std::string, torch::Tensor>& w) {
    try {
      n.load_state_dict(w);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::map<std::string, torch::Tensor> rank8;
  {
    auto a = make(8, 1.0, 3);
    rank8 = a->state_dict();
    for (auto& kv : rank8) kv.second = kv.second.clone();
  }
  auto b = make(4, 1.0, 3);
  const std::string rank = error_of(*b, rank8);
  EXPECT_NE(rank.find("hint: the file's modules are rank 8; set network.network_dim: 8 to "
                      "continue it"),
            std::string::npos)
      << rank;

  std::map<std::string, torch::Tensor> with_te = b->state_dict();
  const std::string te = "lora_te_text_model_encoder_layers_0_mlp_fc1";
  with_te[te + ".lora_down.weight"] = torch::zeros({4, 64});
  with_te[te + ".lora_up.weight"] = torch::zeros({128, 4});
  with_te[te + ".alpha"] = torch::scalar_tensor(4.0);
  const std::string te_msg = error_of(*b, with_te);
  EXPECT_NE(te_msg.find("3 keys match no module of the network"), std::string::npos) << te_msg;
  EXPECT_NE(te_msg.find("hint: the file has text-encoder modules (lora_te*), and "
                        "network.network_train_unet_only: true leaves none in this network"),
            std::string::npos)
      << te_msg;
}

TEST_F(TinyLoRA, ConvDimAddsResBlockAndSamplerModules) {
  LoRANetworkOptions o;
  o.conv_dim = 2;
  o.conv_alpha = 1.0;
  at::Generator gen = make_cpu_generator(5);
  // tiny (L = 1, 2 levels) has 8 ResBlocks (2 input, 2 middle, 4 output) x {conv1,
  // time_emb_proj, conv2} + 5 conv_shortcuts (input level 1 and every output block) + 1 down +
  // 1 up = 31 LoCon modules on top of the 84 transformer ones (the same rule gives SD 1.5's
  // 192 + 86 = 278).
  LoRANetwork lora(unet_, unet_lora_naming(unet_, false), {}, o, gen);
  EXPECT_EQ(lora.module_names().size(), 84u + 31u);
  auto sd = lora.state_dict();
  EXPECT_EQ(sd.at("lora_unet_down_blocks_0_resnets_0_conv1.lora_down.weight").sizes(),
            torch::IntArrayRef({2, 32, 3, 3}));
  EXPECT_EQ(sd.at("lora_unet_down_blocks_0_resnets_0_conv1.lora_up.weight").sizes(),
            torch::IntArrayRef({32, 2, 1, 1}));
  EXPECT_EQ(sd.at("lora_unet_down_blocks_0_resnets_0_conv1.alpha").item<float>(), 1.0f);
  EXPECT_EQ(sd.at("lora_unet_down_blocks_0_resnets_0_time_emb_proj.lora_down.weight").sizes(),
            torch::IntArrayRef({4, 128}));
  EXPECT_EQ(sd.at("lora_unet_down_blocks_0_downsamplers_0_conv.lora_down.weight").sizes(),
            torch::IntArrayRef({2, 32, 3, 3}));
}

// A PEFT/diffusers file made from network A (proj_in/out stored as Linear [r, in]) loads into
// network B with exactly A's weights and the metadata alpha.
TEST_F(TinyLoRA, LoadWeightsFromPeftLayoutReshapesLinearProjAndKeepsMissingModules) {
  auto a = make(4, 1.0, 3);
  std::map<std::string, torch::Tensor> peft_file, expected;
  const UNetLoRANaming naming = unet_lora_naming(unet_, false);
  auto sd = a->state_dict();
  size_t skipped = 0;
  for (const auto& m : unet_->named_modules("", false)) {
    if (!m.value()->as<LoRACompatibleLinearImpl>() && !m.value()->as<LoRACompatibleConvImpl>()) {
      continue;
    }
    const UNetLoRAName lora_name = kohya_unet_lora_name(m.key(), naming);
    if (lora_name.scope != UNetLoRAScope::kTransformer) continue;  // LoCon layers: not targets
    const std::string& name = lora_name.name;
    if (name.find("up_blocks_1_attentions_1") != std::string::npos) {
      ++skipped;  // left out of the file: keeps B's init
      continue;
    }
    const std::string p = "unet." + ldm_to_diffusers_unet_path(m.key(), naming);
    torch::Tensor down = sd.at(name + ".lora_down.weight").clone();
    torch::Tensor up = test::reference_values(name, sd.at(name + ".lora_up.weight").sizes().vec());
    peft_file[p + ".lora_A.weight"] = down.flatten(1);  // [r, in]: Linear spelling
    peft_file[p + ".lora_B.weight"] = up.flatten(1);
    expected[name + ".lora_down.weight"] = down;
    expected[name + ".lora_up.weight"] = up;
  }
  EXPECT_EQ(skipped, 12u);
  a.reset();
  auto b = make(4, 1.0, 99);
  const auto b_before = b->state_dict();
  PeftAdapterConfig cfg;
  cfg.lora_alpha = 8;
  const LoRALoadReport report = b->load_weights(peft_file, {{"unet", cfg}});
  EXPECT_EQ(report.loaded_modules, 72u);
  EXPECT_EQ(report.missing_modules.size(), 12u);
  EXPECT_EQ(report.variants, "PEFT/diffusers (lora_A/lora_B)");
  auto loaded = b->state_dict();
  for (const auto& kv : expected) {
    EXPECT_TRUE(torch::equal(loaded.at(kv.first), kv.second)) << kv.first;
  }
  EXPECT_EQ(loaded.at(std::string(kToQ) + ".alpha").item<float>(), 8.0f);
  const std::string kept = "lora_unet_up_blocks_1_attentions_1_proj_in";
  EXPECT_TRUE(
      torch::equal(loaded.at(kept + ".lora_down.weight"), b_before.at(kept + ".lora_down.weight")));
  EXPECT_EQ(loaded.at(kept + ".alpha").item<float>(), 1.0f);
}

TEST_F(TinyLoRA, LoadWeightsRefusesUnmatchedKeysAndOtherFamilies) {
  auto lora = make();
  auto sd = lora->state_dict();
  sd["lora_unet_down_blocks_0_attentions_0_transformer_blocks_7_attn1_to_q.lora_down.weight"] =
      torch::zeros({4, 32});
  sd["lora_unet_down_blocks_0_attentions_0_transformer_blocks_7_attn1_to_q.lora_up.weight"] =
      torch::zeros({32, 4});
  try {
    lora->load_weights(sd);
    FAIL();
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(
        what.find("3 keys match no module of the network: "
                  "lora_unet_down_blocks_0_attentions_0_transformer_blocks_7_attn1_to_q.alpha"),
        std::string::npos)
        << what;
    EXPECT_EQ(what.find("look made for"), std::string::npos) << what;
  }
  const std::map<std::string, torch::Tensor> xl = {
      {"lora_unet_input_blocks_4_1_proj_in.lora_down.weight", torch::zeros({4, 640})},
      {"lora_unet_input_blocks_4_1_proj_in.lora_up.weight", torch::zeros({640, 4})}};
  try {
    lora->load_weights(xl);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(
        std::string(e.what()).find("the keys look made for SDXL, but the model is SD 1.x/2.x"),
        std::string::npos)
        << e.what();
  }
  // Refused variants propagate from the normaliser.
  EXPECT_THROW(lora->load_weights({{"lora_unet_x.lora_mid.weight", torch::zeros({2, 2})}}),
               std::runtime_error);
}

// kohya apply_max_norm_regularization: only modules whose delta W = up @ down * alpha / rank
// is above the max norm are scaled, each factor by sqrt(max / norm), to exactly the max.
TEST_F(TinyLoRA, MaxNormScalesOnlyTheModulesAboveIt) {
  auto lora = make(/*dim=*/4, /*alpha=*/2.0);
  auto sd = lora->state_dict();
  torch::NoGradGuard no_grad;
  const std::string big = kToQ;
  const std::string v = std::string(kToQ).replace(std::string(kToQ).size() - 4, 4, "to_v");
  // to_q: up = 1 everywhere -> a large delta W; to_v keeps lora_up = 0 (delta W = 0).
  sd.at(big + ".lora_up.weight").fill_(1.0);
  auto norm_of = [&](const std::string& name) {
    return (sd.at(name + ".lora_up.weight")
                .to(torch::kFloat64)
                .matmul(sd.at(name + ".lora_down.weight").to(torch::kFloat64)) *
            (2.0 / 4.0))
        .norm()
        .item<double>();
  };
  const double before = norm_of(big);
  ASSERT_GT(before, 1.0);
  const torch::Tensor v_down = sd.at(v + ".lora_down.weight").clone();
  const MaxNormReport r = apply_max_norm_regularization(*lora, 1.0);
  EXPECT_EQ(r.keys_scaled, 1);
  EXPECT_NEAR(norm_of(big), 1.0, 1e-5);
  EXPECT_NEAR(r.max_norm, 1.0, 1e-5);
  EXPECT_TRUE(torch::equal(sd.at(v + ".lora_down.weight"), v_down));  // below the max: untouched
  // Every other module has delta W = 0: the mean is 1 / modules.
  EXPECT_NEAR(r.mean_norm, 1.0 / static_cast<double>(lora->module_names().size()), 1e-6);
  EXPECT_THROW(apply_max_norm_regularization(*lora, 0.0), std::invalid_argument);
}

}  // namespace
}  // namespace lf
