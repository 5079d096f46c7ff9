// VAEEncoder (ldm Encoder + quant_conv) against diffusers.AutoencoderKL.encode: exact ldm key
// set, posterior mean/logvar on name-hashed weights, latent shape and seeded sampling.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core_references.h"
#include "core_test_util.h"
#include "model/model_config.h"
#include "model/vae_encoder.h"
#include "train/seeding.h"

namespace lf {
namespace {

TEST(VAEEncoder, TinyKeySetEqualsDiffusersDerivedLdmKeys) {
  VAEEncoder vae(model_preset("tiny").vae);
  const std::vector<std::string> expected(std::begin(ref::kVAETinyKeys),
                                          std::end(ref::kVAETinyKeys));
  EXPECT_EQ(test::parameter_names(*vae), expected);
}

TEST(VAEEncoder, TinyPosteriorMatchesDiffusersWithin1e5) {
  VAEEncoder vae(model_preset("tiny").vae);
  test::fill_reference_weights(*vae);
  torch::NoGradGuard no_grad;
  LatentDistribution d = vae->encode(test::reference_values("vae.x", {1, 3, 32, 32}));
  torch::Tensor mean = test::from_array(ref::kVAETinyMean, ref::kVAETinyMean_shape);
  torch::Tensor logvar = test::from_array(ref::kVAETinyLogvar, ref::kVAETinyLogvar_shape);
  ASSERT_EQ(d.mean.sizes(), mean.sizes());
  ASSERT_EQ(d.logvar.sizes(), logvar.sizes());
  EXPECT_LT(test::max_abs_diff(d.mean, mean), 1e-5);
  EXPECT_LT(test::max_abs_diff(d.logvar, logvar), 1e-5);
}

TEST(VAEEncoder, LatentShapeIsEighthResolution) {
  VAEEncoder vae(model_preset("tiny").vae);
  EXPECT_EQ(vae->config().downsample_factor(), 8);
  torch::NoGradGuard no_grad;
  LatentDistribution d = vae->encode(torch::zeros({2, 3, 64, 48}));
  EXPECT_EQ(d.mean.sizes(), torch::IntArrayRef({2, 4, 8, 6}));
  EXPECT_EQ(d.logvar.sizes(), torch::IntArrayRef({2, 4, 8, 6}));
}

TEST(VAEEncoder, SamplingIsSeededAndFollowsTheFormula) {
  VAEEncoder vae(model_preset("tiny").vae);
  test::fill_reference_weights(*vae);
  torch::NoGradGuard no_grad;
  torch::Tensor x = test::reference_values("vae.x", {1, 3, 32, 32});
  at::Generator g1 = make_cpu_generator(5), g2 = make_cpu_generator(5), g3 = make_cpu_generator(6);
  torch::Tensor a = vae->sample_latents(x, g1);
  torch::Tensor b = vae->sample_latents(x, g2);
  torch::Tensor c = vae->sample_latents(x, g3);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(torch::allclose(a, c));

  at::Generator g4 = make_cpu_generator(5);
  torch::Tensor eps = torch::randn({1, 4, 4, 4}, g4, torch::kFloat32);
  LatentDistribution d = vae->encode(x);
  torch::Tensor manual = (d.mean + torch::exp(0.5 * d.logvar) * eps) * 0.18215;
  EXPECT_LT(test::max_abs_diff(a, manual), 1e-6);
}

TEST(VAEEncoder, LogvarIsClamped) {
  VAEEncoder vae(model_preset("tiny").vae);
  torch::NoGradGuard no_grad;
  for (auto& p : vae->named_parameters()) {
    if (p.key() == "quant_conv.bias") p.value().fill_(100.0);
  }
  LatentDistribution d = vae->encode(torch::zeros({1, 3, 16, 16}));
  EXPECT_LE(d.logvar.max().item<float>(), 20.0f);
  EXPECT_EQ(d.logvar.max().item<float>(), 20.0f);
}

}  // namespace
}  // namespace lf
