// The SpatialTransformer stack of the SD UNet: CrossAttention, GEGLU FeedForward,
// BasicTransformerBlock and SpatialTransformer. Mirrors ldm.modules.attention (CrossAttention,
// GEGLU, FeedForward, BasicTransformerBlock, SpatialTransformer); parameter names match it.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include "model/gradient_checkpoint.h"
#include "model/lora_compatible.h"

namespace lf {

// ldm CrossAttention: to_q/to_k/to_v (no bias), to_out.0 (bias), to_out.1 dropout (identity).
// Scaled dot-product attention with scale 1/sqrt(dim_head).
class CrossAttentionImpl : public torch::nn::Module {
 public:
  // query_dim: width of x; context_dim: width of the context (== query_dim for self-attention).
  CrossAttentionImpl(int64_t query_dim, int64_t context_dim, int64_t heads, int64_t dim_head);

  // x [B, T, query_dim]; context [B, S, context_dim] or undefined for self-attention.
  // Returns [B, T, query_dim].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& context = {});

 private:
  int64_t heads_;
  LoRACompatibleLinear to_q_{nullptr}, to_k_{nullptr}, to_v_{nullptr};
  torch::nn::Sequential to_out_{nullptr};
};
TORCH_MODULE(CrossAttention);

// ldm GEGLU: proj Linear(dim -> 2 * inner); out = hidden * gelu(gate) with [hidden | gate].
class GEGLUImpl : public torch::nn::Module {
 public:
  GEGLUImpl(int64_t dim_in, int64_t dim_out);
  // x [..., dim_in] -> [..., dim_out].
  torch::Tensor forward(const torch::Tensor& x);

 private:
  LoRACompatibleLinear proj_{nullptr};
};
TORCH_MODULE(GEGLU);

// ldm FeedForward(glu=True, mult=4): net.0 GEGLU, net.1 dropout (identity), net.2 Linear.
class FeedForwardImpl : public torch::nn::Module {
 public:
  explicit FeedForwardImpl(int64_t dim, int64_t mult = 4);
  // x [..., dim] -> [..., dim].
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Sequential net_{nullptr};
};
TORCH_MODULE(FeedForward);

// ldm BasicTransformerBlock: x += attn1(norm1 x); x += attn2(norm2 x, ctx); x += ff(norm3 x).
// LayerNorm eps 1e-5. With gradient checkpointing it is one recomputed unit (diffusers
// checkpoints each BasicTransformerBlock of a Transformer2DModel).
class BasicTransformerBlockImpl : public torch::nn::Module, public CheckpointableBlock {
 public:
  BasicTransformerBlockImpl(int64_t dim, int64_t heads, int64_t dim_head, int64_t context_dim);
  // x [B, T, dim], context [B, S, context_dim] -> [B, T, dim].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& context);

 private:
  torch::Tensor forward_block(const torch::Tensor& x, const torch::Tensor& context);

  CrossAttention attn1_{nullptr};
  FeedForward ff_{nullptr};
  CrossAttention attn2_{nullptr};
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr}, norm3_{nullptr};
};
TORCH_MODULE(BasicTransformerBlock);

// ldm SpatialTransformer: GroupNorm(groups, eps 1e-6) -> proj_in -> blocks -> proj_out, plus the
// residual. proj_in/proj_out are Conv 1x1 (SD1, applied before/after the token reshape) or
// Linear (use_linear, applied on tokens).
class SpatialTransformerImpl : public torch::nn::Module {
 public:
  SpatialTransformerImpl(int64_t channels, int64_t heads, int64_t dim_head, int64_t depth,
                         int64_t context_dim, bool use_linear, int64_t norm_num_groups);
  // x [B, C, H, W], context [B, S, context_dim] -> [B, C, H, W].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& context);

 private:
  bool use_linear_;
  torch::nn::GroupNorm norm_{nullptr};
  LoRACompatibleConv proj_in_conv_{nullptr}, proj_out_conv_{nullptr};
  LoRACompatibleLinear proj_in_linear_{nullptr}, proj_out_linear_{nullptr};
  torch::nn::ModuleList transformer_blocks_{nullptr};
};
TORCH_MODULE(SpatialTransformer);

}  // namespace lf
