// Seeded random initialisation of the SD networks and the random single-file-style checkpoint
// used by the CPU demo and the tests.
#include "model/checkpoint.h"

#include <cmath>
#include <stdexcept>
#include <unordered_set>

#include <torch/torch.h>

#include "model/clip_text_model.h"
#include "model/lora_compatible.h"
#include "model/state_dict.h"
#include "model/unet.h"
#include "model/vae_encoder.h"
#include "train/seeding.h"

namespace lf {

void init_random_parameters(torch::nn::Module& module, at::Generator& generator) {
  torch::NoGradGuard no_grad;
  std::unordered_set<const void*> done;
  auto uniform_fan_in = [&](torch::nn::Module& m) {
    auto params = m.named_parameters(/*recurse=*/false);
    torch::Tensor* weight = params.find("weight");
    if (!weight) return;
    const double fan_in = static_cast<double>(weight->numel() / weight->size(0));
    const double bound = 1.0 / std::sqrt(fan_in);
    for (auto& p : params) {
      p.value().uniform_(-bound, bound, generator);
      done.insert(p.value().unsafeGetTensorImpl());
    }
  };
  auto ones_zeros = [&](torch::nn::Module& m) {
    for (auto& p : m.named_parameters(/*recurse=*/false)) {
      if (p.key() == "weight") {
        p.value().fill_(1.0);
      } else {
        p.value().zero_();
      }
      done.insert(p.value().unsafeGetTensorImpl());
    }
  };
  for (const auto& item : module.named_modules()) {
    torch::nn::Module& m = *item.value();
    if (m.as<torch::nn::LinearImpl>() || m.as<torch::nn::Conv2dImpl>() ||
        m.as<LoRACompatibleLinearImpl>() || m.as<LoRACompatibleConv1x1Impl>()) {
      uniform_fan_in(m);
    } else if (m.as<torch::nn::GroupNormImpl>() || m.as<torch::nn::LayerNormImpl>()) {
      ones_zeros(m);
    } else if (m.as<torch::nn::EmbeddingImpl>()) {
      for (auto& p : m.named_parameters(/*recurse=*/false)) {
        p.value().normal_(0.0, 0.02, generator);
        done.insert(p.value().unsafeGetTensorImpl());
      }
    }
  }
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    if (!done.count(p.value().unsafeGetTensorImpl())) {
      throw std::logic_error("init_random_parameters: no init rule for parameter " + p.key());
    }
  }
}

std::unordered_map<std::string, torch::Tensor> make_random_checkpoint(const ModelPreset& preset,
                                                                      uint64_t seed) {
  WeightMap out;
  auto add = [&](torch::nn::Module& m, uint64_t index, const std::string& prefix) {
    at::Generator gen = make_cpu_generator(mix_seed(seed, index, 0));
    init_random_parameters(m, gen);
    for (auto& kv : module_weights(m, prefix)) out.emplace(kv.first, kv.second);
  };
  UNetModel unet(preset.unet);
  add(*unet, 0, kUNetCheckpointPrefix);
  VAEEncoder vae(preset.vae);
  add(*vae, 1, kVAECheckpointPrefix);
  CLIPTextModel text(preset.text);
  add(*text, 2, kCLIPTextCheckpointPrefix);
  return out;
}

}  // namespace lf
