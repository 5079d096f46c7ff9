// Every network of one Stable Diffusion model (SD 1.x / 2.x / XL) built from a ModelPreset and
// loaded from one original-layout single-file checkpoint, as ldm / sgm instantiate_from_config
// plus load_state_dict(strict=True) over the whole LatentDiffusion / DiffusionEngine.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include "model/clip_text_model.h"
#include "model/model_config.h"
#include "model/unet.h"
#include "model/vae_decoder.h"
#include "model/vae_encoder.h"

namespace lf {

struct SDModels {
  ModelPreset preset;
  UNetModel unet{nullptr};
  VAEEncoder vae_encoder{nullptr};
  VAEDecoder vae_decoder{nullptr};           // null unless built with_decoder
  std::vector<CLIPTextModel> text_encoders;  // one per preset.text_encoders, same order
};

// Parameter dtypes of the networks, as kohya puts them: weight_dtype for the UNet and the text
// encoders, vae_dtype for the VAE (decoder included).
struct SDModelDtypes {
  at::ScalarType unet = at::kFloat;
  at::ScalarType vae = at::kFloat;
  at::ScalarType text_encoders = at::kFloat;
};

// Builds every network of `preset` (CPU, torch default init, frozen), each part's parameters
// created directly in its `dtypes` entry (a half-precision SDXL UNet never exists in fp32); the
// VAE decoder only when `with_decoder`. Throws std::invalid_argument for inconsistent configs.
SDModels build_sd_models(const ModelPreset& preset, bool with_decoder,
                         const SDModelDtypes& dtypes = {});

// Loads every built part of `models` from `weights` (full checkpoint keys), converting fp16 /
// bf16 / fp64 to each parameter's dtype and keeping its device. Every part is tried and all
// errors are reported together; a failing part copies nothing, but the others may be loaded,
// so discard `models` after an error. Keys ignored everywhere: "alphas_cumprod*", "betas",
// "model_ema.*",
// "*position_ids", "*logit_scale", and any top-level prefix that belongs to no part (e.g.
// "cond_stage_model." of another family, "lora_*"): only the keys under the parts' prefixes are
// checked, as the ldm state dict holds training-only buffers beside the networks. With no
// decoder built, first_stage_model.decoder.* / post_quant_conv.* are accepted and skipped.
// Throws std::runtime_error listing, per part, the missing keys (first few + count), the shape
// mismatches (key, expected, found) and the unexpected keys under that part's prefix.
void load_sd_models(SDModels& models,
                    const std::unordered_map<std::string, torch::Tensor>& weights);

}  // namespace lf
