// kohya LoRA key names for SD 1.x/2.x (diffusers names) and SDXL (ldm names), the diffusers <->
// ldm path maps, module counts over generated ldm layer lists (checked against the real tiny
// UNet's module tree), and the LoRA-variant normaliser with its refusals.
#include <gtest/gtest.h>

#include <set>

#include <torch/torch.h>

#include "lora/lora_naming.h"
#include "lora/lora_variants.h"
#include "model/model_config.h"
#include "model/unet.h"

namespace lf {
namespace {

UNetLoRANaming sd1_naming() { return {false, 2, {true, true, true, false}}; }
UNetLoRANaming sdxl_naming() { return {true, 2, {false, true, true}}; }

struct Layer {
  std::string path;
  int kernel;  // 0 = Linear
};

// Every Linear / Conv2d layer path of an ldm UNet below time_embed / conv_in / out, following the
// wiring of ldm's openaimodel.UNetModel (input_blocks / middle_block / output_blocks) with the
// general L rule. depth[level] = transformer blocks (0 = no attention).
std::vector<Layer> ldm_layers(const std::vector<int64_t>& mult, int64_t L,
                              const std::vector<int64_t>& depth, int64_t depth_mid, int64_t ch0,
                              bool linear_proj) {
  std::vector<Layer> out;
  const int64_t levels = static_cast<int64_t>(mult.size());
  auto st = [&](const std::string& b, int64_t d, bool linear_proj) {
    out.push_back({b + ".proj_in", linear_proj ? 0 : 1});
    out.push_back({b + ".proj_out", linear_proj ? 0 : 1});
    for (int64_t k = 0; k < d; ++k) {
      const std::string t = b + ".transformer_blocks." + std::to_string(k);
      for (const char* a : {".attn1", ".attn2"}) {
        for (const char* p : {".to_q", ".to_k", ".to_v", ".to_out.0"})
          out.push_back({t + a + p, 0});
      }
      out.push_back({t + ".ff.net.0.proj", 0});
      out.push_back({t + ".ff.net.2", 0});
    }
  };
  auto res = [&](const std::string& b, int64_t in, int64_t o) {
    out.push_back({b + ".in_layers.2", 3});
    out.push_back({b + ".emb_layers.1", 0});
    out.push_back({b + ".out_layers.3", 3});
    if (in != o) out.push_back({b + ".skip_connection", 1});
  };
  std::vector<int64_t> skips = {ch0};
  int64_t ch = ch0, n = 1;
  for (int64_t i = 0; i < levels; ++i) {
    for (int64_t j = 0; j < L; ++j, ++n) {
      const std::string b = "input_blocks." + std::to_string(n);
      res(b + ".0", ch, ch0 * mult[i]);
      ch = ch0 * mult[i];
      if (depth[i] > 0) st(b + ".1", depth[i], linear_proj);
      skips.push_back(ch);
    }
    if (i < levels - 1) {
      out.push_back({"input_blocks." + std::to_string(n) + ".0.op", 3});
      ++n;
      skips.push_back(ch);
    }
  }
  res("middle_block.0", ch, ch);
  st("middle_block.1", depth_mid, linear_proj);
  res("middle_block.2", ch, ch);
  n = 0;
  for (int64_t r = 0; r < levels; ++r) {
    const int64_t i = levels - 1 - r;
    for (int64_t j = 0; j <= L; ++j, ++n) {
      const std::string b = "output_blocks." + std::to_string(n);
      const int64_t skip = skips.back();
      skips.pop_back();
      res(b + ".0", ch + skip, ch0 * mult[i]);
      ch = ch0 * mult[i];
      if (depth[i] > 0) st(b + ".1", depth[i], linear_proj);
      if (j == L && i > 0) out.push_back({b + (depth[i] > 0 ? ".2" : ".1") + ".conv", 3});
    }
  }
  return out;
}

struct Counts {
  size_t transformer = 0, resblock = 0;
  std::set<std::string> names;
};

Counts count(const std::vector<Layer>& layers, const UNetLoRANaming& naming) {
  Counts c;
  for (const Layer& l : layers) {
    const UNetLoRAName n = kohya_unet_lora_name(l.path, naming);
    EXPECT_NE(n.scope, UNetLoRAScope::kNone) << l.path;
    (n.scope == UNetLoRAScope::kTransformer ? c.transformer : c.resblock)++;
    EXPECT_TRUE(c.names.insert(n.name).second) << "duplicate " << n.name;
  }
  return c;
}

TEST(LoRANaming, SD1UsesDiffusersNames) {
  const UNetLoRANaming sd1 = sd1_naming();
  const std::pair<const char*, const char*> table[] = {
      {"input_blocks.1.1.transformer_blocks.0.attn1.to_q",
       "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q"},
      {"input_blocks.1.1.proj_in", "lora_unet_down_blocks_0_attentions_0_proj_in"},
      {"input_blocks.8.1.transformer_blocks.0.attn2.to_out.0",
       "lora_unet_down_blocks_2_attentions_1_transformer_blocks_0_attn2_to_out_0"},
      {"middle_block.1.transformer_blocks.0.ff.net.0.proj",
       "lora_unet_mid_block_attentions_0_transformer_blocks_0_ff_net_0_proj"},
      {"output_blocks.11.1.transformer_blocks.0.ff.net.2",
       "lora_unet_up_blocks_3_attentions_2_transformer_blocks_0_ff_net_2"},
      {"input_blocks.1.0.in_layers.2", "lora_unet_down_blocks_0_resnets_0_conv1"},
      {"input_blocks.1.0.emb_layers.1", "lora_unet_down_blocks_0_resnets_0_time_emb_proj"},
      {"input_blocks.2.0.out_layers.3", "lora_unet_down_blocks_0_resnets_1_conv2"},
      {"input_blocks.4.0.skip_connection", "lora_unet_down_blocks_1_resnets_0_conv_shortcut"},
      {"input_blocks.3.0.op", "lora_unet_down_blocks_0_downsamplers_0_conv"},
      {"input_blocks.11.0.in_layers.2", "lora_unet_down_blocks_3_resnets_1_conv1"},
      {"middle_block.0.in_layers.2", "lora_unet_mid_block_resnets_0_conv1"},
      {"middle_block.2.out_layers.3", "lora_unet_mid_block_resnets_1_conv2"},
      {"output_blocks.2.1.conv", "lora_unet_up_blocks_0_upsamplers_0_conv"},
      {"output_blocks.5.2.conv", "lora_unet_up_blocks_1_upsamplers_0_conv"},
      {"output_blocks.0.0.skip_connection", "lora_unet_up_blocks_0_resnets_0_conv_shortcut"},
  };
  for (const auto& row : table) {
    EXPECT_EQ(kohya_unet_lora_name(row.first, sd1).name, row.second) << row.first;
  }
  EXPECT_EQ(kohya_unet_lora_name("input_blocks.1.1.proj_in", sd1).scope,
            UNetLoRAScope::kTransformer);
  EXPECT_EQ(kohya_unet_lora_name("input_blocks.3.0.op", sd1).scope, UNetLoRAScope::kResBlock);
  for (const char* none : {"time_embed.0", "time_embed.2", "input_blocks.0.0", "out.2"}) {
    EXPECT_EQ(kohya_unet_lora_name(none, sd1).scope, UNetLoRAScope::kNone) << none;
    EXPECT_EQ(kohya_unet_lora_name(none, sd1).name, "") << none;
  }
  // Off the SD1 wiring: no upsample at .2 on a level without attention, no ST on level 3, no
  // ST in a downsample block, unknown ResBlock child.
  for (const char* bad : {"output_blocks.2.2.conv", "input_blocks.10.1.proj_in",
                          "input_blocks.9.1.proj_in", "input_blocks.1.0.in_layers.0",
                          "output_blocks.12.0.in_layers.2", "input_blocks.3.0.conv"}) {
    EXPECT_THROW(kohya_unet_lora_name(bad, sd1), std::invalid_argument) << bad;
  }
}

TEST(LoRANaming, SDXLKeepsLdmNames) {
  const UNetLoRANaming xl = sdxl_naming();
  const std::pair<const char*, const char*> table[] = {
      {"input_blocks.4.1.transformer_blocks.0.attn2.to_k",
       "lora_unet_input_blocks_4_1_transformer_blocks_0_attn2_to_k"},
      {"input_blocks.8.1.transformer_blocks.9.ff.net.2",
       "lora_unet_input_blocks_8_1_transformer_blocks_9_ff_net_2"},
      {"middle_block.1.proj_in", "lora_unet_middle_block_1_proj_in"},
      {"output_blocks.2.2.conv", "lora_unet_output_blocks_2_2_conv"},
      {"output_blocks.5.2.conv", "lora_unet_output_blocks_5_2_conv"},
      {"input_blocks.1.0.in_layers.2", "lora_unet_input_blocks_1_0_in_layers_2"},
      {"input_blocks.1.0.emb_layers.1", "lora_unet_input_blocks_1_0_emb_layers_1"},
      {"input_blocks.1.0.out_layers.3", "lora_unet_input_blocks_1_0_out_layers_3"},
      {"input_blocks.4.0.skip_connection", "lora_unet_input_blocks_4_0_skip_connection"},
      {"input_blocks.3.0.op", "lora_unet_input_blocks_3_0_op"},
      {"middle_block.2.emb_layers.1", "lora_unet_middle_block_2_emb_layers_1"},
      {"output_blocks.8.0.skip_connection", "lora_unet_output_blocks_8_0_skip_connection"},
  };
  for (const auto& row : table) {
    EXPECT_EQ(kohya_unet_lora_name(row.first, xl).name, row.second) << row.first;
  }
  // Level 0 has no attention in SDXL; its output level has no upsample.
  for (const char* bad : {"input_blocks.1.1.proj_in", "output_blocks.8.1.conv",
                          "output_blocks.2.1.conv", "input_blocks.9.0.op"}) {
    EXPECT_THROW(kohya_unet_lora_name(bad, xl), std::invalid_argument) << bad;
  }
  // A level without attention puts its upsample at .1 (ldm names kept).
  const UNetLoRANaming ldm_sd1{true, 2, {true, true, true, false}};
  EXPECT_EQ(kohya_unet_lora_name("output_blocks.2.1.conv", ldm_sd1).name,
            "lora_unet_output_blocks_2_1_conv");
}

TEST(LoRANaming, DiffusersLdmPathMapsAndTextEncoderNames) {
  const UNetLoRANaming xl = sdxl_naming();
  EXPECT_EQ(
      diffusers_to_ldm_unet_path("down_blocks.1.attentions.0.transformer_blocks.1.attn1.to_q", xl),
      "input_blocks.4.1.transformer_blocks.1.attn1.to_q");
  EXPECT_EQ(diffusers_to_ldm_unet_path("up_blocks.0.upsamplers.0.conv", xl),
            "output_blocks.2.2.conv");
  EXPECT_EQ(diffusers_to_ldm_unet_path("up_blocks.1.resnets.2.conv_shortcut", xl),
            "output_blocks.5.0.skip_connection");
  EXPECT_EQ(diffusers_to_ldm_unet_path("mid_block.resnets.1.time_emb_proj", xl),
            "middle_block.2.emb_layers.1");
  EXPECT_EQ(diffusers_to_ldm_unet_path("mid_block.attentions.0.proj_out", xl),
            "middle_block.1.proj_out");
  EXPECT_EQ(diffusers_to_ldm_unet_path("down_blocks.1.downsamplers.0.conv", xl),
            "input_blocks.6.0.op");
  EXPECT_EQ(diffusers_to_ldm_unet_path("up_blocks.2.resnets.0.conv1", xl),
            "output_blocks.6.0.in_layers.2");
  EXPECT_THROW(diffusers_to_ldm_unet_path("down_blocks.0.attentions.0.proj_in", xl),
               std::invalid_argument);  // SDXL level 0 has no attention
  EXPECT_THROW(diffusers_to_ldm_unet_path("up_blocks.2.upsamplers.0.conv", xl),
               std::invalid_argument);
  EXPECT_THROW(diffusers_to_ldm_unet_path("conv_in", xl), std::invalid_argument);
  // L = 1 (tiny fixtures): general (L+1) rule.
  const UNetLoRANaming tiny{false, 1, {true, true}};
  EXPECT_EQ(ldm_to_diffusers_unet_path("input_blocks.2.0.op", tiny),
            "down_blocks.0.downsamplers.0.conv");
  EXPECT_EQ(ldm_to_diffusers_unet_path("output_blocks.1.2.conv", tiny),
            "up_blocks.0.upsamplers.0.conv");
  EXPECT_EQ(diffusers_to_ldm_unet_path("up_blocks.1.attentions.1.proj_in", tiny),
            "output_blocks.3.1.proj_in");

  int64_t layer = -1;
  EXPECT_TRUE(is_text_encoder_lora_target("encoder.layers.11.self_attn.out_proj", &layer));
  EXPECT_EQ(layer, 11);
  EXPECT_TRUE(is_text_encoder_lora_target("encoder.layers.0.mlp.fc2", nullptr));
  EXPECT_FALSE(is_text_encoder_lora_target("encoder.layers.0.layer_norm1", nullptr));
  EXPECT_FALSE(is_text_encoder_lora_target("text_projection", nullptr));
  EXPECT_EQ(kohya_text_encoder_lora_name("lora_te", "encoder.layers.0.self_attn.q_proj"),
            "lora_te_text_model_encoder_layers_0_self_attn_q_proj");
  EXPECT_EQ(kohya_text_encoder_lora_name("lora_te2", "encoder.layers.31.mlp.fc1"),
            "lora_te2_text_model_encoder_layers_31_mlp_fc1");
}

TEST(LoRANaming, GeneratedLayerListMatchesTheTinyUNetModuleTree) {
  // The generator's wiring must be the real model's: compare with the tiny UNet (L = 1,
  // attention at both levels, depth 1, conv proj) Linear / Conv2d / LoRA-compatible layers.
  const UNetConfig cfg = model_preset("tiny").unet;
  UNetModel unet(cfg);
  std::set<std::string> real;
  for (const auto& m : unet->named_modules("", false)) {
    const bool layer =
        m.value()->as<torch::nn::LinearImpl>() || m.value()->as<torch::nn::Conv2dImpl>() ||
        m.value()->as<LoRACompatibleLinearImpl>() || m.value()->as<LoRACompatibleConv1x1Impl>();
    if (layer &&
        kohya_unet_lora_name(m.key(), {false, 1, {true, true}}).scope != UNetLoRAScope::kNone) {
      real.insert(m.key());
    }
  }
  std::set<std::string> generated;
  for (const Layer& l : ldm_layers({1, 2}, 1, {1, 1}, 1, 32, false)) generated.insert(l.path);
  EXPECT_EQ(generated, real);
}

TEST(LoRANaming, ModuleCountsPerFamily) {
  // SD 1.5: 16 STs x 12 = 192; with LoCon 22 ResBlocks x 3 + 14 shortcuts + 3 down + 3 up = 86.
  const Counts sd1 = count(ldm_layers({1, 2, 4, 4}, 2, {1, 1, 1, 0}, 1, 320, false), sd1_naming());
  EXPECT_EQ(sd1.transformer, 192u);
  EXPECT_EQ(sd1.resblock, 86u);
  EXPECT_EQ(sd1.transformer + sd1.resblock, 278u);
  // SDXL: 70 transformer blocks x 10 + 11 STs x 2 = 722; LoCon 17 x 3 + 11 + 2 + 2 = 66.
  const Counts xl = count(ldm_layers({1, 2, 4}, 2, {0, 2, 10}, 10, 320, true), sdxl_naming());
  EXPECT_EQ(xl.transformer, 722u);
  EXPECT_EQ(xl.resblock, 66u);
  EXPECT_TRUE(xl.names.count("lora_unet_output_blocks_2_2_conv"));
  EXPECT_TRUE(xl.names.count("lora_unet_output_blocks_5_2_conv"));
  EXPECT_TRUE(xl.names.count("lora_unet_input_blocks_7_1_transformer_blocks_9_attn2_to_v"));
  EXPECT_FALSE(xl.names.count("lora_unet_input_blocks_1_1_proj_in"));
  // Every SDXL layer survives ldm -> diffusers -> ldm.
  for (const Layer& l : ldm_layers({1, 2, 4}, 2, {0, 2, 10}, 10, 320, true)) {
    EXPECT_EQ(diffusers_to_ldm_unet_path(ldm_to_diffusers_unet_path(l.path, sdxl_naming()),
                                         sdxl_naming()),
              l.path);
  }
}

// ---- variants ----

torch::Tensor w(std::vector<int64_t> shape, float v = 0.5f) { return torch::full(shape, v); }

LoRAKeyContext sd1_ctx() { return {sd1_naming(), {"lora_te"}}; }
LoRAKeyContext sdxl_ctx() { return {sdxl_naming(), {"lora_te1", "lora_te2"}}; }

std::vector<std::string> keys_of(const NormalizedLoRA& n) {
  std::vector<std::string> k;
  for (const auto& kv : n.tensors) k.push_back(kv.first);
  return k;
}

float alpha_of(const NormalizedLoRA& n, const std::string& module) {
  const torch::Tensor& a = n.tensors.at(module + ".alpha");
  EXPECT_EQ(a.dim(), 0);
  EXPECT_EQ(a.scalar_type(), torch::kFloat32);
  return a.item<float>();
}

TEST(LoRAVariants, KohyaPassesThroughWithAlphaDefaultingToRank) {
  const std::string q = "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q";
  const std::string k = "lora_te_text_model_encoder_layers_0_mlp_fc1";
  NormalizedLoRA n = normalize_lora_state_dict({{q + ".lora_down.weight", w({4, 32})},
                                                {q + ".lora_up.weight", w({32, 4})},
                                                {q + ".alpha", torch::tensor(2.0, torch::kFloat16)},
                                                {k + ".lora_down.weight", w({8, 64})},
                                                {k + ".lora_up.weight", w({128, 8})}},
                                               sd1_ctx());
  EXPECT_EQ(keys_of(n), (std::vector<std::string>{k + ".alpha", k + ".lora_down.weight",
                                                  k + ".lora_up.weight", q + ".alpha",
                                                  q + ".lora_down.weight", q + ".lora_up.weight"}));
  EXPECT_EQ(alpha_of(n, q), 2.0f);
  EXPECT_EQ(alpha_of(n, k), 8.0f);  // no alpha: rank (scale 1)
  EXPECT_EQ(n.variants, "kohya");
}

TEST(LoRAVariants, PeftSD1WithAdapterMetadataAlphas) {
  const std::string p = "unet.down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q";
  const std::string o = "unet.up_blocks.1.attentions.2.transformer_blocks.0.ff.net.2";
  const std::string t = "text_encoder.text_model.encoder.layers.3.self_attn.v_proj";
  PeftAdapterConfig unet;
  unet.lora_alpha = 8;
  unet.alpha_pattern["down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q"] = 2;
  NormalizedLoRA n = normalize_lora_state_dict({{p + ".lora_A.weight", w({4, 32})},
                                                {p + ".lora_B.weight", w({32, 4})},
                                                {o + ".lora_A.default.weight", w({4, 128})},
                                                {o + ".lora_B.default.weight", w({32, 4})},
                                                {t + ".lora_A.weight", w({4, 64})},
                                                {t + ".lora_B.weight", w({64, 4})}},
                                               sd1_ctx(), {{"unet", unet}});
  const std::string q = "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q";
  const std::string f = "lora_unet_up_blocks_1_attentions_2_transformer_blocks_0_ff_net_2";
  const std::string v = "lora_te_text_model_encoder_layers_3_self_attn_v_proj";
  EXPECT_EQ(keys_of(n), (std::vector<std::string>{
                            v + ".alpha", v + ".lora_down.weight", v + ".lora_up.weight",
                            q + ".alpha", q + ".lora_down.weight", q + ".lora_up.weight",
                            f + ".alpha", f + ".lora_down.weight", f + ".lora_up.weight"}));
  EXPECT_EQ(alpha_of(n, q), 2.0f);  // alpha_pattern
  EXPECT_EQ(alpha_of(n, f), 8.0f);  // lora_alpha
  EXPECT_EQ(alpha_of(n, v), 4.0f);  // no text_encoder config: rank
  EXPECT_TRUE(torch::equal(n.tensors.at(q + ".lora_down.weight"), w({4, 32})));
  EXPECT_EQ(n.variants, "PEFT/diffusers (lora_A/lora_B)");
  PeftAdapterConfig rs;
  rs.lora_alpha = 8;
  rs.use_rslora = true;  // scale alpha / sqrt(r) = 4 -> kohya alpha 16 at r = 4
  n = normalize_lora_state_dict(
      {{t + ".lora_A.weight", w({4, 64})}, {t + ".lora_B.weight", w({64, 4})}}, sd1_ctx(),
      {{"", rs}});
  EXPECT_EQ(alpha_of(n, v), 16.0f);
  // diffusers 0.4x with transformers 5 exports text-encoder layers without "text_model.".
  const std::string t5 = "text_encoder.encoder.layers.3.self_attn.v_proj";
  n = normalize_lora_state_dict(
      {{t5 + ".lora_A.weight", w({4, 64})}, {t5 + ".lora_B.weight", w({64, 4})}}, sd1_ctx());
  EXPECT_EQ(keys_of(n), (std::vector<std::string>{v + ".alpha", v + ".lora_down.weight",
                                                  v + ".lora_up.weight"}));
}

TEST(LoRAVariants, PeftSDXLMapsToLdmNamesAndTe1Te2) {
  NormalizedLoRA n = normalize_lora_state_dict(
      {{"unet.down_blocks.1.attentions.0.transformer_blocks.1.attn2.to_k.lora_A.weight",
        w({4, 2048})},
       {"unet.down_blocks.1.attentions.0.transformer_blocks.1.attn2.to_k.lora_B.weight",
        w({640, 4})},
       {"unet.up_blocks.0.upsamplers.0.conv.lora_A.weight", w({2, 1280, 3, 3})},
       {"unet.up_blocks.0.upsamplers.0.conv.lora_B.weight", w({1280, 2, 1, 1})},
       {"unet.mid_block.resnets.0.conv1.lora_A.weight", w({2, 1280, 3, 3})},
       {"unet.mid_block.resnets.0.conv1.lora_B.weight", w({1280, 2, 1, 1})},
       {"text_encoder.text_model.encoder.layers.0.self_attn.q_proj.lora_A.weight", w({4, 768})},
       {"text_encoder.text_model.encoder.layers.0.self_attn.q_proj.lora_B.weight", w({768, 4})},
       {"text_encoder_2.text_model.encoder.layers.31.mlp.fc2.lora_A.weight", w({4, 5120})},
       {"text_encoder_2.text_model.encoder.layers.31.mlp.fc2.lora_B.weight", w({1280, 4})}},
      sdxl_ctx());
  std::set<std::string> modules;
  for (const auto& k : keys_of(n)) modules.insert(k.substr(0, k.find('.')));
  EXPECT_EQ(modules,
            (std::set<std::string>{"lora_te1_text_model_encoder_layers_0_self_attn_q_proj",
                                   "lora_te2_text_model_encoder_layers_31_mlp_fc2",
                                   "lora_unet_input_blocks_4_1_transformer_blocks_1_attn2_to_k",
                                   "lora_unet_middle_block_0_in_layers_2",
                                   "lora_unet_output_blocks_2_2_conv"}));
  EXPECT_EQ(guess_lora_family(n.tensors), "SDXL");
  // Level 0 of SDXL has no attention: such a key is refused, naming it.
  try {
    normalize_lora_state_dict(
        {{"unet.down_blocks.0.attentions.0.proj_in.lora_A.weight", w({4, 320})}}, sdxl_ctx());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("unet.down_blocks.0.attentions.0.proj_in.lora_A.weight"),
              std::string::npos)
        << e.what();
  }
}

TEST(LoRAVariants, OldDiffusersProcessorLinearLayerLycorisAndSuffixSpellings) {
  NormalizedLoRA n = normalize_lora_state_dict(
      {{"down_blocks.0.attentions.0.transformer_blocks.0.attn1.processor.to_out_lora.down.weight",
        w({4, 32})},
       {"down_blocks.0.attentions.0.transformer_blocks.0.attn1.processor.to_out_lora.up.weight",
        w({32, 4})},
       {"unet.mid_block.attentions.0.transformer_blocks.0.attn2.processor.to_k_lora.down.weight",
        w({4, 768})},
       {"unet.mid_block.attentions.0.transformer_blocks.0.attn2.processor.to_k_lora.up.weight",
        w({1280, 4})},
       {"text_encoder.text_model.encoder.layers.0.self_attn.to_k_lora.down.weight", w({4, 768})},
       {"text_encoder.text_model.encoder.layers.0.self_attn.to_k_lora.up.weight", w({768, 4})},
       {"text_encoder.text_model.encoder.layers.1.mlp.fc1.lora_linear_layer.down.weight",
        w({4, 768})},
       {"text_encoder.text_model.encoder.layers.1.mlp.fc1.lora_linear_layer.up.weight",
        w({3072, 4})},
       {"lycoris_unet_up_blocks_1_attentions_0_proj_in.lora.down.weight", w({4, 1280, 1, 1})},
       {"lycoris_unet_up_blocks_1_attentions_0_proj_in.lora.up.weight", w({1280, 4, 1, 1})},
       {"lycoris_unet_up_blocks_1_attentions_0_proj_in.alpha", torch::tensor(1.0)},
       {"lora_te_text_model_encoder_layers_2_self_attn_out_proj.lora_down.weight", w({4, 768})},
       {"lora_te_text_model_encoder_layers_2_self_attn_out_proj.lora_up.weight", w({768, 4})},
       {"lora_te_text_model_encoder_layers_2_self_attn_out_proj.alpha", torch::tensor(1.0)},
       {"lora_te_text_model_encoder_layers_2_self_attn_out_proj.scale", torch::tensor(0.5)}},
      sd1_ctx());
  std::set<std::string> modules;
  for (const auto& k : keys_of(n)) modules.insert(k.substr(0, k.find('.')));
  EXPECT_EQ(modules, (std::set<std::string>{
                         "lora_te_text_model_encoder_layers_0_self_attn_k_proj",
                         "lora_te_text_model_encoder_layers_1_mlp_fc1",
                         "lora_te_text_model_encoder_layers_2_self_attn_out_proj",
                         "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_out_0",
                         "lora_unet_mid_block_attentions_0_transformer_blocks_0_attn2_to_k",
                         "lora_unet_up_blocks_1_attentions_0_proj_in"}));
  EXPECT_EQ(n.tensors.size(), 18u);
  EXPECT_EQ(alpha_of(n, "lora_te_text_model_encoder_layers_2_self_attn_out_proj"), 2.0f);  // scale
  EXPECT_EQ(alpha_of(n, "lora_unet_up_blocks_1_attentions_0_proj_in"), 1.0f);
  EXPECT_EQ(n.variants,
            "'.lora.down.weight' spelling, '.lora.up.weight' spelling, LyCORIS prefix, "
            "diffusers lora_linear_layer, kohya, old diffusers attention processor");
  EXPECT_EQ(guess_lora_family(n.tensors), "SD 1.x");
}

TEST(LoRAVariants, RefusedVariantsNameTheVariantAndTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {"lora_unet_down_blocks_0_attentions_0_proj_in.hada_t1", "LoHa with a Tucker"},
      {"lora_unet_down_blocks_0_attentions_0_proj_in.lokr_t2", "LoKr with a Tucker"},
      {"unet.down_blocks.0.attentions.0.proj_in.lora_magnitude_vector.default", "DoRA"},
      {"lora_unet_down_blocks_0_attentions_0_proj_in.lora_mid.weight", "Tucker/CP"},
      {"lora_unet_down_blocks_0_attentions_0_proj_in.diff", "full weight differences"},
      {"lora_unet_down_blocks_0_attentions_0_proj_in.diff_b", "full weight differences"},
      {"lora_unet_down_blocks_0_attentions_0_proj_in.weird", "unrecognised LoRA tensor key"},
      {"model.diffusion_model.input_blocks.1.1.proj_in.lora_A.weight",
       "unrecognised LoRA module name"},
  };
  for (const auto& c : cases) {
    try {
      normalize_lora_state_dict(
          {{"lora_te_text_model_encoder_layers_0_mlp_fc1.alpha", torch::tensor(1.0)},
           {c.first, w({2, 2})}},
          sd1_ctx());
      ADD_FAILURE() << c.first;
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(c.second), std::string::npos) << what;
      EXPECT_NE(what.find(c.first), std::string::npos) << what;
    }
  }
  // Incomplete and duplicate modules.
  const std::string m = "lora_unet_mid_block_attentions_0_proj_in";
  EXPECT_THROW(normalize_lora_state_dict({{m + ".lora_down.weight", w({4, 8})}}, sd1_ctx()),
               std::runtime_error);
  try {
    normalize_lora_state_dict({{m + ".lora_down.weight", w({4, 8})},
                               {"unet.mid_block.attentions.0.proj_in.lora_A.weight", w({4, 8})}},
                              sd1_ctx());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("both map to module " + m), std::string::npos) << e.what();
  }
}

// LyCORIS LoHa: the four hada_* factors and alpha pass through (a lycoris_ prefix too, rank from
// hada_w1_b, alpha defaulting to it); incomplete or mixed modules are refused by name.
TEST(LoRAVariants, LoHaFactorsPassThrough) {
  const std::string m = "lora_unet_mid_block_attentions_0_proj_in";
  const std::map<std::string, at::Tensor> loha = {
      {"lycoris_unet_mid_block_attentions_0_proj_in.hada_w1_a", w({8, 3})},
      {m + ".hada_w1_b", w({3, 8})},
      {m + ".hada_w2_a", w({8, 3})},
      {m + ".hada_w2_b", w({3, 8})}};
  const NormalizedLoRA n = normalize_lora_state_dict(loha, sd1_ctx());
  ASSERT_EQ(n.tensors.size(), 5u);
  EXPECT_TRUE(n.tensors.at(m + ".hada_w1_a")
                  .is_same(loha.at("lycoris_unet_mid_block_attentions_0_proj_in.hada_w1_a")));
  EXPECT_EQ(n.tensors.at(m + ".hada_w2_b").sizes(), torch::IntArrayRef({3, 8}));
  EXPECT_EQ(alpha_of(n, m), 3.0f);
  EXPECT_EQ(n.variants, "LyCORIS LoHa, LyCORIS prefix");
  auto error = [](const std::map<std::string, at::Tensor>& t) {
    try {
      normalize_lora_state_dict(t, sd1_ctx());
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(
      error({{m + ".hada_w1_a", w({8, 3})}, {m + ".hada_w1_b", w({3, 8})}}),
      "LoHa module " + m + " is incomplete: it has '" + m + ".hada_w1_a' but no hada_w2_a tensor");
  // LoKr: one of lokr_w1 / lokr_w1_a + _b per half (the oracle test loads complete modules).
  EXPECT_EQ(error({{m + ".lokr_w1", w({2, 2})}, {m + ".lokr_w2_a", w({4, 1})}}),
            "LoKr module " + m + " (it has '" + m +
                ".lokr_w1') needs exactly one of .lokr_w2 or .lokr_w2_a + .lokr_w2_b");
  // Found while writing the lora_file fuzz target (regressions/lora_file/lokr_1d_w1_a): a 1-D
  // factor threw c10::IndexError from lokr_rank instead of the documented std::runtime_error.
  EXPECT_EQ(
      error(
          {{m + ".lokr_w1_a", w({4})}, {m + ".lokr_w1_b", w({2, 4})}, {m + ".lokr_w2", w({2, 2})}}),
      "LoRA key '" + m + ".lokr_w1_a': expected a 2-D LoKr factor");
  EXPECT_EQ(error({{m + ".lokr_w1", w({2, 2})}, {m + ".lokr_w2", w({2, 2, 3})}}),
            "LoRA key '" + m + ".lokr_w2': expected a 2-D LoKr factor (or a 4-D conv lokr_w2)");
  auto mixed = loha;
  mixed[m + ".lora_up.weight"] = w({8, 3});
  EXPECT_NE(error(mixed).find("has both LoHa (hada_*) and LoRA ('" + m + ".lora_up.weight')"),
            std::string::npos)
      << error(mixed);
}

TEST(LoRAVariants, FamilyGuess) {
  EXPECT_EQ(guess_lora_family({{"lora_te1_text_model_encoder_layers_0_mlp_fc1.alpha", w({})}}),
            "SDXL");
  EXPECT_EQ(guess_lora_family({{"lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn2_"
                                "to_k.lora_down.weight",
                                w({4, 1024})}}),
            "SD 2.x");
  EXPECT_EQ(guess_lora_family({{"lora_unet_down_blocks_0_attentions_0_proj_in.alpha", w({})}}),
            "SD 1.x/2.x");
  EXPECT_EQ(guess_lora_family({{"foo", w({})}}), "");
}

}  // namespace
}  // namespace lf
