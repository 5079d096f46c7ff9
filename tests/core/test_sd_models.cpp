// Presets, checkpoint family detection / description, the complete random single-file layouts
// of SD 1.x / 2.x / XL, and the SDModels bundle loader with its error reporting.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core_test_util.h"
#include "model/checkpoint.h"
#include "model/model_config.h"
#include "model/sd_models.h"
#include "model/state_dict.h"

namespace lf {
namespace {

KeyShapes shapes_of(const WeightMap& w) {
  KeyShapes ks;
  for (const auto& kv : w) {
    ks.emplace(kv.first, std::vector<int64_t>(kv.second.sizes().begin(), kv.second.sizes().end()));
  }
  return ks;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(ModelPreset, NamesFamiliesAndTinyValues) {
  EXPECT_EQ(model_preset_names(),
            (std::vector<std::string>{"sd15", "sd2", "sdxl", "tiny", "tiny-sd2", "tiny-sdxl"}));
  EXPECT_EQ(family_name(model_preset("sd15").family), "sd1");
  EXPECT_EQ(family_name(model_preset("tiny-sd2").family), "sd2");
  EXPECT_EQ(family_name(model_preset("sdxl").family), "sdxl");
  for (const auto& name : model_preset_names()) {
    const ModelPreset p = model_preset(name);
    EXPECT_EQ(p.name, name);
    EXPECT_NO_THROW(p.unet.validate()) << name;
    int64_t context = 0;
    for (const auto& te : p.text_encoders) {
      EXPECT_EQ(te.config.vocab_size, 49408) << name;
      EXPECT_EQ(te.config.max_position_embeddings, 77) << name;
      context += te.config.hidden_size;
    }
    EXPECT_EQ(context, p.unet.context_dim) << name;  // SDXL: te1 ‖ te2
  }
  const ModelPreset xl = model_preset("tiny-sdxl");
  ASSERT_EQ(xl.text_encoders.size(), 2u);
  EXPECT_EQ(xl.unet.adm_in_channels,
            xl.text_encoders[1].config.projection_dim + 6 * xl.unet.adm_time_embed_dim);
  EXPECT_EQ(xl.text_encoders[0].lora_prefix, "lora_te1");
  EXPECT_EQ(xl.text_encoders[1].pad_token, 0);
  EXPECT_FALSE(xl.text_encoders[1].apply_final_layer_norm);
  const ModelPreset sdxl = model_preset("sdxl");
  EXPECT_EQ(sdxl.unet.adm_in_channels, 2816);
  EXPECT_EQ(sdxl.text_encoders[1].config.hidden_size, 1280);
  EXPECT_EQ(sdxl.text_encoders[1].config.num_layers, 32);
  EXPECT_DOUBLE_EQ(sdxl.vae.scale_factor, 0.13025);
  const ModelPreset sd2 = model_preset("sd2");
  EXPECT_EQ(sd2.text_encoders[0].layout, TextEncoderLayout::kOpenCLIP);
  EXPECT_EQ(sd2.text_encoders[0].hidden_layer_from_end, 2);
  EXPECT_TRUE(sd2.text_encoders[0].apply_final_layer_norm);
  EXPECT_EQ(sd2.text_encoders[0].config.num_layers, 24);
}

TEST(RandomCheckpointLayouts, EachFamilyHasItsPrefixesAndOpenClipShapes) {
  const WeightMap sd2 = make_random_checkpoint(model_preset("tiny-sd2"), 3);
  EXPECT_EQ(sd2.at("cond_stage_model.model.transformer.resblocks.2.attn.in_proj_weight").sizes(),
            torch::IntArrayRef({192, 64}));
  EXPECT_EQ(sd2.at("cond_stage_model.model.text_projection").sizes(), torch::IntArrayRef({64, 64}));
  EXPECT_EQ(sd2.at("cond_stage_model.model.positional_embedding").sizes(),
            torch::IntArrayRef({77, 64}));
  const WeightMap xl = make_random_checkpoint(model_preset("tiny-sdxl"), 3);
  EXPECT_EQ(xl.at("conditioner.embedders.1.model.text_projection").sizes(),
            torch::IntArrayRef({64, 32}));
  EXPECT_EQ(xl.at("conditioner.embedders.0.transformer.text_model.encoder.layers.2.mlp.fc1.weight")
                .sizes(),
            torch::IntArrayRef({96, 48}));
  EXPECT_EQ(xl.at("model.diffusion_model.label_emb.0.0.weight").sizes(),
            torch::IntArrayRef({128, 1568}));
  for (const auto& kv : xl) {
    const std::string& k = kv.first;
    EXPECT_TRUE(k.rfind("model.diffusion_model.", 0) == 0 ||
                k.rfind("first_stage_model.", 0) == 0 ||
                k.rfind("conditioner.embedders.0.transformer.text_model.", 0) == 0 ||
                k.rfind("conditioner.embedders.1.model.", 0) == 0)
        << k;
  }
  // The keys-only listing equals the real layout; the same seed gives the same bytes.
  EXPECT_EQ(random_checkpoint_key_shapes(model_preset("tiny-sdxl")), shapes_of(xl));
  const WeightMap again = make_random_checkpoint(model_preset("tiny-sdxl"), 3);
  for (const auto& kv : xl) EXPECT_TRUE(torch::equal(kv.second, again.at(kv.first))) << kv.first;
  const WeightMap half = make_random_checkpoint(model_preset("tiny-sdxl"), 3, at::kBFloat16);
  const std::string key = "conditioner.embedders.1.model.ln_final.weight";
  EXPECT_EQ(half.at(key).scalar_type(), at::kBFloat16);
  EXPECT_TRUE(torch::equal(half.at(key), xl.at(key).to(at::kBFloat16)));
}

TEST(DetectModelFamily, RandomTinyCheckpointsOfEachFamily) {
  EXPECT_EQ(detect_model_family(random_checkpoint_key_shapes(model_preset("tiny"))),
            ModelFamily::kSD1);
  EXPECT_EQ(detect_model_family(random_checkpoint_key_shapes(model_preset("tiny-sd2"))),
            ModelFamily::kSD2);
  const KeyShapes xl = random_checkpoint_key_shapes(model_preset("tiny-sdxl"));
  EXPECT_EQ(detect_model_family(xl), ModelFamily::kSDXL);
  const std::string line = describe_checkpoint(xl, ModelFamily::kSDXL);
  EXPECT_EQ(line.rfind("sdxl: UNet ", 0), 0u) << line;
  EXPECT_NE(line.find("context 112"), std::string::npos) << line;
  EXPECT_NE(line.find("HF CLIP 48x3 (conditioner.embedders.0.transformer.text_model.)"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("open_clip 64x3 (conditioner.embedders.1.model.)"), std::string::npos)
      << line;
  EXPECT_NE(line.find("VAE encoder+decoder"), std::string::npos) << line;
  UNetModel unet(model_preset("tiny-sdxl").unet);
  int64_t params = 0;
  for (const auto& p : unet->parameters()) params += p.numel();
  EXPECT_NE(line.find("UNet " + std::to_string(params) + " params"), std::string::npos) << line;
}

TEST(DetectModelFamily, FullSizeMarkersAndErrors) {
  const std::string u = "model.diffusion_model.";
  KeyShapes sd1 = {
      {u + "input_blocks.0.0.weight", {320, 4, 3, 3}},
      {u + "input_blocks.1.1.transformer_blocks.0.attn2.to_k.weight", {320, 768}},
      {"cond_stage_model.transformer.text_model.embeddings.token_embedding.weight", {49408, 768}}};
  EXPECT_EQ(detect_model_family(sd1), ModelFamily::kSD1);
  KeyShapes sd2_unet_only = {
      {u + "input_blocks.1.1.transformer_blocks.0.attn2.to_k.weight", {320, 1024}}};
  EXPECT_EQ(detect_model_family(sd2_unet_only), ModelFamily::kSD2);
  KeyShapes xl_legacy = sd1;
  xl_legacy["cond_stage_model.1.model.ln_final.weight"] = {1280};
  EXPECT_EQ(detect_model_family(xl_legacy), ModelFamily::kSDXL);
  KeyShapes xl_unet_only = {{u + "label_emb.0.0.weight", {1280, 2816}}};
  EXPECT_EQ(detect_model_family(xl_unet_only), ModelFamily::kSDXL);
  KeyShapes refiner = {{u + "label_emb.0.0.weight", {1536, 2560}}};
  EXPECT_NE(error_of([&] { detect_model_family(refiner); }).find("not supported"),
            std::string::npos);

  KeyShapes inpaint = sd1;
  inpaint[u + "input_blocks.0.0.weight"] = {320, 9, 3, 3};
  std::string what = error_of([&] { detect_model_family(inpaint); });
  EXPECT_NE(what.find("inpainting"), std::string::npos) << what;
  EXPECT_NE(what.find("not supported"), std::string::npos) << what;
  KeyShapes pix2pix = sd1;
  pix2pix[u + "input_blocks.0.0.weight"] = {320, 8, 3, 3};
  what = error_of([&] { detect_model_family(pix2pix); });
  EXPECT_NE(what.find("instruct-pix2pix"), std::string::npos) << what;

  KeyShapes diffusers = {{"down_blocks.0.resnets.0.conv1.weight", {320, 320, 3, 3}},
                         {"lora_unet_x.alpha", {}}};
  what = error_of([&] { detect_model_family(diffusers); });
  EXPECT_NE(what.find("model.diffusion_model."), std::string::npos) << what;
  EXPECT_NE(what.find("down_blocks, lora_unet_x"), std::string::npos) << what;
  EXPECT_NE(error_of([&] { detect_model_family({}); }).find("no tensors"), std::string::npos);
}

class SDModelsLoad : public ::testing::TestWithParam<std::string> {};

TEST_P(SDModelsLoad, RandomCheckpointLoadsEveryPart) {
  const ModelPreset preset = model_preset(GetParam());
  WeightMap w = make_random_checkpoint(preset, 5, at::kHalf);  // fp16 file, fp32 model
  w["alphas_cumprod"] = torch::zeros({1000});
  w["model_ema.decay"] = torch::zeros({});
  w[preset.text_encoders[0].checkpoint_prefix + "embeddings.position_ids"] =
      torch::arange(77).unsqueeze(0);
  w["lora_te_something.alpha"] = torch::zeros({});  // other top-level prefix: not ours
  SDModels m = build_sd_models(preset, /*with_decoder=*/true);
  ASSERT_EQ(m.text_encoders.size(), preset.text_encoders.size());
  ASSERT_NO_THROW(load_sd_models(m, w));
  const std::string dec = "first_stage_model.decoder.conv_out.weight";
  EXPECT_TRUE(torch::equal(m.vae_decoder->named_parameters()["decoder.conv_out.weight"],
                           w.at(dec).to(torch::kFloat32)));
  EXPECT_EQ(m.unet->named_parameters()["out.2.weight"].scalar_type(), torch::kFloat32);
  const TextEncoderSpec& last = preset.text_encoders.back();
  const WeightMap exported =
      text_encoder_weights(m.text_encoders.back(), last.checkpoint_prefix, last.layout);
  for (const auto& kv : exported) {
    EXPECT_TRUE(torch::equal(kv.second, w.at(kv.first).to(torch::kFloat32))) << kv.first;
  }
  // Without a decoder the decoder keys are skipped silently.
  SDModels no_dec = build_sd_models(preset, /*with_decoder=*/false);
  EXPECT_FALSE(no_dec.vae_decoder);
  EXPECT_NO_THROW(load_sd_models(no_dec, w));
}

INSTANTIATE_TEST_SUITE_P(TinyPresets, SDModelsLoad,
                         ::testing::Values("tiny", "tiny-sd2", "tiny-sdxl"), [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

TEST(SDModelsLoadErrors, ListsMissingMismatchedAndUnexpectedPerPart) {
  const ModelPreset preset = model_preset("tiny-sdxl");
  WeightMap w = make_random_checkpoint(preset, 5);
  w.erase("model.diffusion_model.label_emb.0.2.bias");
  w.erase("conditioner.embedders.1.model.transformer.resblocks.1.attn.in_proj_bias");
  w["first_stage_model.decoder.conv_in.weight"] = torch::zeros({64, 4, 3, 3});
  w["first_stage_model.encoder.bogus"] = torch::zeros({1});
  w["conditioner.embedders.0.transformer.text_model.bogus"] = torch::zeros({1});
  SDModels m = build_sd_models(preset, true);
  const std::string what = error_of([&] { load_sd_models(m, w); });
  EXPECT_NE(what.find("tiny-sdxl (sdxl)"), std::string::npos) << what;
  EXPECT_NE(what.find("1 missing keys: model.diffusion_model.label_emb.0.2.bias"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("1 missing keys: conditioner.embedders.1.model.transformer.resblocks.1."
                      "attn.in_proj_bias"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("first_stage_model.decoder.conv_in.weight: expected [32, 4, 3, 3], "
                      "found [64, 4, 3, 3]"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("unexpected keys: first_stage_model.encoder.bogus"), std::string::npos)
      << what;
  EXPECT_EQ(what.find("first_stage_model.encoder.bogus"),
            what.rfind("first_stage_model.encoder.bogus"))
      << "reported once: " << what;
  EXPECT_NE(what.find("unexpected keys: conditioner.embedders.0.transformer.text_model.bogus"),
            std::string::npos)
      << what;
  // An SD1 checkpoint for the SDXL preset: text encoder 1 and 2 are missing entirely.
  WeightMap sd1 = make_random_checkpoint(model_preset("tiny"), 5);
  SDModels m2 = build_sd_models(preset, false);
  const std::string what2 = error_of([&] { load_sd_models(m2, sd1); });
  EXPECT_NE(what2.find("missing keys: conditioner.embedders.0."), std::string::npos) << what2;
  EXPECT_NE(what2.find("missing keys: conditioner.embedders.1.model."), std::string::npos) << what2;
}

}  // namespace
}  // namespace lf
