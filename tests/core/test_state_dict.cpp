// Strict checkpoint loading (missing / mismatched / unexpected / ignorable keys) and the seeded
// random checkpoint's prefixes, determinism and round trip into fresh models.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core_test_util.h"
#include "model/checkpoint.h"
#include "model/clip_text_model.h"
#include "model/model_config.h"
#include "model/state_dict.h"
#include "model/unet.h"
#include "model/vae_decoder.h"
#include "model/vae_encoder.h"

namespace lf {
namespace {

std::string load_error(const std::function<void()>& load) {
  try {
    load();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

class RandomCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    preset_ = new ModelPreset(model_preset("tiny"));
    weights_ = new WeightMap(make_random_checkpoint(*preset_, 11));
  }
  static void TearDownTestSuite() {
    delete weights_;
    delete preset_;
  }
  static CLIPTextConfig text_config() { return preset_->text_encoders.at(0).config; }
  static ModelPreset* preset_;
  static WeightMap* weights_;
};
ModelPreset* RandomCheckpoint::preset_ = nullptr;
WeightMap* RandomCheckpoint::weights_ = nullptr;

TEST_F(RandomCheckpoint, KeysCarryTheThreeLdmPrefixes) {
  size_t unet = 0, vae = 0, text = 0;
  for (const auto& kv : *weights_) {
    const std::string& k = kv.first;
    if (k.rfind(kUNetCheckpointPrefix, 0) == 0) {
      ++unet;
    } else if (k.rfind(kVAECheckpointPrefix, 0) == 0) {
      ++vae;
    } else if (k.rfind(kCLIPTextCheckpointPrefix, 0) == 0) {
      ++text;
    } else {
      ADD_FAILURE() << "unexpected key " << k;
    }
    EXPECT_EQ(kv.second.scalar_type(), torch::kFloat32) << k;
  }
  EXPECT_EQ(unet, UNetModel(preset_->unet)->named_parameters().size());
  EXPECT_EQ(vae, VAEEncoder(preset_->vae)->named_parameters().size() +
                     VAEDecoder(preset_->vae)->named_parameters().size());
  EXPECT_EQ(text, CLIPTextModel(text_config())->named_parameters().size());
  EXPECT_TRUE(weights_->count("first_stage_model.post_quant_conv.weight"));
  EXPECT_TRUE(weights_->count("first_stage_model.decoder.up.3.upsample.conv.weight"));
  EXPECT_TRUE(weights_->count("model.diffusion_model.input_blocks.0.0.weight"));
  EXPECT_TRUE(weights_->count("first_stage_model.quant_conv.weight"));
  EXPECT_TRUE(
      weights_->count("cond_stage_model.transformer.text_model.embeddings.token_embedding.weight"));
}

TEST_F(RandomCheckpoint, LoadsBackIntoFreshModels) {
  UNetModel unet(preset_->unet);
  VAEEncoder vae(preset_->vae);
  CLIPTextModel text(text_config());
  ASSERT_NO_THROW(load_state_dict(unet, *weights_));
  ASSERT_NO_THROW(load_state_dict(vae, *weights_));
  ASSERT_NO_THROW(load_state_dict(text, *weights_));
  for (const auto& kv : module_weights(*unet, kUNetCheckpointPrefix)) {
    EXPECT_TRUE(torch::equal(kv.second, weights_->at(kv.first))) << kv.first;
  }
  for (const auto& kv : module_weights(*text, kCLIPTextCheckpointPrefix)) {
    EXPECT_TRUE(torch::equal(kv.second, weights_->at(kv.first))) << kv.first;
  }
}

TEST_F(RandomCheckpoint, SameSeedSameBytesOtherSeedDiffers) {
  WeightMap again = make_random_checkpoint(*preset_, 11);
  WeightMap other = make_random_checkpoint(*preset_, 12);
  ASSERT_EQ(again.size(), weights_->size());
  for (const auto& kv : *weights_) {
    EXPECT_TRUE(torch::equal(kv.second, again.at(kv.first))) << kv.first;
  }
  const std::string key = "model.diffusion_model.input_blocks.1.1.proj_in.weight";
  EXPECT_FALSE(torch::equal(weights_->at(key), other.at(key)));
}

TEST_F(RandomCheckpoint, InitFollowsTheDocumentedRules) {
  const torch::Tensor& w = weights_->at("model.diffusion_model.out.2.weight");  // [4, 32, 3, 3]
  const double bound = 1.0 / std::sqrt(32.0 * 9.0);
  EXPECT_LE(w.abs().max().item<double>(), bound);
  EXPECT_GT(w.abs().max().item<double>(), 0.9 * bound);  // not zero-initialised like ldm
  EXPECT_TRUE(torch::equal(weights_->at("model.diffusion_model.out.0.weight"), torch::ones({32})));
  const torch::Tensor& emb =
      weights_->at("cond_stage_model.transformer.text_model.embeddings.token_embedding.weight");
  EXPECT_NEAR(emb.std().item<double>(), 0.02, 1e-3);
}

TEST_F(RandomCheckpoint, MissingKeyIsNamed) {
  WeightMap w = *weights_;
  w.erase("model.diffusion_model.middle_block.1.proj_in.weight");
  UNetModel unet(preset_->unet);
  const std::string what = load_error([&] { load_state_dict(unet, w); });
  EXPECT_NE(what.find("1 missing keys"), std::string::npos) << what;
  EXPECT_NE(what.find("model.diffusion_model.middle_block.1.proj_in.weight"), std::string::npos)
      << what;
}

TEST_F(RandomCheckpoint, ShapeMismatchNamesKeyAndBothShapes) {
  WeightMap w = *weights_;
  w["model.diffusion_model.time_embed.0.weight"] = torch::zeros({128, 31});
  UNetModel unet(preset_->unet);
  const std::string what = load_error([&] { load_state_dict(unet, w); });
  EXPECT_NE(what.find("model.diffusion_model.time_embed.0.weight"), std::string::npos) << what;
  EXPECT_NE(what.find("expected [128, 32]"), std::string::npos) << what;
  EXPECT_NE(what.find("found [128, 31]"), std::string::npos) << what;
}

TEST_F(RandomCheckpoint, UnexpectedKeyIsAnError) {
  WeightMap w = *weights_;
  w["model.diffusion_model.label_emb.0.0.weight"] = torch::zeros({4});
  UNetModel unet(preset_->unet);
  const std::string what = load_error([&] { load_state_dict(unet, w); });
  EXPECT_NE(what.find("unexpected keys: model.diffusion_model.label_emb.0.0.weight"),
            std::string::npos)
      << what;
}

TEST_F(RandomCheckpoint, FailedLoadCopiesNothing) {
  WeightMap w = *weights_;
  w.erase("model.diffusion_model.out.2.bias");
  UNetModel unet(preset_->unet);
  const torch::Tensor before = unet->named_parameters()["out.2.weight"].clone();
  EXPECT_THROW(load_state_dict(unet, w), std::runtime_error);
  EXPECT_TRUE(torch::equal(unet->named_parameters()["out.2.weight"], before));
}

TEST_F(RandomCheckpoint, KnownIgnorableKeysAreAccepted) {
  WeightMap w = *weights_;
  w["first_stage_model.decoder.conv_in.weight"] = torch::zeros({4});  // ignored: wrong shape
  w["first_stage_model.post_quant_conv.weight"] = torch::zeros({4, 4, 1, 1});
  w["cond_stage_model.transformer.text_model.embeddings.position_ids"] =
      torch::arange(77, torch::kInt64).unsqueeze(0);
  w["alphas_cumprod"] = torch::zeros({1000});  // outside every prefix
  VAEEncoder vae(preset_->vae);
  CLIPTextModel text(text_config());
  UNetModel unet(preset_->unet);
  EXPECT_NO_THROW(load_state_dict(vae, w));
  EXPECT_NO_THROW(load_state_dict(text, w));
  EXPECT_NO_THROW(load_state_dict(unet, w));
  w["first_stage_model.encoder.extra.weight"] = torch::zeros({1});
  EXPECT_THROW(load_state_dict(vae, w), std::runtime_error);
}

TEST_F(RandomCheckpoint, LinearWeightLoadsIntoConv1x1AndDtypeIsConverted) {
  WeightMap w = *weights_;
  const std::string key = "first_stage_model.encoder.mid.attn_1.q.weight";  // [32, 32, 1, 1]
  torch::Tensor linear = w.at(key).reshape({32, 32}).to(torch::kFloat16);
  w[key] = linear;
  VAEEncoder vae(preset_->vae);
  load_state_dict(vae, w);
  torch::Tensor loaded = vae->named_parameters()["encoder.mid.attn_1.q.weight"];
  EXPECT_EQ(loaded.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(loaded, linear.to(torch::kFloat32).reshape({32, 32, 1, 1})));
}

}  // namespace
}  // namespace lf
