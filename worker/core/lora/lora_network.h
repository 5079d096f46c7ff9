// A kohya-compatible LoRA network over the SD UNet: one low-rank adapter per Linear / Conv 1x1
// inside every SpatialTransformer, named with kohya's diffusers-path keys. Mirrors
// networks.lora.LoRANetwork / LoRAModule of kohya-ss/sd-scripts (UNet part, SD 1.x/2.x).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "model/lora_compatible.h"
#include "model/unet.h"

namespace lf {

// Maps an ldm UNet module path to the diffusers path kohya names SD 1.x/2.x LoRA modules by,
// for num_res_blocks L:
//   input_blocks.{1 + i(L+1) + j}.1.<rest> -> down_blocks.i.attentions.j.<rest>
//   middle_block.1.<rest>                  -> mid_block.attentions.0.<rest>
//   output_blocks.{i(L+1) + j}.1.<rest>    -> up_blocks.i.attentions.j.<rest>
// Throws std::invalid_argument for a path outside a SpatialTransformer.
std::string ldm_to_diffusers_attention_path(const std::string& ldm_path, int64_t num_res_blocks);

// "lora_unet_" + diffusers path with '.' -> '_', e.g.
// "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q".
std::string kohya_lora_name(const std::string& diffusers_path);

class LoRANetwork {
 public:
  // Attaches an adapter to every LoRA-compatible layer inside each SpatialTransformer of `unet`
  // (proj_in, proj_out, attn1/attn2 to_q/to_k/to_v/to_out.0, ff.net.0.proj, ff.net.2; 12 per
  // depth-1 transformer). network_dim = rank r > 0; network_alpha <= 0 means alpha = r (kohya);
  // scale = alpha / r. In sorted module-name order, lora_down [r, in] ([r, in, 1, 1] for
  // conv) is drawn U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform a = sqrt(5)) on `generator`
  // (CPU), lora_up [out, r] ([out, r, 1, 1]) is zero; both are float32 on the layer's device
  // and require grad. Freezes every UNet parameter. Throws std::invalid_argument for
  // network_dim <= 0 or if some layer already carries an adapter.
  LoRANetwork(UNetModel& unet, int64_t network_dim, double network_alpha, at::Generator& generator);
  // Detaches the adapters it attached (it keeps the target layers alive until then).
  ~LoRANetwork();
  LoRANetwork(const LoRANetwork&) = delete;
  LoRANetwork& operator=(const LoRANetwork&) = delete;

  // kohya lora_names of all modules, sorted.
  std::vector<std::string> module_names() const;
  // Trainable tensors, sorted by module name, lora_down before lora_up.
  std::vector<torch::Tensor> parameters() const;
  // Names of parameters() in the same order ("<lora_name>.lora_down.weight", ".lora_up.weight").
  std::vector<std::string> parameter_names() const;
  // Total element count of parameters().
  size_t num_parameters() const;

  int64_t network_dim() const { return network_dim_; }
  double network_alpha() const { return network_alpha_; }
  // network_alpha / network_dim as constructed (load_state_dict may set per-module alphas).
  double scale() const { return network_alpha_ / static_cast<double>(network_dim_); }
  // kohya network multiplier (applied on top of scale); 1 by default.
  void set_multiplier(double multiplier);

  // kohya file layout: "<lora_name>.lora_down.weight", "<lora_name>.lora_up.weight" (detached,
  // sharing storage, in the parameters' dtype) and "<lora_name>.alpha" (0-dim float32).
  std::map<std::string, torch::Tensor> state_dict() const;

  // Copies a kohya state dict into the adapters in place (optimizer references stay valid) and
  // takes each module's alpha from "<lora_name>.alpha" (scale = alpha / r; a missing alpha means
  // alpha = r). Validates before copying; throws std::runtime_error listing missing and
  // unexpected keys and shape mismatches (key, expected, found).
  void load_state_dict(const std::map<std::string, torch::Tensor>& weights);

 private:
  struct Module {
    std::shared_ptr<LoRAAdapter> adapter;
    double alpha;
    std::shared_ptr<LoRACompatibleLinearImpl> linear;  // exactly one of linear / conv is set
    std::shared_ptr<LoRACompatibleConv1x1Impl> conv;
  };
  int64_t network_dim_;
  double network_alpha_;
  std::map<std::string, Module> modules_;  // by kohya lora_name
};

}  // namespace lf
