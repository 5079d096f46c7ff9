// DDPMNoiseSchedule against diffusers' DDPMScheduler (scaled_linear 0.00085..0.012, T = 1000,
// prediction_type "v_prediction") on tests/fixtures/oracle/ddpm_v_prediction.safetensors
// (tests/oracle/make_schedule_fixture.py): add_noise and the v-prediction target
// v = sqrt(abar_t) noise - sqrt(1 - abar_t) x0, max |diff| <= 1e-6 (fp32).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "train/noise_schedule.h"
#include "worker/io/tensor_file.h"

namespace lf {
namespace {

constexpr double kAtol = 1e-6;

LoadedTensors fixture() {
  return load_safetensors(LF_SOURCE_DIR "/tests/fixtures/oracle/ddpm_v_prediction.safetensors");
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

TEST(OracleSchedule, AddNoiseMatchesDiffusers) {
  const auto fx = fixture();
  const DDPMNoiseSchedule schedule;
  const torch::Tensor got = schedule.add_noise(fx.tensors.at("sched.x0"),
                                               fx.tensors.at("sched.noise"),
                                               fx.tensors.at("sched.t"));
  ASSERT_EQ(got.sizes(), fx.tensors.at("sched.noisy").sizes());
  EXPECT_LE(max_diff(got, fx.tensors.at("sched.noisy")), kAtol);
}

// The v_parameterization target (SD 2.x 768-v).
TEST(OracleSchedule, VelocityMatchesDiffusersGetVelocity) {
  const auto fx = fixture();
  const DDPMNoiseSchedule schedule;
  const torch::Tensor got = schedule.velocity(fx.tensors.at("sched.x0"),
                                              fx.tensors.at("sched.noise"),
                                              fx.tensors.at("sched.t"));
  ASSERT_EQ(got.sizes(), fx.tensors.at("sched.velocity").sizes());
  // diffusers takes cumprod and sqrt in float32, lorafleet in float64 (see noise_schedule.h):
  // sqrt(1 - abar) at small t amplifies that float32 rounding to ~1.4e-6 on values up to ~4.
  EXPECT_LE(max_diff(got, fx.tensors.at("sched.velocity")), 1e-5);
}

}  // namespace
}  // namespace lf
