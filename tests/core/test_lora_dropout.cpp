// kohya LoRAModule's training-time dropouts (model/lora_dropout.h) on one LoRA-compatible layer:
// rank dropout and network dropout equal kohya's formulas on the stream's own draws, module
// dropout skips the adapter, the same stream gives the same bytes, and nothing is dropped
// without a stream, under no-grad, or with the probabilities at 0.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include <torch/torch.h>

#include "model/lora_compatible.h"
#include "model/lora_dropout.h"
#include "train/seeding.h"

namespace lf {
namespace {

bool same_bytes(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

// A Linear 16 -> 12 with a rank-4 adapter (alpha 2: scale 0.5), non-zero up.
struct AdaptedLinear {
  AdaptedLinear(LoRADropout dropout) : layer(16, 12) {
    at::Generator gen = make_cpu_generator(9);
    adapter = std::make_shared<LoRAAdapter>();
    adapter->down = torch::randn({4, 16}, gen).requires_grad_(true);
    adapter->up = torch::randn({12, 4}, gen).requires_grad_(true);
    adapter->scale = 0.5;
    adapter->dropout = dropout;
    layer->set_adapter(adapter);
    x = torch::randn({3, 5, 16}, gen);  // [B, T, in], as the text encoders' and UNet's layers
  }
  torch::Tensor base() const { return at::linear(x, layer->weight(), layer->bias()); }
  torch::Tensor no_dropout() const {
    return base() + 0.5 * at::linear(at::linear(x, adapter->down), adapter->up);
  }
  LoRACompatibleLinear layer;
  std::shared_ptr<LoRAAdapter> adapter;
  torch::Tensor x;
};

TEST(LoRADropout, RankDropoutIsKohyasPerSampleMaskAndScale) {
  AdaptedLinear l(LoRADropout{0.0, 0.5, 0.0});
  torch::Tensor y;
  {
    LoRADropoutScope scope(make_cpu_generator(33));
    y = l.layer->forward(l.x);
  }
  // kohya: mask = rand(B, r) > p, broadcast over the tokens, scale * 1 / (1 - p).
  at::Generator gen = make_cpu_generator(33);
  const torch::Tensor mask = (torch::rand({3, 4}, gen) > 0.5).to(torch::kFloat).unsqueeze(1);
  ASSERT_GT(mask.sum().item<double>(), 0.0);
  ASSERT_LT(mask.sum().item<double>(), 12.0);
  const torch::Tensor expected =
      l.base() + at::linear(at::linear(l.x, l.adapter->down) * mask, l.adapter->up) * (0.5 * 2.0);
  EXPECT_LT((y - expected).abs().max().item<double>(), 1e-5);
}

TEST(LoRADropout, NetworkDropoutIsTorchDropoutOfTheDownOutput) {
  AdaptedLinear l(LoRADropout{0.3, 0.0, 0.0});
  torch::Tensor y;
  {
    LoRADropoutScope scope(make_cpu_generator(34));
    y = l.layer->forward(l.x);
  }
  at::Generator gen = make_cpu_generator(34);
  const torch::Tensor keep = (torch::rand({3, 5, 4}, gen) > 0.3).to(torch::kFloat);
  const torch::Tensor lx = at::linear(l.x, l.adapter->down) * (keep / 0.7);
  const torch::Tensor expected = l.base() + at::linear(lx, l.adapter->up) * 0.5;
  EXPECT_LT((y - expected).abs().max().item<double>(), 1e-5);
  // About 30% of the down outputs were dropped.
  EXPECT_NEAR(1.0 - keep.mean().item<double>(), 0.3, 0.15);
}

TEST(LoRADropout, ModuleDropoutSkipsTheAdapterWithItsProbability) {
  AdaptedLinear l(LoRADropout{0.0, 0.0, 0.5});
  LoRADropoutScope scope(make_cpu_generator(35));
  at::Generator replay = make_cpu_generator(35);
  int skipped = 0;
  for (int i = 0; i < 40; ++i) {
    const bool skip = torch::rand({1}, replay).item<float>() < 0.5f;  // kohya: rand(1) < p
    const torch::Tensor y = l.layer->forward(l.x);
    if (skip) {
      EXPECT_TRUE(same_bytes(y, l.base())) << "call " << i << " should be the base layer alone";
    } else {
      EXPECT_LT((y - l.no_dropout()).abs().max().item<double>(), 1e-6) << "call " << i;
    }
    skipped += skip;
  }
  EXPECT_GT(skipped, 5);
  EXPECT_LT(skipped, 35);
}

TEST(LoRADropout, SameStreamSameBytesAndNothingDroppedOutsideTraining) {
  const LoRADropout all{0.3, 0.3, 0.2};
  AdaptedLinear l(all);
  auto step = [&l](std::uint64_t seed) {
    LoRADropoutScope scope(make_cpu_generator(seed));
    torch::Tensor a = l.layer->forward(l.x);
    torch::Tensor b = l.layer->forward(l.x);  // a second call draws the next masks
    return torch::cat({a, b});
  };
  EXPECT_TRUE(same_bytes(step(40), step(40)));
  EXPECT_FALSE(same_bytes(step(40), step(41)));
  const torch::Tensor plain = l.layer->forward(l.x);  // no stream installed
  EXPECT_LT((plain - l.no_dropout()).abs().max().item<double>(), 1e-6);
  {
    // A no-grad forward (evaluation, sampling) drops nothing even inside a training stream,
    // and draws nothing from it.
    at::Generator gen = make_cpu_generator(42);
    const torch::Tensor before = gen.get_state();
    LoRADropoutScope scope(gen);
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(same_bytes(l.layer->forward(l.x), plain.detach()));
    EXPECT_TRUE(same_bytes(gen.get_state(), before));
  }
  // Probabilities of 0 (kohya's None) draw nothing either.
  AdaptedLinear off(LoRADropout{});
  at::Generator gen = make_cpu_generator(43);
  const torch::Tensor before = gen.get_state();
  LoRADropoutScope scope(gen);
  EXPECT_TRUE(same_bytes(off.layer->forward(off.x), off.layer->forward(off.x)));
  EXPECT_TRUE(same_bytes(gen.get_state(), before));
}

TEST(LoRADropout, ConvRankMaskCoversEachChannelOfEachSample) {
  LoRACompatibleConv conv(6, 8, 3, 1, 1);
  at::Generator gen = make_cpu_generator(10);
  auto a = std::make_shared<LoRAAdapter>();
  a->down = torch::randn({4, 6, 3, 3}, gen);
  a->up = torch::randn({8, 4, 1, 1}, gen);
  a->scale = 0.25;
  a->dropout.rank_dropout = 0.5;
  conv->set_adapter(a);
  const torch::Tensor x = torch::randn({2, 6, 5, 5}, gen);
  torch::Tensor y;
  {
    LoRADropoutScope scope(make_cpu_generator(50));
    y = conv->forward(x);
  }
  at::Generator replay = make_cpu_generator(50);
  const torch::Tensor mask =
      (torch::rand({2, 4}, replay) > 0.5).to(torch::kFloat).view({2, 4, 1, 1});
  const torch::Tensor lx = at::conv2d(x, a->down, {}, 1, 1) * mask;
  const torch::Tensor expected =
      at::conv2d(x, conv->weight(), conv->bias(), 1, 1) + at::conv2d(lx, a->up) * (0.25 * 2.0);
  EXPECT_LT((y - expected).abs().max().item<double>(), 1e-5);
}

}  // namespace
}  // namespace lf
