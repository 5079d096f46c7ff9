// The SD denoising UNet: ResBlock, Downsample, Upsample, TimestepEmbedSequential and UNetModel,
// with parameter names equal to the ldm checkpoint keys minus "model.diffusion_model.".
// Mirrors ldm / sgm openaimodel (UNetModel and its blocks): SD 1.x/2.x and SDXL wiring
// (per-level transformer depth, label_emb) for any num_res_blocks L.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include "model/attention.h"
#include "model/gradient_checkpoint.h"
#include "model/lora_compatible.h"
#include "model/model_config.h"

namespace lf {

// Checkpoint prefix of the UNet in original (ldm) single-file checkpoints.
inline constexpr const char* kUNetCheckpointPrefix = "model.diffusion_model.";

// ldm timestep_embedding(repeat_only=False): half = dim/2, freq_k = exp(-ln(max_period) k/half),
// output [cos(t freq) | sin(t freq)] (zero-padded when dim is odd).
// timesteps [B] (any real or integer dtype) -> [B, dim] float32 on timesteps' device.
torch::Tensor timestep_embedding(const torch::Tensor& timesteps, int64_t dim,
                                 double max_period = 10000.0);

// SDXL vector conditioning y, as sgm ConcatTimestepEmbedderND / diffusers add_time_ids:
// pooled [B, P] ‖ timestep_embedding(s, adm_time_embed_dim) for each scalar s of size_cond
// [B, 6] = (orig_h, orig_w, crop_top, crop_left, target_h, target_w), flattened in that order.
// Returns [B, P + 6 * adm_time_embed_dim] in pooled's dtype. Throws std::invalid_argument on
// shape mismatches.
torch::Tensor sdxl_vector_conditioning(const torch::Tensor& pooled, const torch::Tensor& size_cond,
                                       int64_t adm_time_embed_dim);

// ldm ResBlock (no scale-shift norm, dropout 0): in_layers.{0 GroupNorm, 1 SiLU, 2 conv3x3},
// emb_layers.{0 SiLU, 1 Linear}, out_layers.{0 GroupNorm, 1 SiLU, 2 dropout, 3 conv3x3},
// skip_connection conv1x1 only when in != out. GroupNorm eps 1e-5. The convs and the emb Linear
// are LoRA-compatible (kohya LoCon targets). With gradient checkpointing it is one recomputed
// unit (diffusers checkpoints each ResnetBlock2D).
class ResBlockImpl : public torch::nn::Module, public CheckpointableBlock {
 public:
  ResBlockImpl(int64_t in_channels, int64_t out_channels, int64_t emb_channels,
               int64_t norm_num_groups);
  // x [B, in, H, W], emb [B, emb_channels] -> [B, out, H, W].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& emb);

 private:
  torch::Tensor forward_block(const torch::Tensor& x, const torch::Tensor& emb);

  torch::nn::Sequential in_layers_{nullptr}, emb_layers_{nullptr}, out_layers_{nullptr};
  LoRACompatibleConv skip_connection_{nullptr};
};
TORCH_MODULE(ResBlock);

// ldm Downsample(use_conv=True): op = conv3x3 stride 2 padding 1. [B,C,H,W] -> [B,C,H/2,W/2].
class DownsampleImpl : public torch::nn::Module {
 public:
  explicit DownsampleImpl(int64_t channels);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  LoRACompatibleConv op_{nullptr};
};
TORCH_MODULE(Downsample);

// ldm Upsample(use_conv=True): nearest x2 then conv3x3 padding 1. [B,C,H,W] -> [B,C,2H,2W].
class UpsampleImpl : public torch::nn::Module {
 public:
  explicit UpsampleImpl(int64_t channels);
  // x [B, C, H, W] -> [B, C, 2H, 2W], or -> size {h, w} when given: the skip connection's size
  // when H was odd on the way down (sizes that are multiples of 8 but not of 64; ComfyUI's
  // openaimodel output_shape, diffusers' upsample_size).
  torch::Tensor forward(const torch::Tensor& x, c10::optional<std::vector<int64_t>> size = {});

 private:
  LoRACompatibleConv conv_{nullptr};
};
TORCH_MODULE(Upsample);

// ldm TimestepEmbedSequential: children registered as "0", "1", ...; ResBlocks get the time
// embedding, SpatialTransformers the context, other layers only x.
class TimestepEmbedSequentialImpl : public torch::nn::Module {
 public:
  void push_back(torch::nn::Conv2d conv);
  void push_back(ResBlock block);
  void push_back(SpatialTransformer transformer);
  void push_back(Downsample down);
  void push_back(Upsample up);

  // x [B, C, H, W], emb [B, time_embed_dim], context [B, S, context_dim].
  // upsample_size: passed to an Upsample child (see UpsampleImpl::forward).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& emb,
                        const torch::Tensor& context,
                        c10::optional<std::vector<int64_t>> upsample_size = {});

 private:
  enum class Kind { kConv, kResBlock, kTransformer, kDownsample, kUpsample };
  void add(Kind kind, std::shared_ptr<torch::nn::Module> module);
  std::vector<std::pair<Kind, std::shared_ptr<torch::nn::Module>>> layers_;
};
TORCH_MODULE(TimestepEmbedSequential);

// ldm / sgm UNetModel. Parameter names (named_parameters()) equal the ldm keys without
// "model.diffusion_model.", e.g. "input_blocks.1.1.proj_in.weight". With L = num_res_blocks:
// input ResBlock (level i, j) -> input_blocks.{1 + i(L+1) + j}.0 (its SpatialTransformer .1 when
// transformer_depth[i] > 0), downsample after level i -> input_blocks.{(i+1)(L+1)}.0.op, output
// ResBlock (reversed level i', j in 0..L) -> output_blocks.{i'(L+1) + j}.0, upsample ->
// output_blocks.{i'(L+1) + L}.{2 if the level has attention else 1}.conv; middle_block.{0 Res,
// 1 SpatialTransformer(transformer_depth_middle), 2 Res}; SDXL label_emb.0.{0, 2}.
// Parameters are created with torch defaults (U(+-1/sqrt(fan_in)), norms 1/0) and frozen
// (requires_grad false): lorafleet only trains LoRA adapters on top of it.
class UNetModelImpl : public torch::nn::Module {
 public:
  // Throws std::invalid_argument when config.validate() fails.
  explicit UNetModelImpl(const UNetConfig& config);

  // kohya --gradient_checkpointing: every ResBlock and BasicTransformerBlock recomputes its
  // forward in backward. Returns the number of checkpointed blocks.
  std::size_t set_gradient_checkpointing(bool on);

  // x [B, in_channels, H, W] (H, W divisible by 2^(levels-1)), timesteps [B] (float or int64,
  // in [0, 1000)), context [B, S, context_dim], y [B, adm_in_channels] (SDXL vector
  // conditioning, see sdxl_vector_conditioning; required iff adm_in_channels > 0)
  // -> [B, out_channels, H, W] (epsilon or v). Throws std::invalid_argument when y is missing,
  // unexpected or of the wrong width.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& timesteps,
                        const torch::Tensor& context, const torch::Tensor& y = {});

  const UNetConfig& config() const { return config_; }

 private:
  UNetConfig config_;
  torch::nn::Sequential time_embed_{nullptr};
  torch::nn::ModuleList label_emb_{nullptr};  // SDXL only: holds label_emb.0 = label_mlp_
  torch::nn::Sequential label_mlp_{nullptr};
  torch::nn::ModuleList input_blocks_{nullptr};
  TimestepEmbedSequential middle_block_{nullptr};
  torch::nn::ModuleList output_blocks_{nullptr};
  torch::nn::Sequential out_{nullptr};
};
TORCH_MODULE(UNetModel);

// Copies weights[prefix + name] into every parameter of `unet` (dtype converted to the
// parameter's, device kept). Throws std::runtime_error listing the first missing keys, a shape
// mismatch (key, expected and found shapes) or keys under `prefix` the model does not have.
// No key under the UNet prefix is ignorable in SD 1.x/2.x/XL checkpoints.
void load_state_dict(UNetModel& unet, const std::unordered_map<std::string, torch::Tensor>& weights,
                     const std::string& prefix = kUNetCheckpointPrefix);

}  // namespace lf
