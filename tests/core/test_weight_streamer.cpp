// Weight streaming (offload/weight_streamer.h) on the CPU's synchronous transfer engine: with
// every UNet block streamed, a training step's LoRA gradients are bit-identical to the resident
// run, every block's weights are copied twice (forward and recompute) and never more than
// `streams` blocks hold device copies; a no-grad forward streams too; a block that does not
// checkpoint is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include <torch/torch.h>

#include "lora/lora_network.h"
#include "model/checkpoint.h"
#include "model/model_config.h"
#include "model/unet.h"
#include "offload/weight_streamer.h"
#include "train/seeding.h"

namespace lf {
namespace {

std::vector<WeightStreamer::Unit> units_of(UNetModel& unet) { return streamable_units(*unet); }

class Streaming : public ::testing::Test {
 protected:
  Streaming() : unet_(model_preset("tiny").unet) {
    at::Generator init = make_cpu_generator(3);
    init_random_parameters(*unet_, init);
    lora_ = std::make_unique<LoRANetwork>(unet_, 2, 1.0, init);
    torch::NoGradGuard no_grad;
    for (const auto& p : lora_->parameters()) p.normal_(0.0, 0.05, init);
    unet_->set_gradient_checkpointing(true);
  }
  std::vector<torch::Tensor> step() {
    for (const auto& p : lora_->parameters()) p.mutable_grad().reset();
    torch::Tensor x = torch::randn({2, 4, 8, 8}, make_cpu_generator(4));
    torch::Tensor ctx = torch::randn({2, 77, 64}, make_cpu_generator(5));
    unet_->forward(x, torch::tensor({10, 900}), ctx).square().mean().backward();
    std::vector<torch::Tensor> grads;
    for (const auto& p : lora_->parameters()) grads.push_back(p.grad().clone());
    return grads;
  }
  UNetModel unet_;
  std::unique_ptr<LoRANetwork> lora_;
};

TEST_F(Streaming, EveryBlockStreamedGivesTheResidentGradients) {
  const std::vector<torch::Tensor> resident = step();
  std::vector<WeightStreamer::Unit> units = units_of(unet_);
  ASSERT_GT(units.size(), 8u);
  auto bytes_of = [](const WeightStreamer::Unit& u) {
    std::int64_t n = 0;
    for (const auto& p : u.module->parameters()) n += p.nbytes();
    return n;
  };
  std::int64_t unit_bytes = 0;
  for (const auto& u : units) unit_bytes += bytes_of(u);
  // The first ResBlock (no LoRA without conv_dim) sees only frozen inputs: its output needs no
  // gradient and backward does not recompute it, but prefetches it while recomputing the second.
  ASSERT_EQ(units[0].name, "input_blocks.1.0");
  const std::int64_t first = bytes_of(units[0]);
  {
    WeightStreamer streamer(units, std::vector<bool>(units.size(), false), at::Device(at::kCPU),
                            /*streams=*/2);
    EXPECT_EQ(streamer.num_streamed(), units.size());
    const std::vector<torch::Tensor> streamed = step();
    ASSERT_EQ(streamed.size(), resident.size());
    for (std::size_t i = 0; i < streamed.size(); ++i) {
      EXPECT_TRUE(torch::equal(streamed[i], resident[i])) << i;
    }
    EXPECT_EQ(streamer.bytes_copied(), 2 * unit_bytes);  // forward + recompute
    EXPECT_EQ(streamer.max_in_flight(), 2);
    torch::NoGradGuard no_grad;  // inference goes through the hooks too
    unet_->forward(torch::zeros({1, 4, 8, 8}), torch::tensor({1}), torch::zeros({1, 77, 64}));
    // The first block's backward prefetch serves the next forward.
    EXPECT_EQ(streamer.bytes_copied(), 3 * unit_bytes - first);
  }
  // Half resident: only the others are copied.
  std::vector<bool> plan(units.size(), true);
  std::int64_t streamed_bytes = 0;
  for (std::size_t i = 0; i < units.size(); i += 2) {
    plan[i] = false;
    for (const auto& p : units[i].module->parameters()) streamed_bytes += p.nbytes();
  }
  WeightStreamer half(units, plan, at::Device(at::kCPU), 1);
  const std::vector<torch::Tensor> again = step();
  for (std::size_t i = 0; i < again.size(); ++i) EXPECT_TRUE(torch::equal(again[i], resident[i]));
  // One stream: no prefetch, so the first block (never recomputed) is copied once.
  EXPECT_EQ(half.bytes_copied(), 2 * streamed_bytes - first);
  EXPECT_EQ(half.max_in_flight(), 1);
}

TEST_F(Streaming, ABlockThatDoesNotCheckpointIsRefused) {
  unet_->set_gradient_checkpointing(false);
  std::vector<WeightStreamer::Unit> units = units_of(unet_);
  EXPECT_THROW(WeightStreamer(units, std::vector<bool>(units.size(), false),
                              at::Device(at::kCPU), 2),
               std::invalid_argument);
}

}  // namespace
}  // namespace lf
