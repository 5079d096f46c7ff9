// Deterministic random-weight SD checkpoints for demos and tests: every network of a
// ModelPreset built and initialised from a seed, returned under the original ldm / sgm key
// prefixes and layouts (a complete SD 1.x / 2.x / XL single-file checkpoint).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <torch/nn/module.h>

#include "model/model_config.h"

namespace lf {

// Re-initialises every parameter of `module` from `generator` (CPU), in named_modules() order:
// Linear / Conv (incl. LoRA-compatible ones): weight and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))
// (torch's default, kaiming_uniform a=sqrt(5)); GroupNorm / LayerNorm: weight 1, bias 0;
// Embedding: N(0, 0.02) (HF CLIP's token init). Unlike ldm, the zero-initialised layers
// (proj_out, out_layers.3, out.2) get the default init, so a random UNet has a non-trivial
// output and every LoRA target receives gradient. Throws std::logic_error if some parameter
// belongs to a module type it does not know.
void init_random_parameters(torch::nn::Module& module, at::Generator& generator);

// The complete single-file layout of the preset's family with seeded random weights (fp32, CPU):
// the UNet under "model.diffusion_model.", the VAE encoder + quant_conv + post_quant_conv +
// decoder under "first_stage_model.", and every text encoder in its layout under its
// checkpoint_prefix (SD1 "cond_stage_model.transformer.text_model." HF; SD2
// "cond_stage_model.model." open_clip; SDXL "conditioner.embedders.0.transformer.text_model."
// HF + "conditioner.embedders.1.model." open_clip incl. text_projection [W, P]).
// Each part is initialised with init_random_parameters from a generator seeded by
// mix_seed(seed, k, 0): k = 0 UNet, 1 VAE encoder, 2 first text encoder, 3 VAE decoder,
// 3 + i text encoder i >= 1 (so the SD1 keys keep the values of earlier versions).
// The same seed gives the same bytes. `dtype` (kFloat32, kFloat16, kBFloat16) converts each part
// right after it is generated, which bounds the peak memory to one fp32 part.
std::unordered_map<std::string, torch::Tensor> make_random_checkpoint(
    const ModelPreset& preset, uint64_t seed, at::ScalarType dtype = at::kFloat);

// Key -> shape of make_random_checkpoint(preset, ...) without generating it: each part is built
// alone with bfloat16 parameters (SDXL's UNet: ~5 GB for a moment) and dropped.
KeyShapes random_checkpoint_key_shapes(const ModelPreset& preset);

}  // namespace lf
