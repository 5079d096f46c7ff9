// The decoder half of the SD VAE: post_quant_conv and the Decoder body (conv_in, mid block,
// up levels with nearest x2 upsampling, norm_out, conv_out). Mirrors
// ldm.modules.diffusionmodules.model.Decoder / Upsample and AutoencoderKL.decode; parameter
// names equal the ldm keys under "first_stage_model.".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include "model/model_config.h"
#include "model/vae_encoder.h"

namespace lf {

// ldm Upsample(with_conv=True) of the VAE: nearest x2, then conv 3x3 padding 1.
// [B, C, H, W] -> [B, C, 2H, 2W].
class VAEUpsampleImpl : public torch::nn::Module {
 public:
  explicit VAEUpsampleImpl(int64_t channels);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Conv2d conv_{nullptr};
};
TORCH_MODULE(VAEUpsample);

// ldm Decoder (no attention outside the mid block, give_pre_end false, tanh_out false):
// conv_in (z -> ch * ch_mult[-1]), mid.{block_1, attn_1, block_2}, up.I.block.J for
// J in 0..num_res_blocks (L + 1 blocks), up.I.upsample for I > 0, processed from
// I = levels - 1 down to 0, then norm_out, swish, conv_out (-> in_channels).
// [B, z, h, w] -> [B, in_channels, h * f, w * f], f = 2^(levels - 1).
class VAEDecoderBodyImpl : public torch::nn::Module {
 public:
  explicit VAEDecoderBodyImpl(const VAEConfig& config);
  torch::Tensor forward(const torch::Tensor& z);

 private:
  torch::nn::Conv2d conv_in_{nullptr}, conv_out_{nullptr};
  std::shared_ptr<torch::nn::Module> mid_;
  VAEResnetBlock mid_block_1_{nullptr}, mid_block_2_{nullptr};
  VAEAttnBlock mid_attn_1_{nullptr};
  torch::nn::ModuleList up_{nullptr};
  torch::nn::GroupNorm norm_out_{nullptr};
};
TORCH_MODULE(VAEDecoderBody);

// AutoencoderKL decoder half: "post_quant_conv" (conv1x1 z -> z) + "decoder". Parameters are
// frozen; run it under torch::NoGradGuard.
class VAEDecoderImpl : public torch::nn::Module {
 public:
  // Throws std::invalid_argument when config.validate() fails.
  explicit VAEDecoderImpl(const VAEConfig& config);

  // latents [B, z, h, w] as the UNet sees them (already multiplied by scale_factor)
  // -> images [B, in_channels, 8h, 8w] (SD), nominally in [-1, 1] (not clamped).
  // Divides by scale_factor, then post_quant_conv, then the decoder.
  torch::Tensor decode(const torch::Tensor& latents);

  const VAEConfig& config() const { return config_; }

 private:
  VAEConfig config_;
  torch::nn::Conv2d post_quant_conv_{nullptr};
  VAEDecoderBody decoder_{nullptr};
};
TORCH_MODULE(VAEDecoder);

// Loads weights[prefix + name] into the decoder (see load_module_weights). Ignored keys under
// the prefix: "encoder.*", "quant_conv.*" (the encoder half) and "loss.*". Mid-attention q/k/v/
// proj_out stored as Linear [C, C] (some converted files) load into the [C, C, 1, 1] convs.
// Throws std::runtime_error on missing / mismatched / other unexpected keys.
void load_state_dict(VAEDecoder& vae, const std::unordered_map<std::string, torch::Tensor>& weights,
                     const std::string& prefix = kVAECheckpointPrefix);

}  // namespace lf
