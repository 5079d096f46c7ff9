// Seeded random initialisation of the SD networks and the random single-file checkpoints
// (SD 1.x / 2.x / XL layouts) used by the CPU demo and the tests.
#include "model/checkpoint.h"

#include <cmath>
#include <functional>
#include <stdexcept>
#include <unordered_set>

#include <torch/torch.h>

#include "model/clip_text_model.h"
#include "model/lora_compatible.h"
#include "model/state_dict.h"
#include "model/unet.h"
#include "model/vae_decoder.h"
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
        m.as<LoRACompatibleLinearImpl>() || m.as<LoRACompatibleConvImpl>()) {
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

namespace {

// Sets the default dtype for the guard's lifetime (parameters are created with it).
class DefaultDtypeGuard {
 public:
  explicit DefaultDtypeGuard(caffe2::TypeMeta dtype) : saved_(torch::get_default_dtype()) {
    torch::set_default_dtype(dtype);
  }
  ~DefaultDtypeGuard() { torch::set_default_dtype(saved_); }
  DefaultDtypeGuard(const DefaultDtypeGuard&) = delete;
  DefaultDtypeGuard& operator=(const DefaultDtypeGuard&) = delete;

 private:
  caffe2::TypeMeta saved_;
};

using ExportFn = std::function<WeightMap()>;

// Calls fn(k, module, export) for every network of the preset, one at a time (each module is
// dropped before the next is built); export() returns the module's weights under its checkpoint
// prefix and layout.
template <typename Fn>
void for_each_part(const ModelPreset& preset, Fn&& fn) {
  {
    UNetModel unet(preset.unet);
    fn(0, *unet, ExportFn([&] { return module_weights(*unet, kUNetCheckpointPrefix); }));
  }
  {
    VAEEncoder vae(preset.vae);
    fn(1, *vae, ExportFn([&] { return module_weights(*vae, kVAECheckpointPrefix); }));
  }
  {
    VAEDecoder vae(preset.vae);
    fn(3, *vae, ExportFn([&] { return module_weights(*vae, kVAECheckpointPrefix); }));
  }
  for (size_t i = 0; i < preset.text_encoders.size(); ++i) {
    const TextEncoderSpec& spec = preset.text_encoders[i];
    CLIPTextModel text(spec.config);
    const uint64_t k = i == 0 ? 2 : 3 + i;
    fn(k, *text, ExportFn([&] {
         WeightMap w = text_encoder_weights(text, spec.checkpoint_prefix, spec.layout);
         if (spec.layout == TextEncoderLayout::kOpenCLIP) {
           // open_clip's CLIP keeps its contrastive temperature beside the text tower and real
           // SD 2.x / SDXL files carry it (initial value log(1 / 0.07)); loading ignores it.
           w.emplace(spec.checkpoint_prefix + "logit_scale",
                     torch::tensor(std::log(1.0 / 0.07), torch::dtype(torch::kFloat32)));
         }
         return w;
       }));
  }
}

}  // namespace

std::unordered_map<std::string, torch::Tensor> make_random_checkpoint(const ModelPreset& preset,
                                                                      uint64_t seed,
                                                                      at::ScalarType dtype) {
  WeightMap out;
  for_each_part(preset, [&](uint64_t k, torch::nn::Module& m, const ExportFn& export_weights) {
    at::Generator gen = make_cpu_generator(mix_seed(seed, k, 0));
    init_random_parameters(m, gen);
    for (auto& kv : export_weights()) {
      out.emplace(kv.first, kv.second.scalar_type() == dtype ? kv.second : kv.second.to(dtype));
    }
  });
  return out;
}

KeyShapes random_checkpoint_key_shapes(const ModelPreset& preset) {
  DefaultDtypeGuard bf16(caffe2::TypeMeta::Make<at::BFloat16>());
  KeyShapes shapes;
  for_each_part(preset, [&](uint64_t, torch::nn::Module&, const ExportFn& export_weights) {
    for (auto& kv : export_weights()) {
      shapes.emplace(kv.first,
                     std::vector<int64_t>(kv.second.sizes().begin(), kv.second.sizes().end()));
    }
  });
  return shapes;
}

}  // namespace lf
