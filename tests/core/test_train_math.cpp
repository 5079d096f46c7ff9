// Training math against diffusers / transformers / torch references: DDPM schedule and
// add_noise, per-sample MSE, LR schedules, AdamW steps and exact state round trip,
// clip_grad_norm_, and SplitMix64 seed mixing.
#include <gtest/gtest.h>

#include <cmath>

#include <torch/torch.h>

#include "core_references.h"
#include "core_test_util.h"
#include "train/grad_clip.h"
#include "train/loss.h"
#include "train/lr_schedule.h"
#include "train/noise_schedule.h"
#include "train/optim/adamw.h"
#include "train/seeding.h"

namespace lf {
namespace {

TEST(DDPMNoiseSchedule, AlphasCumprodMatchFloat64AndDiffusers) {
  DDPMNoiseSchedule schedule;
  ASSERT_EQ(schedule.alphas_cumprod().sizes(), torch::IntArrayRef({1000}));
  EXPECT_EQ(schedule.alphas_cumprod().scalar_type(), torch::kFloat32);
  for (size_t i = 0; i < std::size(ref::kAlphasCumprodIndex); ++i) {
    const double got = schedule.alphas_cumprod()[ref::kAlphasCumprodIndex[i]].item<double>();
    // float32 rounding of the float64 value
    EXPECT_EQ(got, static_cast<double>(static_cast<float>(ref::kAlphasCumprodF64[i])));
    EXPECT_NEAR(got, ref::kAlphasCumprodDiffusersF32[i], 1e-6);
  }
  EXPECT_NEAR(schedule.alphas_cumprod()[0].item<double>(), 0.99915, 1e-7);
  EXPECT_NEAR(schedule.alphas_cumprod()[999].item<double>(), 0.0046601, 1e-7);
  EXPECT_NEAR(schedule.betas()[999].item<double>(), 0.012, 1e-9);
}

TEST(DDPMNoiseSchedule, AddNoiseMatchesDiffusersWithin1e6) {
  DDPMNoiseSchedule schedule;
  torch::Tensor x0 = test::reference_values("noise.x0", {3, 4, 2, 2});
  torch::Tensor eps = test::reference_values("noise.eps", {3, 4, 2, 2});
  torch::Tensor t = torch::tensor(
      {ref::kAddNoiseTimesteps[0], ref::kAddNoiseTimesteps[1], ref::kAddNoiseTimesteps[2]});
  torch::Tensor expected = test::from_array(ref::kAddNoiseDiffusers, ref::kAddNoiseDiffusers_shape);
  EXPECT_LT(test::max_abs_diff(schedule.add_noise(x0, eps, t), expected), 1e-6);
  EXPECT_THROW(schedule.add_noise(x0, eps, torch::tensor({0, 1, 1000})), std::invalid_argument);
  EXPECT_THROW(schedule.add_noise(x0, eps, torch::tensor({0, 1})), std::invalid_argument);
}

TEST(PerSampleMSE, MeansOverNonBatchDimsInFloat32) {
  torch::Tensor pred = torch::zeros({2, 3, 2, 2}, torch::kFloat16);
  torch::Tensor target = torch::ones({2, 3, 2, 2});
  target[1].fill_(2.0);
  target[1][0][0][0] = 14.0;  // (12 * 4 + 196 - 4) / 12 = 20
  torch::Tensor loss = per_sample_mse(pred, target);
  EXPECT_EQ(loss.scalar_type(), torch::kFloat32);
  ASSERT_EQ(loss.sizes(), torch::IntArrayRef({2}));
  EXPECT_FLOAT_EQ(loss[0].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(loss[1].item<float>(), 20.0f);
  EXPECT_THROW(per_sample_mse(pred, torch::ones({2, 3, 2})), std::invalid_argument);
}

// kohya apply_masked_loss: error * mask, then the mean over all C*h*w elements (masked ones
// count in the denominator).
TEST(PerSampleMaskedMSE, MultipliesByMaskBeforeTheFullMean) {
  torch::Tensor pred = torch::zeros({2, 2, 2, 2});
  torch::Tensor target = torch::full({2, 2, 2, 2}, 2.0);  // squared error 4 everywhere
  torch::Tensor mask = torch::zeros({2, 1, 2, 2});
  mask[0][0][0][0] = 1.0;   // sample 0: one of 4 pixels, both channels: 4 * 2 / 8 = 1
  mask[1].fill_(0.5);       // sample 1: everything at half weight: 2
  torch::Tensor loss = per_sample_masked_mse(pred, target, mask);
  EXPECT_FLOAT_EQ(loss[0].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(loss[1].item<float>(), 2.0f);
  EXPECT_TRUE(torch::equal(per_sample_masked_mse(pred, target, torch::Tensor()),
                           per_sample_mse(pred, target)));
  EXPECT_THROW(per_sample_masked_mse(pred, target, torch::ones({2, 1, 3, 2})),
               std::invalid_argument);
}

TEST(LRSchedule, MatchesTransformersSchedules) {
  const std::pair<const char*, const double*> cases[] = {
      {"constant", ref::kLRConstant},
      {"constant_with_warmup", ref::kLRConstantWithWarmup},
      {"linear", ref::kLRLinear},
      {"cosine", ref::kLRCosine}};
  for (const auto& c : cases) {
    LRScheduleOptions o;
    o.name = c.first;
    o.base_lr = 1e-4;
    o.warmup_steps = o.name == "constant" ? 0 : 10;
    o.total_steps = 100;
    for (size_t i = 0; i < std::size(ref::kLRSteps); ++i) {
      EXPECT_DOUBLE_EQ(lr_at_step(o, ref::kLRSteps[i]), c.second[i])
          << c.first << " step " << ref::kLRSteps[i];
    }
  }
  // Hand values: cosine halfway through decay is base/2; linear at step W is base.
  LRScheduleOptions o;
  o.name = "cosine";
  o.base_lr = 2e-4;
  o.warmup_steps = 10;
  o.total_steps = 110;
  EXPECT_NEAR(lr_at_step(o, 60), 1e-4, 1e-18);
  o.name = "linear";
  EXPECT_DOUBLE_EQ(lr_at_step(o, 10), 2e-4);
}

TEST(LRSchedule, RejectsWhatKohyaAndTransformersRefuse) {
  LRScheduleOptions o;
  o.total_steps = 10;
  o.name = "cosine_with_hard_restarts";  // not a kohya name
  EXPECT_THROW(lr_at_step(o, 0), std::invalid_argument);
  o.name = "constant";
  o.warmup_steps = 5;
  EXPECT_THROW(lr_at_step(o, 0), std::invalid_argument);
  o.name = "linear";
  o.warmup_steps = 0;
  EXPECT_THROW(lr_at_step(o, -1), std::invalid_argument);
  o.name = "polynomial";
  o.initial_lr = 1e-8;  // below lr_end 1e-7
  EXPECT_THROW(lr_at_step(o, 3), std::invalid_argument);
  o.name = "warmup_stable_decay";
  o.warmup_steps = 6;
  o.decay_steps = 5;  // 6 + 5 > 10
  EXPECT_THROW(lr_at_step(o, 0), std::invalid_argument);
  o.decay_steps = 4;
  o.decay_type = "exponential";
  EXPECT_THROW(lr_at_step(o, 7), std::invalid_argument);
}

// diffusers' rules are thresholds, sorted: "0.1:20,1:10,0.01" is 1 below 10, 0.1 below 20.
TEST(LRSchedule, PiecewiseConstantSortsItsRules) {
  LRScheduleOptions o;
  o.name = "piecewise_constant";
  o.base_lr = 2.0;
  o.total_steps = 100;
  o.step_rules = {{20, 0.1}, {10, 1.0}};
  o.final_multiple = 0.01;
  EXPECT_DOUBLE_EQ(lr_at_step(o, 9), 2.0);
  EXPECT_DOUBLE_EQ(lr_at_step(o, 10), 0.2);
  EXPECT_DOUBLE_EQ(lr_at_step(o, 19), 0.2);
  EXPECT_DOUBLE_EQ(lr_at_step(o, 20), 0.02);
}

std::vector<torch::Tensor> make_params() {
  torch::Tensor p0 = test::reference_values("opt.p0", {3, 5}).set_requires_grad(true);
  torch::Tensor p1 = test::reference_values("opt.p1", {4}).set_requires_grad(true);
  return {p0, p1};
}

void set_grads(std::vector<torch::Tensor>& params, int step) {
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].mutable_grad() = test::reference_values(
        "opt.grad" + std::to_string(step) + "." + std::to_string(i), params[i].sizes().vec());
  }
}

TEST(LoRAOptimizer, AdamWMatchesTorchWithin1e7) {
  auto params = make_params();
  AdamWOptimizer opt(params, AdamWOptions{});
  for (int s = 0; s < 3; ++s) {
    set_grads(params, s);
    opt.step(ref::kAdamWLRs[s]);
  }
  EXPECT_EQ(opt.step_count(), 3);
  EXPECT_LT(test::max_abs_diff(params[0], test::from_array(ref::kAdamWP0, ref::kAdamWP0_shape)),
            1e-7);
  EXPECT_LT(test::max_abs_diff(params[1], test::from_array(ref::kAdamWP1, ref::kAdamWP1_shape)),
            1e-7);
}

TEST(LoRAOptimizer, StateRoundTripResumesBitIdentically) {
  const std::vector<std::string> names = {"a.lora_down.weight", "a.lora_up.weight"};
  // Uninterrupted: 5 steps.
  auto p_ref = make_params();
  AdamWOptimizer ref_opt(p_ref, AdamWOptions{});
  for (int s = 0; s < 5; ++s) {
    set_grads(p_ref, s % 3);
    ref_opt.step(1e-3 * (s + 1));
  }
  // Interrupted after 2 steps: save params + optimizer state, restore into fresh objects.
  auto p_a = make_params();
  AdamWOptimizer opt_a(p_a, AdamWOptions{});
  for (int s = 0; s < 2; ++s) {
    set_grads(p_a, s % 3);
    opt_a.step(1e-3 * (s + 1));
  }
  auto state = opt_a.state_dict(names);
  EXPECT_EQ(state.at("step").item<int64_t>(), 2);
  EXPECT_EQ(state.size(), 6u);  // 2 x 2 moments, step, the optimizer.AdamW marker
  auto p_b = make_params();
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < p_b.size(); ++i) p_b[i].copy_(p_a[i]);
  }
  AdamWOptimizer opt_b(p_b, AdamWOptions{});
  opt_b.load_state_dict(state, names);
  EXPECT_EQ(opt_b.step_count(), 2);
  for (int s = 2; s < 5; ++s) {
    set_grads(p_b, s % 3);
    opt_b.step(1e-3 * (s + 1));
  }
  for (size_t i = 0; i < p_b.size(); ++i) EXPECT_TRUE(torch::equal(p_b[i], p_ref[i])) << i;
  auto s_ref = ref_opt.state_dict(names), s_b = opt_b.state_dict(names);
  for (const auto& kv : s_ref) EXPECT_TRUE(torch::equal(kv.second, s_b.at(kv.first))) << kv.first;

  // A fresh optimizer's state has step 0 and no moments yet (torch creates them at the first
  // step), and bad input is rejected.
  AdamWOptimizer fresh(make_params(), AdamWOptions{});
  auto zero = fresh.state_dict(names);
  EXPECT_EQ(zero.at("step").item<int64_t>(), 0);
  EXPECT_EQ(zero.count("a.lora_up.weight.exp_avg_sq"), 0u);
  state.erase("a.lora_up.weight.exp_avg");
  EXPECT_THROW(fresh.load_state_dict(state, names), std::runtime_error);
  EXPECT_THROW(fresh.state_dict({"only_one"}), std::invalid_argument);
}

TEST(LoRAOptimizer, LrMultipliersScaleEachGroup) {
  // kohya unet_lr / text_encoder_lr: one schedule, a per-group lr. AdamW's first step moves a
  // parameter by lr * g / (|g| + eps) after decoupled decay p * (1 - lr * wd).
  std::vector<torch::Tensor> p = {torch::ones({2}).requires_grad_(),
                                  torch::ones({2}).requires_grad_(),
                                  torch::ones({1}).requires_grad_()};
  AdamWOptimizer opt(p, AdamWOptions{}, {1.0, 0.5, 0.5});
  for (auto& t : p) t.mutable_grad() = torch::full_like(t, 0.5);
  opt.step(0.1);
  const double g = 0.5 / (0.5 + 1e-8);
  EXPECT_NEAR(p[0][1].item<double>(), (1.0 - 0.1 * 0.01) - 0.1 * g, 1e-7);
  EXPECT_NEAR(p[1][0].item<double>(), (1.0 - 0.05 * 0.01) - 0.05 * g, 1e-7);
  EXPECT_NEAR(p[2][0].item<double>(), (1.0 - 0.05 * 0.01) - 0.05 * g, 1e-7);
  EXPECT_THROW(AdamWOptimizer(p, AdamWOptions{}, {1.0}), std::invalid_argument);
}

TEST(DDPMNoiseSchedule, VelocityIsTheVPredictionTarget) {
  // v = sqrt(abar_t) eps - sqrt(1 - abar_t) x0 (diffusers get_velocity); at t with abar known.
  const DDPMNoiseSchedule s;
  const torch::Tensor x0 = torch::tensor({1.0f, -2.0f}).reshape({2, 1});
  const torch::Tensor eps = torch::tensor({0.5f, 3.0f}).reshape({2, 1});
  const torch::Tensor t = torch::tensor({0, 999}, torch::kInt64);
  const torch::Tensor v = s.velocity(x0, eps, t);
  for (int i = 0; i < 2; ++i) {
    const double abar = s.alphas_cumprod()[t[i].item<int64_t>()].item<double>();
    const double want = std::sqrt(abar) * eps[i][0].item<double>() -
                        std::sqrt(1.0 - abar) * x0[i][0].item<double>();
    EXPECT_NEAR(v[i][0].item<double>(), want, 1e-6) << i;
  }
  EXPECT_THROW(s.velocity(x0, eps, torch::tensor({0, 1000}, torch::kInt64)),
               std::invalid_argument);
}

TEST(LoRAOptimizer, ZeroGradAndRequiresGradCheck) {
  auto params = make_params();
  AdamWOptimizer opt(params, AdamWOptions{});
  set_grads(params, 0);
  opt.zero_grad();
  EXPECT_FALSE(params[0].grad().defined());
  // Grads that are views of one flat (all-reduce) buffer.
  torch::Tensor flat = torch::ones({19});
  params[0].mutable_grad() = flat.slice(0, 0, 15).view({3, 5});
  params[1].mutable_grad() = flat.slice(0, 15, 19);
  opt.step(1e-3);
  EXPECT_EQ(opt.step_count(), 1);
  opt.zero_grad();
  EXPECT_FALSE(params[1].grad().defined());
  EXPECT_THROW(AdamWOptimizer({torch::zeros({2})}, AdamWOptions{}), std::invalid_argument);
}

TEST(ClipGradNorm, MatchesTorchClipGradNorm) {
  auto params = make_params();
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].mutable_grad() =
        test::reference_values("clip.grad." + std::to_string(i), params[i].sizes().vec(), 2.0);
  }
  const double total = clip_grad_norm(params, 1.0);
  EXPECT_NEAR(total, ref::kClipTotalNorm[0], 1e-6);
  EXPECT_LT(
      test::max_abs_diff(params[0].grad(), test::from_array(ref::kClipG0, ref::kClipG0_shape)),
      1e-7);
  EXPECT_LT(
      test::max_abs_diff(params[1].grad(), test::from_array(ref::kClipG1, ref::kClipG1_shape)),
      1e-7);
  // Below the limit nothing changes; max_norm <= 0 only measures.
  torch::Tensor before = params[0].grad().clone();
  EXPECT_NEAR(clip_grad_norm(params, 100.0), 1.0, 1e-5);
  EXPECT_TRUE(torch::equal(params[0].grad(), before));
  EXPECT_NEAR(clip_grad_norm(params, 0.0), 1.0, 1e-5);
  EXPECT_EQ(clip_grad_norm({torch::zeros({2})}, 1.0), 0.0);
}

TEST(Seeding, MixSeedMatchesReferenceSplitMix64) {
  for (const auto& c : ref::kMixSeedCases) {
    EXPECT_EQ(mix_seed(c[0], c[1], c[2]), c[3]) << c[0] << " " << c[1] << " " << c[2];
  }
  uint64_t state = 0;
  EXPECT_EQ(splitmix64_next(state), 0xE220A8397B1DCDAFULL);  // SplitMix64(0) first output
}

TEST(Seeding, CpuGeneratorIsReproducible) {
  at::Generator a = make_cpu_generator(123), b = make_cpu_generator(123);
  torch::Tensor x = torch::randn({16}, a, torch::kFloat32);
  torch::Tensor y = torch::randn({16}, b, torch::kFloat32);
  EXPECT_TRUE(torch::equal(x, y));
  at::Generator c = make_cpu_generator(124);
  EXPECT_FALSE(torch::equal(x, torch::randn({16}, c, torch::kFloat32)));
  // torch.manual_seed(123); torch.randn(2) in Python
  at::Generator d = make_cpu_generator(123);
  torch::Tensor z = torch::randn({2}, d, torch::kFloat32);
  EXPECT_FLOAT_EQ(z[0].item<float>(), -0.111467116f);
  EXPECT_FLOAT_EQ(z[1].item<float>(), 0.120362945f);
}

}  // namespace
}  // namespace lf
