// ldm.modules.attention: CrossAttention, GEGLU, FeedForward, BasicTransformerBlock and
// SpatialTransformer. Attention uses at::scaled_dot_product_attention (scale 1/sqrt(dim_head)).
#include "model/attention.h"

#include <torch/torch.h>

namespace lf {

CrossAttentionImpl::CrossAttentionImpl(int64_t query_dim, int64_t context_dim, int64_t heads,
                                       int64_t dim_head)
    : heads_(heads) {
  const int64_t inner = heads * dim_head;
  to_q_ = register_module("to_q", LoRACompatibleLinear(query_dim, inner, /*bias=*/false));
  to_k_ = register_module("to_k", LoRACompatibleLinear(context_dim, inner, /*bias=*/false));
  to_v_ = register_module("to_v", LoRACompatibleLinear(context_dim, inner, /*bias=*/false));
  to_out_ = register_module(
      "to_out", torch::nn::Sequential(LoRACompatibleLinear(inner, query_dim, /*bias=*/true),
                                      torch::nn::Identity()));  // index 1: dropout (p = 0)
}

torch::Tensor CrossAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& context) {
  const torch::Tensor& ctx = context.defined() ? context : x;
  const int64_t b = x.size(0);
  // [B, T, H*D] -> [B, H, T, D]
  auto split_heads = [&](const torch::Tensor& t) {
    return t.view({b, t.size(1), heads_, -1}).transpose(1, 2);
  };
  torch::Tensor q = split_heads(to_q_->forward(x));
  torch::Tensor k = split_heads(to_k_->forward(ctx));
  torch::Tensor v = split_heads(to_v_->forward(ctx));
  torch::Tensor out = at::scaled_dot_product_attention(q, k, v);
  out = out.transpose(1, 2).reshape({b, x.size(1), -1});
  return to_out_->forward(out);
}

GEGLUImpl::GEGLUImpl(int64_t dim_in, int64_t dim_out) {
  proj_ = register_module("proj", LoRACompatibleLinear(dim_in, dim_out * 2));
}

torch::Tensor GEGLUImpl::forward(const torch::Tensor& x) {
  std::vector<torch::Tensor> parts = proj_->forward(x).chunk(2, /*dim=*/-1);
  return parts[0] * at::gelu(parts[1]);
}

FeedForwardImpl::FeedForwardImpl(int64_t dim, int64_t mult) {
  const int64_t inner = dim * mult;
  net_ = register_module("net", torch::nn::Sequential(GEGLU(dim, inner),
                                                      torch::nn::Identity(),  // dropout (p = 0)
                                                      LoRACompatibleLinear(inner, dim)));
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) { return net_->forward(x); }

BasicTransformerBlockImpl::BasicTransformerBlockImpl(int64_t dim, int64_t heads, int64_t dim_head,
                                                     int64_t context_dim) {
  using torch::nn::LayerNorm;
  using torch::nn::LayerNormOptions;
  // Registration order follows ldm (attn1, ff, attn2, norm1..3).
  attn1_ = register_module("attn1", CrossAttention(dim, dim, heads, dim_head));
  ff_ = register_module("ff", FeedForward(dim));
  attn2_ = register_module("attn2", CrossAttention(dim, context_dim, heads, dim_head));
  norm1_ = register_module("norm1", LayerNorm(LayerNormOptions({dim}).eps(1e-5)));
  norm2_ = register_module("norm2", LayerNorm(LayerNormOptions({dim}).eps(1e-5)));
  norm3_ = register_module("norm3", LayerNorm(LayerNormOptions({dim}).eps(1e-5)));
}

torch::Tensor BasicTransformerBlockImpl::forward(const torch::Tensor& x,
                                                 const torch::Tensor& context) {
  return run_block(
      *this,
      [this](const std::vector<torch::Tensor>& in) { return forward_block(in[0], in[1]); },
      {x, context});
}

torch::Tensor BasicTransformerBlockImpl::forward_block(const torch::Tensor& x,
                                                       const torch::Tensor& context) {
  torch::Tensor h = attn1_->forward(norm1_->forward(x)) + x;
  h = attn2_->forward(norm2_->forward(h), context) + h;
  return ff_->forward(norm3_->forward(h)) + h;
}

SpatialTransformerImpl::SpatialTransformerImpl(int64_t channels, int64_t heads, int64_t dim_head,
                                               int64_t depth, int64_t context_dim, bool use_linear,
                                               int64_t norm_num_groups)
    : use_linear_(use_linear) {
  const int64_t inner = heads * dim_head;
  norm_ = register_module(
      "norm",
      torch::nn::GroupNorm(torch::nn::GroupNormOptions(norm_num_groups, channels).eps(1e-6)));
  if (use_linear) {
    proj_in_linear_ = register_module("proj_in", LoRACompatibleLinear(channels, inner));
  } else {
    proj_in_conv_ = register_module("proj_in", LoRACompatibleConv(channels, inner));
  }
  transformer_blocks_ = register_module("transformer_blocks", torch::nn::ModuleList());
  for (int64_t d = 0; d < depth; ++d) {
    transformer_blocks_->push_back(BasicTransformerBlock(inner, heads, dim_head, context_dim));
  }
  if (use_linear) {
    proj_out_linear_ = register_module("proj_out", LoRACompatibleLinear(inner, channels));
  } else {
    proj_out_conv_ = register_module("proj_out", LoRACompatibleConv(inner, channels));
  }
}

torch::Tensor SpatialTransformerImpl::forward(const torch::Tensor& x,
                                              const torch::Tensor& context) {
  const int64_t b = x.size(0), h = x.size(2), w = x.size(3);
  torch::Tensor t = norm_->forward(x);
  if (!use_linear_) t = proj_in_conv_->forward(t);
  t = t.flatten(2).transpose(1, 2);  // [B, C, H, W] -> [B, H*W, C]
  if (use_linear_) t = proj_in_linear_->forward(t);
  for (const auto& block : *transformer_blocks_) {
    t = block->as<BasicTransformerBlockImpl>()->forward(t, context);
  }
  if (use_linear_) t = proj_out_linear_->forward(t);
  t = t.transpose(1, 2).reshape({b, -1, h, w});  // [B, H*W, C] -> [B, C, H, W]
  if (!use_linear_) t = proj_out_conv_->forward(t);
  return t + x;
}

}  // namespace lf
