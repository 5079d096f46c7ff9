// The encoder half of the SD VAE: ResnetBlock, AttnBlock, Downsample, the Encoder body and
// quant_conv with diagonal-Gaussian latent sampling. Mirrors ldm.modules.diffusionmodules.model
// (ResnetBlock, AttnBlock, Downsample, Encoder) and ldm.models.autoencoder.AutoencoderKL.encode.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include "model/model_config.h"

namespace lf {

// Checkpoint prefix of the VAE in original (ldm) single-file checkpoints.
inline constexpr const char* kVAECheckpointPrefix = "first_stage_model.";

// ldm ResnetBlock without time embedding: norm1, conv1, norm2, conv2 (GroupNorm eps 1e-6,
// swish), nin_shortcut conv1x1 only when in != out. [B, in, H, W] -> [B, out, H, W].
class VAEResnetBlockImpl : public torch::nn::Module {
 public:
  VAEResnetBlockImpl(int64_t in_channels, int64_t out_channels, int64_t norm_num_groups);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::GroupNorm norm1_{nullptr}, norm2_{nullptr};
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, nin_shortcut_{nullptr};
};
TORCH_MODULE(VAEResnetBlock);

// ldm AttnBlock: single-head self-attention over H*W tokens, q/k/v/proj_out conv1x1,
// scale 1/sqrt(C). [B, C, H, W] -> [B, C, H, W].
class VAEAttnBlockImpl : public torch::nn::Module {
 public:
  VAEAttnBlockImpl(int64_t channels, int64_t norm_num_groups);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::GroupNorm norm_{nullptr};
  torch::nn::Conv2d q_{nullptr}, k_{nullptr}, v_{nullptr}, proj_out_{nullptr};
};
TORCH_MODULE(VAEAttnBlock);

// ldm Downsample(with_conv=True): pad (right 1, bottom 1) then conv3x3 stride 2 padding 0.
// [B, C, H, W] -> [B, C, H/2, W/2] (H, W even).
class VAEDownsampleImpl : public torch::nn::Module {
 public:
  explicit VAEDownsampleImpl(int64_t channels);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Conv2d conv_{nullptr};
};
TORCH_MODULE(VAEDownsample);

// ldm Encoder (double_z, no attention outside the mid block): conv_in, down.I.block.J,
// down.I.downsample (all but the last level), mid.{block_1, attn_1, block_2}, norm_out,
// swish, conv_out. [B, in_channels, H, W] -> [B, 2 * z_channels, H / f, W / f],
// f = 2^(levels - 1).
class VAEEncoderBodyImpl : public torch::nn::Module {
 public:
  explicit VAEEncoderBodyImpl(const VAEConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Conv2d conv_in_{nullptr}, conv_out_{nullptr};
  torch::nn::ModuleList down_{nullptr};
  std::shared_ptr<torch::nn::Module> mid_;
  VAEResnetBlock mid_block_1_{nullptr}, mid_block_2_{nullptr};
  VAEAttnBlock mid_attn_1_{nullptr};
  torch::nn::GroupNorm norm_out_{nullptr};
};
TORCH_MODULE(VAEEncoderBody);

// Posterior N(mean, exp(logvar)) of ldm DiagonalGaussianDistribution; each [B, z, h, w].
struct LatentDistribution {
  torch::Tensor mean;
  torch::Tensor logvar;  // clamped to [-30, 20]
};

// AutoencoderKL encoder half: "encoder" (VAEEncoderBody) + "quant_conv" (conv1x1 2z -> 2z).
// Parameters are frozen (requires_grad false); run it under torch::NoGradGuard.
class VAEEncoderImpl : public torch::nn::Module {
 public:
  // Throws std::invalid_argument when config.validate() fails.
  explicit VAEEncoderImpl(const VAEConfig& config);

  // x [B, in_channels, H, W] in [-1, 1] -> {mean, logvar} each [B, z, H/8, W/8] (SD).
  LatentDistribution encode(const torch::Tensor& x);

  // (mean + exp(0.5 logvar) * eps) * scale_factor with eps ~ N(0, 1) drawn on the CPU from
  // `generator` (a CPU generator) and moved to mean's device, so CPU and CUDA runs agree.
  // Returns [B, z, H/8, W/8] in mean's dtype.
  torch::Tensor sample_latents(const torch::Tensor& x, at::Generator& generator);
  torch::Tensor sample_latents(const LatentDistribution& posterior, at::Generator& generator);

  const VAEConfig& config() const { return config_; }

 private:
  VAEConfig config_;
  VAEEncoderBody encoder_{nullptr};
  torch::nn::Conv2d quant_conv_{nullptr};
};
TORCH_MODULE(VAEEncoder);

// Loads weights[prefix + name] into the encoder (see load_module_weights). Ignored keys under
// the prefix: "decoder.*" and "post_quant_conv.*" (the decoder half real checkpoints carry) and
// "loss.*" (the training loss module some full checkpoints keep). Throws std::runtime_error on
// missing / mismatched / other unexpected keys.
void load_state_dict(VAEEncoder& vae, const std::unordered_map<std::string, torch::Tensor>& weights,
                     const std::string& prefix = kVAECheckpointPrefix);

}  // namespace lf
