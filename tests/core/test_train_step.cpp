// compute_loss_sum (kohya process_batch, epsilon prediction) on the tiny UNet: equals the
// step-by-step computation with the same generator draws, is deterministic, weights samples,
// rejects empty batches, and trains the LoRA parameters.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core_test_util.h"
#include "lora/lora_network.h"
#include "model/model_config.h"
#include "model/unet.h"
#include "train/grad_clip.h"
#include "train/loss.h"
#include "train/noise_schedule.h"
#include "train/optim/adamw.h"
#include "train/seeding.h"
#include "train/train_step.h"

namespace lf {
namespace {

class TinyStep : public ::testing::Test {
 protected:
  TinyStep() : unet_(model_preset("tiny").unet) {
    test::fill_reference_weights(*unet_);
    inputs_.latents = test::reference_values("step.latents", {2, 4, 8, 8});
    inputs_.context = test::reference_values("step.context", {2, 77, 64});
    inputs_.loss_weights = torch::tensor({1.0f, 0.5f});
  }
  UNetModel unet_;
  DDPMNoiseSchedule schedule_;
  StepInputs inputs_;
};

TEST_F(TinyStep, EqualsManualComputationWithTheSameDraws) {
  torch::NoGradGuard no_grad;
  at::Generator gen = make_cpu_generator(mix_seed(9, 1, 17));
  torch::Tensor loss = compute_loss_sum(unet_, schedule_, inputs_, gen);
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_EQ(loss.scalar_type(), torch::kFloat32);

  at::Generator g2 = make_cpu_generator(mix_seed(9, 1, 17));
  torch::Tensor noise = torch::randn({2, 4, 8, 8}, g2, torch::kFloat32);
  torch::Tensor t = torch::randint(0, 1000, {2}, g2, torch::kInt64);
  EXPECT_GE(t.min().item<int64_t>(), 0);
  EXPECT_LT(t.max().item<int64_t>(), 1000);
  torch::Tensor eps =
      unet_->forward(schedule_.add_noise(inputs_.latents, noise, t), t, inputs_.context);
  torch::Tensor per_sample = per_sample_mse(eps, noise);
  const double expected = per_sample[0].item<double>() * 1.0 + per_sample[1].item<double>() * 0.5;
  EXPECT_NEAR(loss.item<double>(), expected, 1e-6 * expected);
  EXPECT_GT(expected, 0.1);
}

TEST_F(TinyStep, SameSeedSameBytesOtherStepDiffers) {
  torch::NoGradGuard no_grad;
  at::Generator a = make_cpu_generator(mix_seed(9, 0, 3));
  at::Generator b = make_cpu_generator(mix_seed(9, 0, 3));
  at::Generator c = make_cpu_generator(mix_seed(9, 0, 4));
  torch::Tensor la = compute_loss_sum(unet_, schedule_, inputs_, a);
  torch::Tensor lb = compute_loss_sum(unet_, schedule_, inputs_, b);
  torch::Tensor lc = compute_loss_sum(unet_, schedule_, inputs_, c);
  EXPECT_TRUE(torch::equal(la, lb));
  EXPECT_NE(la.item<float>(), lc.item<float>());
}

TEST_F(TinyStep, ZeroWeightRemovesASample) {
  torch::NoGradGuard no_grad;
  StepInputs one = inputs_;
  one.loss_weights = torch::tensor({1.0f, 0.0f});
  StepInputs both = inputs_;
  both.loss_weights = torch::tensor({1.0f, 1.0f});
  at::Generator a = make_cpu_generator(5), b = make_cpu_generator(5);
  const double l1 = compute_loss_sum(unet_, schedule_, one, a).item<double>();
  const double l2 = compute_loss_sum(unet_, schedule_, both, b).item<double>();
  EXPECT_GT(l2, l1);
  EXPECT_GT(l1, 0.0);
}

TEST_F(TinyStep, RejectsEmptyAndInconsistentBatches) {
  at::Generator gen = make_cpu_generator(1);
  StepInputs empty;
  empty.latents = torch::zeros({0, 4, 8, 8});
  empty.context = torch::zeros({0, 77, 64});
  empty.vector_cond = torch::zeros({0});
  EXPECT_THROW(compute_loss_sum(unet_, schedule_, empty, gen), std::invalid_argument);
  StepInputs bad = inputs_;
  bad.loss_weights = torch::ones({3});
  EXPECT_THROW(compute_loss_sum(unet_, schedule_, bad, gen), std::invalid_argument);
}

TEST_F(TinyStep, LoRATrainingLowersTheLossOnAFixedBatch) {
  at::Generator init = make_cpu_generator(2);
  LoRANetwork lora(unet_, 4, 4.0, init);
  AdamWOptimizer opt(lora.parameters(), AdamWOptions{});
  auto loss_at = [&](uint64_t step) {
    at::Generator gen = make_cpu_generator(mix_seed(1, 0, step % 2));
    return compute_loss_sum(unet_, schedule_, inputs_, gen) / 2.0;
  };
  double first = 0.0;
  {
    torch::NoGradGuard no_grad;
    first = loss_at(0).item<double>() + loss_at(1).item<double>();
  }
  for (uint64_t step = 0; step < 12; ++step) {
    opt.zero_grad();
    loss_at(step).backward();
    clip_grad_norm(lora.parameters(), 1.0);
    opt.step(1e-2);
  }
  torch::NoGradGuard no_grad;
  const double last = loss_at(0).item<double>() + loss_at(1).item<double>();
  EXPECT_LT(last, 0.9 * first) << first << " -> " << last;
  for (const auto& p : unet_->parameters()) EXPECT_FALSE(p.grad().defined());
}

}  // namespace
}  // namespace lf
