// The dtypes kohya's precision options give (train/precision.h) and fp16 dynamic loss scaling
// with torch.amp.GradScaler's defaults and update rule (train/loss_scaler.h), and AdamW on
// half parameters (train/optimizer.h, full_fp16 / full_bf16).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <stdexcept>

#include "train/grad_clip.h"
#include "train/loss_scaler.h"
#include "train/optim/adamw.h"
#include "train/precision.h"

namespace lf {
namespace {

TEST(Precision, KohyaWeightDtypeLoRADtypeAndAutocast) {
  Precision no = resolve_precision({});
  EXPECT_EQ(no.weight_dtype, at::kFloat);
  EXPECT_EQ(no.lora_dtype, at::kFloat);
  EXPECT_FALSE(no.autocast);
  EXPECT_FALSE(no.loss_scaling);

  PrecisionOptions o;
  o.mixed_precision = "bf16";
  Precision bf16 = resolve_precision(o);
  EXPECT_EQ(bf16.weight_dtype, at::kBFloat16);
  EXPECT_EQ(bf16.unet_matrix_dtype, at::kBFloat16);
  EXPECT_EQ(bf16.lora_dtype, at::kFloat);  // LoRA and optimizer state stay fp32
  EXPECT_EQ(bf16.vae_dtype, at::kFloat);   // --no_half_vae by default
  EXPECT_TRUE(bf16.autocast);
  EXPECT_FALSE(bf16.loss_scaling);

  o.full_bf16 = true;
  o.fp8_base = true;
  o.vae_dtype = "bf16";
  Precision full = resolve_precision(o);
  EXPECT_EQ(full.lora_dtype, at::kBFloat16);
  EXPECT_EQ(full.unet_matrix_dtype, at::kFloat8_e4m3fn);
  EXPECT_EQ(full.weight_dtype, at::kBFloat16);  // norms and small layers stay bf16
  EXPECT_EQ(full.vae_dtype, at::kBFloat16);
  EXPECT_EQ(full.describe(),
            "bf16 (weights bf16, UNet matrices fp8_e4m3fn, LoRA bf16, VAE bf16, autocast)");

  PrecisionOptions h;
  h.mixed_precision = "fp16";
  h.full_fp16 = true;
  Precision fp16 = resolve_precision(h);
  EXPECT_EQ(fp16.weight_dtype, at::kHalf);
  EXPECT_EQ(fp16.lora_dtype, at::kHalf);
  EXPECT_TRUE(fp16.loss_scaling);
}

TEST(Precision, KohyaPreconditionsAreRefused) {
  PrecisionOptions o;
  o.full_bf16 = true;  // mixed_precision "no"
  EXPECT_THROW(resolve_precision(o), std::invalid_argument);
  o.mixed_precision = "fp16";
  EXPECT_THROW(resolve_precision(o), std::invalid_argument);  // full_bf16 needs bf16
  o = {};
  o.fp8_base = true;
  EXPECT_THROW(resolve_precision(o), std::invalid_argument);  // needs a compute dtype
  o = {};
  o.mixed_precision = "fp8";
  EXPECT_THROW(resolve_precision(o), std::invalid_argument);
  EXPECT_THROW(dtype_from_name("half"), std::invalid_argument);
  EXPECT_EQ(dtype_from_name("float"), at::kFloat);
}

TEST(LossScaler, GradScalerDefaultsBackoffOnInf) {
  LossScaler s;
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.inverse_scale(), 1.0 / 65536.0);  // a power of two: exact
  s.update(/*found_inf=*/false);
  EXPECT_EQ(s.growth_tracker(), 1);
  s.update(/*found_inf=*/true);
  EXPECT_EQ(s.scale(), 32768.0);
  EXPECT_EQ(s.growth_tracker(), 0);
  for (int i = 0; i < 1999; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 32768.0);  // growth_interval 2000 not reached yet
  EXPECT_EQ(s.growth_tracker(), 1999);
  s.update(false);
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(LossScaler, GrowsEveryIntervalCleanStepsAndRoundTrips) {
  LossScalerOptions o;
  o.init_scale = 8.0;
  o.growth_interval = 3;
  LossScaler s(o);
  for (int i = 0; i < 3; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 16.0);
  s.update(false);
  s.update(false);
  s.update(true);  // an overflow resets the count
  EXPECT_EQ(s.scale(), 8.0);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 8.0);
  s.update(false);
  EXPECT_EQ(s.scale(), 16.0);
  // A tiny scale's inverse is float32-rounded, as GradScaler computes it.
  LossScaler restored(o);
  restored.restore(3.0, 2);
  EXPECT_EQ(restored.scale(), 3.0);
  EXPECT_EQ(restored.growth_tracker(), 2);
  EXPECT_EQ(restored.inverse_scale(), static_cast<double>(static_cast<float>(1.0 / 3.0)));
  restored.update(false);
  EXPECT_EQ(restored.scale(), 6.0);
  EXPECT_THROW(restored.restore(0.0, 0), std::invalid_argument);
  EXPECT_THROW(restored.restore(1.0, -1), std::invalid_argument);
  o.growth_interval = 0;
  EXPECT_THROW(LossScaler{o}, std::invalid_argument);
}


// full_fp16 / full_bf16: AdamW steps half parameters through float32 copies, so a zero gradient
// (lora_down's first step) gives 0, not 0/0 = NaN as fp16 AdamW with eps 1e-8 does, and the
// result is the float32 step rounded once; the moments are float32 and round-trip.
TEST(LoRAOptimizer, HalfParametersStepInFloat32) {
  for (at::ScalarType half : {at::kHalf, at::kBFloat16}) {
    torch::Tensor w = torch::tensor({0.5f, -0.25f, 1.0f}).to(half).requires_grad_(true);
    torch::Tensor z = torch::zeros({2}, torch::dtype(half)).requires_grad_(true);
    torch::Tensor w32 = w.detach().to(at::kFloat).requires_grad_(true);
    torch::Tensor z32 = z.detach().to(at::kFloat).requires_grad_(true);
    AdamWOptimizer opt({w, z}, AdamWOptions{});
    AdamWOptimizer ref({w32, z32}, AdamWOptions{});
    w.mutable_grad() = torch::tensor({0.1f, 0.2f, -0.3f}).to(half);
    z.mutable_grad() = torch::zeros({2}, torch::dtype(half));
    w32.mutable_grad() = w.grad().to(at::kFloat);
    z32.mutable_grad() = torch::zeros({2});
    opt.step(1e-3);
    ref.step(1e-3);
    EXPECT_EQ(w.scalar_type(), half);
    EXPECT_TRUE(torch::isfinite(w).all().item<bool>());
    EXPECT_TRUE(torch::isfinite(z).all().item<bool>());
    EXPECT_TRUE(torch::equal(w, w32.detach().to(half)));
    EXPECT_TRUE(torch::equal(z, torch::zeros({2}, torch::dtype(half))));
    const auto state = opt.state_dict({"w", "z"});
    EXPECT_EQ(state.at("w.exp_avg_sq").scalar_type(), at::kFloat);
    EXPECT_EQ(state.at("step").item<int64_t>(), 1);
    // Restored into a fresh optimizer, the next step is the same.
    torch::Tensor w2 = w.detach().clone().requires_grad_(true);
    torch::Tensor z2 = z.detach().clone().requires_grad_(true);
    AdamWOptimizer again({w2, z2}, AdamWOptions{});
    again.load_state_dict(state, {"w", "z"});
    for (auto* p : {&w, &w2}) p->mutable_grad() = torch::tensor({0.3f, 0.1f, 0.2f}).to(half);
    for (auto* p : {&z, &z2}) p->mutable_grad() = torch::zeros({2}, torch::dtype(half));
    opt.step(1e-3);
    again.step(1e-3);
    EXPECT_TRUE(torch::equal(w, w2));
  }
}

}  // namespace
}  // namespace lf
