// Loading and exporting module weights by checkpoint key (prefix + parameter name), shared by
// UNetModel, VAEEncoder and CLIPTextModel. Mirrors torch.nn.Module.load_state_dict(strict=True)
// with a per-model list of ignorable checkpoint keys.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

namespace lf {

// Checkpoint tensors by full key (e.g. "model.diffusion_model.out.2.weight").
using WeightMap = std::unordered_map<std::string, torch::Tensor>;

// Returns true for a key (relative to the prefix) that the model does not hold but that is
// legitimately present in checkpoints (e.g. the VAE decoder for the encoder-only model).
using IgnorableKey = std::function<bool(const std::string& relative_key)>;

// Copies weights[prefix + name] into every parameter and buffer of `module`, converting dtype
// to the destination's and keeping its device. A [O, I] tensor loads into a [O, I, 1, 1]
// destination and vice versa (Linear == 1x1 conv). Validates everything before copying
// anything; throws std::runtime_error naming `model_name` and listing the first missing keys,
// every shape mismatch (key, expected and found shapes) and the first unexpected keys under
// `prefix` for which `is_ignorable` (may be empty) is false.
void load_module_weights(torch::nn::Module& module, const WeightMap& weights,
                         const std::string& prefix, const IgnorableKey& is_ignorable,
                         const std::string& model_name);

// Every parameter and buffer of `module` as prefix + name -> detached tensor (shares storage).
WeightMap module_weights(const torch::nn::Module& module, const std::string& prefix);

// Sets requires_grad = false on every parameter of `module` (base weights are never trained).
void freeze_parameters(torch::nn::Module& module);

}  // namespace lf
