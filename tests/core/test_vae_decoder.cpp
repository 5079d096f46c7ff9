// VAEDecoder (ldm Decoder + post_quant_conv) against diffusers.AutoencoderKL.decode: exact ldm
// key set, output on name-hashed weights, scale handling and the loader's ignore rules.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core_test_util.h"
#include "model/model_config.h"
#include "model/state_dict.h"
#include "model/vae_decoder.h"
#include "model/vae_encoder.h"
#include "model_references.h"

namespace lf {
namespace {

TEST(VAEDecoder, TinyKeySetEqualsDiffusersDerivedLdmKeys) {
  VAEDecoder vae(model_preset("tiny").vae);
  const std::vector<std::string> expected(std::begin(ref::kVAEDecoderTinyKeys),
                                          std::end(ref::kVAEDecoderTinyKeys));
  EXPECT_EQ(test::parameter_names(*vae), expected);
  auto params = vae->named_parameters();
  // L + 1 = 2 blocks per level, upsample on levels 1..3, up.3 is the first one run.
  EXPECT_TRUE(params.contains("decoder.up.0.block.1.conv2.weight"));
  EXPECT_FALSE(params.contains("decoder.up.0.upsample.conv.weight"));
  EXPECT_TRUE(params.contains("decoder.up.3.upsample.conv.weight"));
  EXPECT_TRUE(params.contains("decoder.up.0.block.0.nin_shortcut.weight"));  // 32 -> 16
  EXPECT_EQ(params["post_quant_conv.weight"].sizes(), torch::IntArrayRef({4, 4, 1, 1}));
  EXPECT_EQ(params["decoder.conv_in.weight"].sizes(), torch::IntArrayRef({32, 4, 3, 3}));
  EXPECT_EQ(params["decoder.conv_out.weight"].sizes(), torch::IntArrayRef({3, 16, 3, 3}));
}

TEST(VAEDecoder, TinyDecodeMatchesDiffusersWithin1e5) {
  VAEDecoder vae(model_preset("tiny").vae);
  test::fill_reference_weights(*vae);
  torch::NoGradGuard no_grad;
  // diffusers decodes the unscaled z; decode() takes the UNet's scaled latents.
  torch::Tensor z = test::reference_values("vaedec.z", {1, 4, 4, 4});
  torch::Tensor img = vae->decode(z * 0.18215);
  ASSERT_EQ(img.sizes(), torch::IntArrayRef({1, 3, 32, 32}));
  torch::Tensor expected =
      test::from_array(ref::kVAEDecoderTinyOutput, ref::kVAEDecoderTinyOutput_shape);
  torch::Tensor got = img.index({torch::indexing::Slice(), torch::indexing::Slice(),
                                 torch::indexing::Slice(0, torch::indexing::None, 3),
                                 torch::indexing::Slice(0, torch::indexing::None, 3)});
  ASSERT_EQ(got.sizes(), expected.sizes());
  EXPECT_GT(expected.abs().max().item<double>(), 0.1);
  EXPECT_LT(test::max_abs_diff(got, expected), 1e-5);
}

TEST(VAEDecoder, ScaleFactorIsDividedOut) {
  VAEConfig xl = model_preset("tiny-sdxl").vae;
  ASSERT_DOUBLE_EQ(xl.scale_factor, 0.13025);
  VAEDecoder a(model_preset("tiny").vae), b(xl);
  test::fill_reference_weights(*a);
  test::fill_reference_weights(*b);
  torch::NoGradGuard no_grad;
  torch::Tensor z = test::reference_values("vaedec.z", {1, 4, 4, 4});
  EXPECT_LT(test::max_abs_diff(a->decode(z * 0.18215), b->decode(z * 0.13025)), 1e-5);
}

TEST(VAEDecoder, LoaderSkipsTheEncoderHalfAndAcceptsLinearAttention) {
  const VAEConfig cfg = model_preset("tiny").vae;
  VAEEncoder enc(cfg);
  VAEDecoder dec(cfg);
  test::fill_reference_weights(*dec);
  WeightMap w = module_weights(*enc, kVAECheckpointPrefix);
  for (auto& kv : module_weights(*dec, kVAECheckpointPrefix))
    w.emplace(kv.first, kv.second.clone());
  const std::string q = "first_stage_model.decoder.mid.attn_1.q.weight";
  w[q] = w.at(q).reshape({32, 32}).to(torch::kFloat16);  // converted-file Linear layout
  w["first_stage_model.loss.logvar"] = torch::zeros({});
  VAEDecoder fresh(cfg);
  ASSERT_NO_THROW(load_state_dict(fresh, w));
  EXPECT_TRUE(torch::equal(fresh->named_parameters()["decoder.mid.attn_1.q.weight"],
                           w.at(q).to(torch::kFloat32).reshape({32, 32, 1, 1})));
  EXPECT_TRUE(torch::equal(fresh->named_parameters()["decoder.up.2.block.0.conv1.weight"],
                           dec->named_parameters()["decoder.up.2.block.0.conv1.weight"]));
  // The encoder loader still skips the decoder half.
  EXPECT_NO_THROW(load_state_dict(enc, w));
  w["first_stage_model.decoder.extra.weight"] = torch::zeros({1});
  try {
    load_state_dict(fresh, w);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("first_stage_model.decoder.extra.weight"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lf
