// lorafleet's sample-image samplers (worker/core/sample) against diffusers 0.42.1's schedulers as
// kohya's sample pipeline runs them (tests/oracle/make_sampler_fixture.py), on lorafleet's own
// seeded tiny checkpoint, fp32 CPU, for each of kohya's sample_sampler choices, with Karras
// sigmas and v-prediction:
//  - the timesteps of every model call equal scheduler.timesteps (1e-3: KDPM2's interpolated
//    ones pass through float32 logs);
//  - replay: fed the recorded guided predictions, the sampler's model inputs and final latent
//    equal diffusers' within 2e-6 of the latent's largest value (the schedulers' float32
//    arithmetic alone: a few ulps);
//  - live: with lorafleet's UNet and classifier-free guidance (scale 7.5, the same noise,
//    conditioning and ancestral draws) the final latent is within 1e-4 of diffusers', relative
//    to its largest value once that exceeds 1. (A random UNet does not denoise, so the epsilon
//    samplers end near sigma_max x noise, |x| ~ 45, where float32 UNet differences of 1e-6
//    relative per call add up to ~1e-4 absolute; the v-prediction and DDIM latents stay <= 4.)
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "model/model_config.h"
#include "model/sd_models.h"
#include "model/unet.h"
#include "oracle_fixture.h"
#include "sample/sampler.h"
#include "train/noise_schedule.h"

namespace lf {
namespace {

struct Case {
  std::string name;
  SamplerSpec spec;
};

std::vector<Case> cases_of(const std::string& list, int steps) {
  std::vector<Case> out;
  std::stringstream in(list);
  std::string name;
  while (std::getline(in, name, ',')) {
    Case c{name, {}};
    std::string base = name;
    auto strip = [&base](const std::string& suffix) {
      if (base.size() > suffix.size() &&
          base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0) {
        base.resize(base.size() - suffix.size());
        return true;
      }
      return false;
    };
    c.spec.v_prediction = strip("_v");
    c.spec.karras_sigmas = strip("_karras");
    c.spec.kind = sampler_kind(base);
    c.spec.steps = steps;
    out.push_back(c);
  }
  return out;
}

class OracleSampler : public ::testing::Test {
 protected:
  void SetUp() override {
    fx_ = std::make_unique<test::OracleFixture>(test::kOracleFixtureDir + "samplers.safetensors");
    ASSERT_EQ(fx_->meta("preset"), "tiny");
    cases_ = cases_of(fx_->meta("cases"), std::stoi(fx_->meta("steps")));
    ASSERT_EQ(cases_.size(), 12u);
  }
  std::unique_ptr<test::OracleFixture> fx_;
  std::vector<Case> cases_;
  DDPMNoiseSchedule schedule_;
};

TEST_F(OracleSampler, TimestepsAndReplayedStepsMatchDiffusers) {
  torch::NoGradGuard no_grad;
  for (const Case& c : cases_) {
    SCOPED_TRACE(c.name);
    const torch::Tensor inputs = fx_->get(c.name + ".inputs");
    const torch::Tensor guided = fx_->get(c.name + ".guided");
    const torch::Tensor want_t = fx_->get(c.name + ".timesteps");
    const SigmaSchedule s =
        sigma_schedule(c.spec.kind, c.spec.steps, c.spec.karras_sigmas, schedule_.alphas_cumprod());
    ASSERT_EQ(static_cast<int64_t>(s.timesteps.size()), want_t.size(0));
    for (std::size_t i = 0; i < s.timesteps.size(); ++i) {
      EXPECT_NEAR(s.timesteps[i], want_t[i].item<double>(), 1e-3) << "call " << i;
    }
    std::size_t call = 0, draw = 0;
    double max_input_diff = 0;
    const GuidedModel replay = [&](const torch::Tensor& input, double) {
      // kohya's pipeline feeds [uncond, cond] the same scaled input.
      max_input_diff = std::max(max_input_diff, test::max_abs_diff(input, inputs[call][0]));
      return guided[call++];
    };
    const AncestralNoise noise = [&] { return fx_->get("ancestral")[draw++]; };
    const torch::Tensor latent =
        run_sampler(c.spec, schedule_.alphas_cumprod(), fx_->get("noise"), replay, noise);
    EXPECT_EQ(call, s.timesteps.size());
    const torch::Tensor& want = fx_->get(c.name + ".latent");
    const double scale = want.abs().max().item<double>();
    EXPECT_LE(max_input_diff, 2e-6 * scale);
    test::expect_close(*fx_, c.name + ".latent", latent, 2e-6 * scale);
  }
  (void)fx_->get("context");  // the live test's
  EXPECT_EQ(fx_->unused(), std::vector<std::string>{});
}

TEST_F(OracleSampler, LiveWithTheTinyUNetMatchesDiffusersWithin1e4) {
  torch::NoGradGuard no_grad;
  const ModelPreset preset = model_preset("tiny");
  const uint64_t seed = std::stoull(fx_->meta("checkpoint_seed"));
  const auto weights = make_random_checkpoint(preset, seed);
  ASSERT_EQ(test::random_checkpoint_sha256("tiny", weights, seed), fx_->meta("checkpoint_sha256"))
      << "the tiny checkpoint changed: run tests/oracle/regen.sh";
  SDModels models = build_sd_models(preset, /*with_decoder=*/false);
  load_sd_models(models, weights);
  const torch::Tensor context = fx_->get("context");  // [uncond, cond]
  const double scale = std::stod(fx_->meta("guidance_scale"));
  for (const Case& c : cases_) {
    SCOPED_TRACE(c.name);
    std::size_t draw = 0;
    const GuidedModel unet = [&](const torch::Tensor& input, double t) {
      const torch::Tensor x = torch::cat({input, input});
      const torch::Tensor out =
          models.unet->forward(x, torch::full({2}, t, torch::kFloat32), context, {});
      const auto parts = out.chunk(2);
      return parts[0] + scale * (parts[1] - parts[0]);
    };
    const AncestralNoise noise = [&] { return fx_->get("ancestral")[draw++]; };
    const torch::Tensor latent =
        run_sampler(c.spec, schedule_.alphas_cumprod(), fx_->get("noise"), unet, noise);
    const torch::Tensor& want = fx_->get(c.name + ".latent");
    const double scale = std::max(1.0, want.abs().max().item<double>());
    const double diff = test::max_abs_diff(latent, want);
    std::printf("  %-20s live max|diff| %.3g (max|ref| %.3g)\n", c.name.c_str(), diff, scale);
    EXPECT_LE(diff, 1e-4 * scale);
  }
}

}  // namespace
}  // namespace lf
