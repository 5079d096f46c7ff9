// Building and loading all networks of an SD 1.x / 2.x / XL model from one checkpoint.
#include "model/sd_models.h"

#include <stdexcept>

#include <c10/core/DefaultDtype.h>
#include <torch/torch.h>

#include "model/state_dict.h"

namespace lf {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Keys that single-file checkpoints carry beside the networks (noise schedule buffers, EMA
// copies, HF position_ids buffers, the CLIP logit scale); never an error.
bool globally_ignored(const std::string& key) {
  return starts_with(key, "alphas_cumprod") || key == "betas" || starts_with(key, "model_ema.") ||
         ends_with(key, "position_ids") || ends_with(key, "logit_scale");
}

// Makes `dtype` LibTorch's default dtype (the one modules create their parameters in) while in
// scope.
class DefaultDtypeScope {
 public:
  explicit DefaultDtypeScope(at::ScalarType dtype) : previous_(c10::get_default_dtype()) {
    c10::set_default_dtype(caffe2::TypeMeta::fromScalarType(dtype));
  }
  ~DefaultDtypeScope() { c10::set_default_dtype(previous_); }
  DefaultDtypeScope(const DefaultDtypeScope&) = delete;
  DefaultDtypeScope& operator=(const DefaultDtypeScope&) = delete;

 private:
  caffe2::TypeMeta previous_;
};

}  // namespace

SDModels build_sd_models(const ModelPreset& preset, bool with_decoder,
                         const SDModelDtypes& dtypes) {
  SDModels m;
  m.preset = preset;
  {
    DefaultDtypeScope scope(dtypes.unet);
    m.unet = UNetModel(preset.unet);
  }
  {
    DefaultDtypeScope scope(dtypes.vae);
    m.vae_encoder = VAEEncoder(preset.vae);
    if (with_decoder) m.vae_decoder = VAEDecoder(preset.vae);
  }
  DefaultDtypeScope scope(dtypes.text_encoders);
  for (const TextEncoderSpec& spec : preset.text_encoders) {
    m.text_encoders.emplace_back(spec.config);
  }
  return m;
}

void load_sd_models(SDModels& models,
                    const std::unordered_map<std::string, torch::Tensor>& weights) {
  // Global ignores are applied once by filtering into a view of the remaining keys; the
  // per-part loaders then only look under their own prefixes.
  WeightMap filtered;
  filtered.reserve(weights.size());
  for (const auto& kv : weights) {
    if (!globally_ignored(kv.first)) filtered.emplace(kv.first, kv.second);
  }
  if (models.text_encoders.size() != models.preset.text_encoders.size()) {
    throw std::invalid_argument("load_sd_models: " + std::to_string(models.text_encoders.size()) +
                                " text encoders built for a preset with " +
                                std::to_string(models.preset.text_encoders.size()));
  }
  std::string errors;
  auto attempt = [&](const std::function<void()>& load) {
    try {
      load();
    } catch (const std::runtime_error& e) {
      errors += std::string(errors.empty() ? "" : "\n") + e.what();
    }
  };
  attempt([&] { load_state_dict(models.unet, filtered); });
  // The encoder loader skips the decoder half; with a decoder, its loader skips everything
  // outside decoder.* / post_quant_conv.* so an unknown VAE key is reported once (by the
  // encoder).
  attempt([&] { load_state_dict(models.vae_encoder, filtered); });
  if (models.vae_decoder) {
    attempt([&] {
      auto decoder_only = [](const std::string& key) {
        return !starts_with(key, "decoder.") && !starts_with(key, "post_quant_conv.");
      };
      load_module_weights(*models.vae_decoder, filtered, kVAECheckpointPrefix, decoder_only,
                          "VAEDecoder");
    });
  }
  for (size_t i = 0; i < models.text_encoders.size(); ++i) {
    const TextEncoderSpec& spec = models.preset.text_encoders[i];
    attempt([&] {
      load_state_dict(models.text_encoders[i], filtered, spec.checkpoint_prefix, spec.layout);
    });
  }
  if (!errors.empty()) {
    throw std::runtime_error("cannot load the " + models.preset.name + " (" +
                             family_name(models.preset.family) + ") model:\n" + errors);
  }
}

}  // namespace lf
