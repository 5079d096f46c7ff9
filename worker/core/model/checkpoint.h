// Deterministic random-weight SD checkpoints for demos and tests: the three networks built from
// a ModelPreset and initialised from a seed, returned under the original ldm key prefixes
// (the layout of an SD 1.x single-file checkpoint, minus the VAE decoder).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
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

// Builds UNetModel, VAEEncoder and CLIPTextModel from `preset`, initialises them with
// init_random_parameters from generators seeded by mix_seed(seed, k, 0) (k = 0 UNet, 1 VAE,
// 2 text) and returns every parameter (fp32, CPU) under "model.diffusion_model.",
// "first_stage_model." and "cond_stage_model.transformer.text_model.". Only the VAE encoder
// half and quant_conv are produced; real checkpoints also carry decoder.* and post_quant_conv.*
// (the VAE loader ignores them). The same seed gives the same bytes.
std::unordered_map<std::string, torch::Tensor> make_random_checkpoint(const ModelPreset& preset,
                                                                      uint64_t seed);

}  // namespace lf
