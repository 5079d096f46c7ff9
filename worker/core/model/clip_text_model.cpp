// transformers CLIPTextTransformer forward for SD conditioning: token + position embeddings,
// pre-LN causal encoder layers, final LayerNorm, and the clip-skip hidden-state selection.
#include "model/clip_text_model.h"

#include <stdexcept>

#include <torch/torch.h>

#include "model/state_dict.h"

namespace lf {

CLIPAttentionImpl::CLIPAttentionImpl(int64_t hidden_size, int64_t num_heads)
    : num_heads_(num_heads) {
  // HF registration order: k, v, q, out.
  k_proj_ = register_module("k_proj", LoRACompatibleLinear(hidden_size, hidden_size));
  v_proj_ = register_module("v_proj", LoRACompatibleLinear(hidden_size, hidden_size));
  q_proj_ = register_module("q_proj", LoRACompatibleLinear(hidden_size, hidden_size));
  out_proj_ = register_module("out_proj", LoRACompatibleLinear(hidden_size, hidden_size));
}

torch::Tensor CLIPAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0), t = x.size(1);
  auto split_heads = [&](const torch::Tensor& y) {
    return y.view({b, t, num_heads_, -1}).transpose(1, 2);
  };
  torch::Tensor out = at::scaled_dot_product_attention(
      split_heads(q_proj_->forward(x)), split_heads(k_proj_->forward(x)),
      split_heads(v_proj_->forward(x)), /*attn_mask=*/{}, /*dropout_p=*/0.0,
      /*is_causal=*/true);
  return out_proj_->forward(out.transpose(1, 2).reshape({b, t, -1}));
}

CLIPMLPImpl::CLIPMLPImpl(int64_t hidden_size, int64_t intermediate_size, bool quick_gelu)
    : quick_gelu_(quick_gelu) {
  fc1_ = register_module("fc1", LoRACompatibleLinear(hidden_size, intermediate_size));
  fc2_ = register_module("fc2", LoRACompatibleLinear(intermediate_size, hidden_size));
}

torch::Tensor CLIPMLPImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = fc1_->forward(x);
  h = quick_gelu_ ? h * torch::sigmoid(1.702 * h) : at::gelu(h);
  return fc2_->forward(h);
}

CLIPEncoderLayerImpl::CLIPEncoderLayerImpl(const CLIPTextConfig& c) {
  using torch::nn::LayerNormOptions;
  self_attn_ = register_module("self_attn", CLIPAttention(c.hidden_size, c.num_heads));
  layer_norm1_ = register_module(
      "layer_norm1", torch::nn::LayerNorm(LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)));
  mlp_ = register_module("mlp",
                         CLIPMLP(c.hidden_size, c.intermediate_size, c.activation == "quick_gelu"));
  layer_norm2_ = register_module(
      "layer_norm2", torch::nn::LayerNorm(LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)));
}

torch::Tensor CLIPEncoderLayerImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = x + self_attn_->forward(layer_norm1_->forward(x));
  return h + mlp_->forward(layer_norm2_->forward(h));
}

CLIPTextModelImpl::CLIPTextModelImpl(const CLIPTextConfig& config) : config_(config) {
  config_.validate();
  const CLIPTextConfig& c = config_;
  embeddings_ = register_module("embeddings", std::make_shared<torch::nn::Module>());
  token_embedding_ = embeddings_->register_module(
      "token_embedding", torch::nn::Embedding(c.vocab_size, c.hidden_size));
  position_embedding_ = embeddings_->register_module(
      "position_embedding", torch::nn::Embedding(c.max_position_embeddings, c.hidden_size));
  encoder_ = register_module("encoder", std::make_shared<torch::nn::Module>());
  layers_ = encoder_->register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_layers; ++i) layers_->push_back(CLIPEncoderLayer(c));
  final_layer_norm_ = register_module(
      "final_layer_norm",
      torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)));
  freeze_parameters(*this);
}

torch::Tensor CLIPTextModelImpl::forward(const torch::Tensor& input_ids, int64_t clip_skip,
                                         bool apply_final_layer_norm) {
  if (clip_skip < 1 || clip_skip > config_.num_layers) {
    throw std::invalid_argument("CLIPTextModel: clip_skip must be in [1, " +
                                std::to_string(config_.num_layers) + "], got " +
                                std::to_string(clip_skip));
  }
  const int64_t t = input_ids.size(1);
  if (t > config_.max_position_embeddings) {
    throw std::invalid_argument("CLIPTextModel: " + std::to_string(t) +
                                " tokens exceed max_position_embeddings " +
                                std::to_string(config_.max_position_embeddings));
  }
  torch::Tensor positions =
      torch::arange(t, torch::dtype(torch::kInt64).device(input_ids.device())).unsqueeze(0);
  torch::Tensor h = token_embedding_->forward(input_ids) + position_embedding_->forward(positions);
  const int64_t run_layers = config_.num_layers + 1 - clip_skip;
  for (int64_t i = 0; i < run_layers; ++i) {
    h = layers_->ptr(i)->as<CLIPEncoderLayerImpl>()->forward(h);
  }
  return apply_final_layer_norm ? final_layer_norm_->forward(h) : h;
}

void load_state_dict(CLIPTextModel& text_model,
                     const std::unordered_map<std::string, torch::Tensor>& weights,
                     const std::string& prefix) {
  auto ignorable = [](const std::string& key) { return key == "embeddings.position_ids"; };
  load_module_weights(*text_model, weights, prefix, ignorable, "CLIPTextModel");
}

}  // namespace lf
