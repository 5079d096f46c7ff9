// kohya's noise, timestep and loss options against the reference restated on diffusers in
// tests/oracle/make_loss_fixture.py (fixture tests/fixtures/oracle/loss_recipe.safetensors),
// fed the same random draws. Each check names the kohya function it mirrors. Tolerances, fp32:
// 1e-6 relative where both sides run the same float32 formula on the same inputs; the schedule's
// own SNR and zero-terminal alphas_cumprod come from float64 (noise_schedule.h), so they are
// compared at 2e-4 relative / 1e-6 absolute.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "train/loss.h"
#include "train/loss_weighting.h"
#include "train/noise_recipe.h"
#include "train/noise_schedule.h"
#include "worker/io/tensor_file.h"

namespace lf {
namespace {

const LoadedTensors& fixture() {
  static const LoadedTensors fx =
      load_safetensors(LF_SOURCE_DIR "/tests/fixtures/oracle/loss_recipe.safetensors");
  return fx;
}

const torch::Tensor& at(const std::string& name) { return fixture().tensors.at(name); }

// max |a - b| / (|b| + floor)
double max_rel(const torch::Tensor& a, const torch::Tensor& b, double floor = 1e-6) {
  const torch::Tensor a64 = a.to(torch::kFloat64), b64 = b.to(torch::kFloat64);
  return ((a64 - b64).abs() / (b64.abs() + floor)).max().item<double>();
}

TEST(OracleLossRecipe, ScheduleSnrAndZeroTerminalSnr) {
  // kohya prepare_scheduler_for_custom_training (all_snr) = diffusers compute_snr.
  const DDPMNoiseSchedule plain;
  EXPECT_LE(max_rel(plain.snr(), at("snr")), 2e-4);
  // kohya fix_noise_scheduler_betas_for_zero_terminal_snr: abar ends at exactly 0. kohya takes
  // all_snr before that fix: the SNR weights keep the original schedule's SNR.
  const DDPMNoiseSchedule zt(1000, 0.00085, 0.012, /*zero_terminal_snr=*/true);
  EXPECT_LE((zt.alphas_cumprod() - at("zt.alphas_cumprod")).abs().max().item<double>(), 1e-6);
  EXPECT_EQ(zt.alphas_cumprod()[999].item<float>(), 0.0f);
  EXPECT_TRUE(torch::equal(zt.snr(), plain.snr()));
  EXPECT_GT(zt.snr()[999].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(zt.alphas_cumprod()[0].item<float>(), plain.alphas_cumprod()[0].item<float>());
}

TEST(OracleLossRecipe, NoiseOffsetAdaptiveScaleAndItsClamp) {
  // kohya apply_noise_offset.
  const torch::Tensor &latents = at("latents"), &noise = at("noise"), &draw = at("offset_noise");
  EXPECT_LE(
      max_rel(apply_noise_offset(latents, noise, 0.0357, std::nullopt, draw), at("noise.offset")),
      1e-6);
  EXPECT_LE(
      max_rel(apply_noise_offset(latents, noise, 0.0357, 0.5, draw), at("noise.offset_adaptive")),
      1e-6);
  const torch::Tensor clamped = apply_noise_offset(latents, noise, 0.0357, -10.0, draw);
  EXPECT_TRUE(torch::equal(clamped, noise));  // the offset clamps at 0 for every channel
  EXPECT_TRUE(torch::equal(at("noise.offset_clamped"), noise));
}

TEST(OracleLossRecipe, PyramidNoise) {
  // kohya pyramid_noise_like (multires_noise_iterations 6, discount 0.3): 3 levels, the last 1x1.
  const torch::Tensor r = at("pyramid.r");
  ASSERT_EQ(r.size(0), 3);
  std::vector<PyramidLevel> levels;
  for (int64_t i = 0; i < r.size(0); ++i) {
    const double ri = r[i].item<double>();
    const torch::Tensor& draw = at("pyramid.draw" + std::to_string(i));
    const auto [hn, wn] = pyramid_level_size(8, 8, ri, static_cast<int>(i));
    EXPECT_EQ(draw.size(2), hn);
    EXPECT_EQ(draw.size(3), wn);
    levels.push_back({ri, draw});
  }
  EXPECT_LE(max_rel(pyramid_noise(at("noise"), 0.3, levels), at("noise.pyramid"), 1e-4), 1e-5);
}

TEST(OracleLossRecipe, InputPerturbationNoisesTheInputOnly) {
  // kohya get_noise_noisy_latents_and_timesteps with ip_noise_gamma 0.1: the UNet input is
  // noised with noise + 0.1 * randn, the target stays the noise.
  const DDPMNoiseSchedule schedule;
  const torch::Tensor noisy =
      schedule.add_noise(at("latents"), at("noise") + 0.1 * at("ip_noise"), at("timesteps"));
  EXPECT_LE((noisy - at("noisy.ip")).abs().max().item<double>(), 1e-5);
}

TEST(OracleLossRecipe, HuberThresholdIsPerSample) {
  // kohya get_huber_threshold_if_needed: one c per sample, from its own timestep.
  LossOptions o;
  o.loss_type = "huber";
  o.huber_c = 0.1;
  o.huber_scale = 2.0;
  const torch::Tensor& t = at("timesteps");
  const torch::Tensor& abar = at("alphas_cumprod");
  for (const char* schedule : {"constant", "exponential", "snr"}) {
    o.huber_schedule = schedule;
    const torch::Tensor c = huber_threshold(o, t, abar);
    EXPECT_LE(max_rel(c, at(std::string("huber_c.") + schedule)), 1e-6) << schedule;
  }
  o.huber_schedule = "snr";
  const torch::Tensor c = huber_threshold(o, t, abar);
  EXPECT_GT(c[0].item<float>(), c[2].item<float>());  // not one c for the batch (seed 002)
  o.loss_type = "l2";
  EXPECT_FALSE(huber_threshold(o, t, abar).defined());
}

TEST(OracleLossRecipe, EachLossType) {
  // kohya conditional_loss(reduction "none") then mean over [1, 2, 3].
  const torch::Tensor& c = at("huber_c.snr");
  for (const char* type : {"l2", "l1", "huber", "smooth_l1"}) {
    const torch::Tensor got = per_sample_loss(at("pred"), at("noise"), {}, type, c);
    EXPECT_LE(max_rel(got, at(std::string("loss.") + type)), 1e-6) << type;
  }
}

TEST(OracleLossRecipe, EachPostProcessWeighting) {
  // kohya train_network post_process_loss, one option at a time, on the fixture's SNR.
  struct Case {
    const char* name;
    LossOptions options;
  };
  std::vector<Case> cases(6);
  cases[0] = {"min_snr5", {}};  // apply_snr_weight
  cases[0].options.min_snr_gamma = 5.0;
  cases[1] = {"min_snr5_v", cases[0].options};
  cases[1].options.v_parameterization = true;
  cases[2] = {"scale_v", {}};  // scale_v_prediction_loss_like_noise_prediction
  cases[2].options.scale_v_pred_loss_like_noise_pred = true;
  cases[3] = {"v_pred_like0.5", {}};  // add_v_prediction_like_loss
  cases[3].options.v_pred_like_loss = 0.5;
  cases[4] = {"debiased", {}};  // apply_debiased_estimation
  cases[4].options.debiased_estimation_loss = true;
  cases[5] = {"debiased_v", cases[4].options};  // kohya PR #1715: 1 / (snr + 1) for v
  cases[5].options.v_parameterization = true;
  for (const Case& k : cases) {
    const torch::Tensor got =
        post_process_loss(at("loss.l2"), at("timesteps"), at("snr"), k.options);
    EXPECT_LE(max_rel(got, at(std::string("weighted.") + k.name)), 1e-6) << k.name;
  }
  // With nothing set the loss is returned as it was.
  EXPECT_TRUE(torch::equal(post_process_loss(at("loss.l2"), at("timesteps"), at("snr"), {}),
                           at("loss.l2")));
}

// draw_noise with every option off draws what the plain step always drew (the noise, then the
// timesteps), and each option draws from the same generator: two generators with one seed give
// the same noise, timesteps and input noise.
TEST(OracleLossRecipe, DrawNoiseIsSeededAndDefaultsToThePlainDraws) {
  const torch::Tensor latents = at("latents");
  auto g1 = at::detail::createCPUGenerator(7);
  const NoiseDraw plain = draw_noise({}, latents, g1);
  auto g2 = at::detail::createCPUGenerator(7);
  const torch::Tensor noise = torch::randn(latents.sizes(), g2, torch::dtype(torch::kFloat32));
  const torch::Tensor t = torch::randint(0, 1000, {4}, g2, torch::dtype(torch::kInt64));
  EXPECT_TRUE(torch::equal(plain.noise, noise));
  EXPECT_TRUE(torch::equal(plain.timesteps, t));
  EXPECT_TRUE(torch::equal(plain.input_noise, noise));

  NoiseOptions all;
  all.noise_offset = 0.05;
  all.noise_offset_random_strength = true;
  all.ip_noise_gamma = 0.1;
  all.ip_noise_gamma_random_strength = true;
  all.min_timestep = 100;
  all.max_timestep = 200;
  auto a = at::detail::createCPUGenerator(9);
  auto b = at::detail::createCPUGenerator(9);
  const NoiseDraw da = draw_noise(all, latents, a), db = draw_noise(all, latents, b);
  EXPECT_TRUE(torch::equal(da.noise, db.noise));
  EXPECT_TRUE(torch::equal(da.input_noise, db.input_noise));
  EXPECT_FALSE(torch::equal(da.noise, da.input_noise));
  EXPECT_GE(da.timesteps.min().item<int64_t>(), 100);
  EXPECT_LT(da.timesteps.max().item<int64_t>(), 200);
  NoiseOptions multires;
  multires.multires_noise_iterations = 6;
  auto m = at::detail::createCPUGenerator(11);
  const NoiseDraw dm = draw_noise(multires, latents, m);
  EXPECT_NEAR(dm.noise.std().item<double>(), 1.0, 1e-5);  // pyramid noise is rescaled to std 1
}

}  // namespace
}  // namespace lf
