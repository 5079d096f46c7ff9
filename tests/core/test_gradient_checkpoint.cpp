// Gradient checkpointing (model/gradient_checkpoint.h) on the tiny SD 1.x and SDXL-like models,
// fp32 on the CPU: with the UNet's ResBlocks and transformer blocks and the text encoders'
// layers recomputed in backward, the loss and every LoRA gradient (UNet, LoCon convs, both
// text encoders) are bit-identical to the run without it, and the recompute draws no random
// numbers; with kohya's LoRA dropouts on, the recompute replays the forward's masks, so the
// results are bit-identical too. Also the autograd Function on its own: input and parameter
// gradients, undefined and grad-free inputs, and the autocast state re-entered by the recompute.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <torch/torch.h>

#include "lora/lora_network.h"
#include "model/checkpoint.h"
#include "model/gradient_checkpoint.h"
#include "model/lora_dropout.h"
#include "model/model_config.h"
#include "model/sd_models.h"
#include "model/unet.h"
#include "train/autocast.h"
#include "train/noise_schedule.h"
#include "train/seeding.h"
#include "train/train_step.h"

namespace lf {
namespace {

bool same_bytes(const torch::Tensor& a, const torch::Tensor& b) {
  return a.defined() && b.defined() && a.sizes() == b.sizes() &&
         a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

struct StepGrads {
  double loss = 0.0;
  std::map<std::string, torch::Tensor> grads;  // by LoRA parameter name
  torch::Tensor generator_state;               // the noise generator after the step
  torch::Tensor global_generator_state;        // the default CPU generator after the step
  torch::Tensor dropout_state;                 // the LoRA dropout stream after the step
};

// One training step of a LoRA on UNet + text encoders (their LoRA trains, so the context and
// SDXL's pooled vector carry gradients), with non-zero lora_up so every gradient is non-zero.
class CheckpointedStep {
 public:
  explicit CheckpointedStep(const std::string& preset_name, LoRADropout dropout = {})
      : models_(build_sd_models(model_preset(preset_name), /*with_decoder=*/false)) {
    load_sd_models(models_, make_random_checkpoint(models_.preset, 11));
    LoRANetworkOptions options;
    options.network_dim = 2;
    options.network_alpha = 1.0;
    options.conv_dim = 2;  // LoCon: the ResBlock convs carry adapters too
    options.dropout = dropout;
    at::Generator init = make_cpu_generator(5);
    const bool sdxl = models_.preset.family == ModelFamily::kSDXL;
    lora_ = std::make_unique<LoRANetwork>(models_.unet, unet_lora_naming(models_.unet, sdxl),
                                          kohya_text_encoder_targets(models_), options, init);
    torch::NoGradGuard no_grad;
    at::Generator up = make_cpu_generator(6);
    for (const torch::Tensor& p : lora_->parameters()) p.normal_(0.0, 0.05, up);
  }

  std::size_t set_checkpointing(bool on) {
    std::size_t n = models_.unet->set_gradient_checkpointing(on);
    for (auto& te : models_.text_encoders) n += te->set_gradient_checkpointing(on);
    return n;
  }

  StepGrads run(int64_t b) {
    // The training step's dropout stream, over the text encoders, the UNet and the backward.
    at::Generator dropout_gen = make_cpu_generator(21);
    std::optional<LoRADropoutScope> dropout;
    if (lora_->options().dropout.any()) dropout.emplace(dropout_gen);
    const ModelPreset& preset = models_.preset;
    torch::Tensor ids = torch::randint(1, 400, {b, 77}, make_cpu_generator(7), torch::kInt64);
    ids.index_put_({torch::indexing::Slice(), 20}, preset.text_encoders[0].config.eos_token_id);
    std::vector<torch::Tensor> hidden;
    torch::Tensor pooled;
    for (std::size_t i = 0; i < models_.text_encoders.size(); ++i) {
      const TextEncoderSpec& spec = preset.text_encoders[i];
      // As TextEncoderStack: only the last encoder's pooled output is used (SDXL's bigG).
      const bool pooled_used = i + 1 == models_.text_encoders.size();
      CLIPTextOutput out = models_.text_encoders[i]->forward(
          ids, spec.hidden_layer_from_end, spec.apply_final_layer_norm, pooled_used);
      hidden.push_back(out.hidden);
      pooled = out.pooled;
    }
    StepInputs in;
    in.latents = torch::randn({b, 4, 8, 8}, make_cpu_generator(8), torch::kFloat32);
    in.context = torch::cat(hidden, /*dim=*/-1);
    if (preset.unet.adm_in_channels > 0) {
      torch::Tensor sizes = torch::tensor({64.f, 64.f, 0.f, 0.f, 64.f, 64.f}).repeat({b, 1});
      in.vector_cond = sdxl_vector_conditioning(pooled, sizes, preset.unet.adm_time_embed_dim);
    }
    in.loss_weights = torch::linspace(1.0, 0.5, b);
    for (const torch::Tensor& p : lora_->parameters()) p.mutable_grad().reset();
    at::Generator gen = make_cpu_generator(mix_seed(3, 0, 1));
    torch::Tensor loss = compute_loss_sum(models_.unet, schedule_, in, gen) / b;
    loss.backward();
    StepGrads out;
    out.loss = loss.item<double>();
    const std::vector<std::string> names = lora_->parameter_names();
    const std::vector<torch::Tensor> params = lora_->parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      // Modules after the selected layer of an encoder without pooled output get none.
      if (params[i].grad().defined()) out.grads[names[i]] = params[i].grad().clone();
    }
    out.generator_state = gen.get_state();
    out.global_generator_state = at::detail::getDefaultCPUGenerator().get_state();
    out.dropout_state = dropout_gen.get_state();
    return out;
  }

  LoRANetwork& lora() { return *lora_; }

 private:
  SDModels models_;
  std::unique_ptr<LoRANetwork> lora_;
  DDPMNoiseSchedule schedule_;
};

// (preset, per-rank batch): batch 1 has size-1 strides that kernels treat specially.
class GradientCheckpointing
    : public ::testing::TestWithParam<std::tuple<std::string, int64_t>> {};

TEST_P(GradientCheckpointing, LoRAGradientsAreBitIdenticalWithAndWithoutIt) {
  const auto& [preset, batch] = GetParam();
  CheckpointedStep step(preset);
  const StepGrads plain = step.run(batch);
  const std::size_t blocks = step.set_checkpointing(true);
  EXPECT_GT(blocks, 10u);  // ResBlocks, transformer blocks and text-encoder layers
  const StepGrads ckpt = step.run(batch);
  step.set_checkpointing(false);
  const StepGrads again = step.run(batch);

  EXPECT_EQ(plain.loss, ckpt.loss);
  ASSERT_EQ(plain.grads.size(), ckpt.grads.size());
  // All but the modules on layers no output depends on (SDXL: CLIP-L's last layer).
  ASSERT_GE(plain.grads.size(), step.lora().parameters().size() - 12);
  std::size_t te = 0;
  for (const auto& [name, g] : plain.grads) {
    EXPECT_GT(g.abs().sum().item<double>(), 0.0) << name << " received no gradient";
    ASSERT_TRUE(ckpt.grads.count(name)) << name;
    EXPECT_TRUE(same_bytes(g, ckpt.grads.at(name))) << name << ": max |diff| "
                                                    << (g - ckpt.grads.at(name)).abs().max();
    EXPECT_TRUE(same_bytes(g, again.grads.at(name))) << name;
    te += name.rfind("lora_te", 0) == 0;
  }
  EXPECT_GT(te, 0u) << "the text encoders' LoRA must be part of the comparison";
  // The recompute drew nothing: both generators end where the plain run left them.
  EXPECT_TRUE(same_bytes(plain.generator_state, ckpt.generator_state));
  EXPECT_TRUE(same_bytes(plain.global_generator_state, ckpt.global_generator_state));
}

INSTANTIATE_TEST_SUITE_P(TinyModels, GradientCheckpointing,
                         ::testing::Combine(::testing::Values(std::string("tiny"),
                                                              std::string("tiny-sdxl")),
                                            ::testing::Values(int64_t{1}, int64_t{2})));

// kohya's network_dropout, rank_dropout and module_dropout on every module: the recompute of each
// checkpointed block draws the masks its forward drew (the stream's state is replayed), so loss
// and gradients are bit-identical with and without checkpointing, and the stream ends at the
// same state (the recompute drew from a copy). The dropouts do act: the gradients differ from
// the run without them.
TEST_P(GradientCheckpointing, LoRADropoutMasksAreReplayedByTheRecompute) {
  const auto& [preset, batch] = GetParam();
  CheckpointedStep step(preset, LoRADropout{0.25, 0.25, 0.1});
  const StepGrads plain = step.run(batch);
  step.set_checkpointing(true);
  const StepGrads ckpt = step.run(batch);
  EXPECT_EQ(plain.loss, ckpt.loss);
  ASSERT_EQ(plain.grads.size(), ckpt.grads.size());
  ASSERT_GT(plain.grads.size(), 20u);
  for (const auto& [name, g] : plain.grads) {
    ASSERT_TRUE(ckpt.grads.count(name)) << name;
    EXPECT_TRUE(same_bytes(g, ckpt.grads.at(name)))
        << name << ": max |diff| " << (g - ckpt.grads.at(name)).abs().max();
  }
  EXPECT_TRUE(same_bytes(plain.dropout_state, ckpt.dropout_state));
  EXPECT_TRUE(same_bytes(plain.global_generator_state, ckpt.global_generator_state));

  CheckpointedStep without(preset);
  const StepGrads none = without.run(batch);
  EXPECT_NE(plain.loss, none.loss);
  // Module dropout skipped some modules (no gradient), the masks changed the others.
  EXPECT_LT(plain.grads.size(), none.grads.size());
  std::size_t differ = 0;
  for (const auto& [name, g] : plain.grads) differ += !same_bytes(g, none.grads.at(name));
  EXPECT_EQ(differ, plain.grads.size());
}

TEST(CheckpointFunction, GradientsOfInputsAndParamsMatchTheDirectGraph) {
  torch::Tensor w = torch::randn({3, 3}, make_cpu_generator(1)).requires_grad_(true);
  torch::Tensor x = torch::randn({2, 3}, make_cpu_generator(2)).requires_grad_(true);
  torch::Tensor frozen = torch::randn({2, 3}, make_cpu_generator(3));  // needs no gradient
  const CheckpointBody body = [&w](const std::vector<torch::Tensor>& in) {
    torch::Tensor h = torch::tanh(at::linear(in[0], w)) * in[1];
    return in[2].defined() ? h + in[2] : h;
  };
  torch::Tensor direct = body({x, frozen, torch::Tensor()}).sum();
  direct.backward();
  const torch::Tensor gx = x.grad().clone(), gw = w.grad().clone();
  x.mutable_grad().reset();
  w.mutable_grad().reset();

  int begins = 0, recomputes = 0;
  auto hooks = std::make_shared<CheckpointHooks>();
  hooks->begin = [&](bool recompute) {
    ++begins;
    recomputes += recompute;
  };
  torch::Tensor out = checkpointed(body, {x, frozen, torch::Tensor()}, {w}, hooks);
  EXPECT_TRUE(out.requires_grad());
  EXPECT_EQ(begins, 1);  // the forward ran once, without a graph
  out.sum().backward();
  EXPECT_EQ(recomputes, 1);
  EXPECT_TRUE(same_bytes(x.grad(), gx));
  EXPECT_TRUE(same_bytes(w.grad(), gw));
  EXPECT_FALSE(frozen.grad().defined());

  // A body whose inputs need no gradient still trains its parameters.
  w.mutable_grad().reset();
  checkpointed(body, {x.detach(), frozen, torch::Tensor()}, {w}).sum().backward();
  EXPECT_TRUE(same_bytes(w.grad(), gw));
}

TEST(CheckpointFunction, RecomputeRunsUnderTheForwardsAutocast) {
  torch::Tensor w = torch::randn({4, 4}, make_cpu_generator(1)).requires_grad_(true);
  torch::Tensor x = torch::randn({2, 4}, make_cpu_generator(2));
  std::vector<at::ScalarType> seen;
  const CheckpointBody body = [&](const std::vector<torch::Tensor>& in) {
    torch::Tensor y = at::linear(in[0], w);
    seen.push_back(y.scalar_type());
    return y.to(torch::kFloat32);
  };
  torch::Tensor out;
  {
    AutocastScope amp(c10::DeviceType::CPU, at::kBFloat16);
    out = checkpointed(body, {x}, {w});
  }
  out.sum().backward();  // outside the region, as the training step's backward
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], at::kBFloat16);
  EXPECT_EQ(seen[1], at::kBFloat16);
  EXPECT_FALSE(autocast_state(c10::DeviceType::CPU).enabled);
  EXPECT_GT(w.grad().abs().sum().item<double>(), 0.0);
}

}  // namespace
}  // namespace lf
