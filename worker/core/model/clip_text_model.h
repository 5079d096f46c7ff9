// The CLIP ViT-L/14 text encoder used by SD 1.x, in the Hugging Face layout (keys under
// "cond_stage_model.transformer.text_model."). Mirrors transformers CLIPTextEmbeddings,
// CLIPAttention, CLIPMLP, CLIPEncoderLayer and CLIPTextTransformer (CLIPTextModel.text_model).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include "model/lora_compatible.h"
#include "model/model_config.h"

namespace lf {

// Checkpoint prefix of the SD 1.x text encoder in original (ldm) single-file checkpoints.
inline constexpr const char* kCLIPTextCheckpointPrefix = "cond_stage_model.transformer.text_model.";

// HF CLIPAttention: q_proj/k_proj/v_proj/out_proj (with bias), causal, scale 1/sqrt(head_dim).
class CLIPAttentionImpl : public torch::nn::Module {
 public:
  CLIPAttentionImpl(int64_t hidden_size, int64_t num_heads);
  // x [B, T, hidden] -> [B, T, hidden] (token t attends to tokens <= t).
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t num_heads_;
  LoRACompatibleLinear k_proj_{nullptr}, v_proj_{nullptr}, q_proj_{nullptr}, out_proj_{nullptr};
};
TORCH_MODULE(CLIPAttention);

// HF CLIPMLP: fc1 -> activation (quick_gelu x*sigmoid(1.702x) or exact gelu) -> fc2.
class CLIPMLPImpl : public torch::nn::Module {
 public:
  CLIPMLPImpl(int64_t hidden_size, int64_t intermediate_size, bool quick_gelu);
  // x [..., hidden] -> [..., hidden].
  torch::Tensor forward(const torch::Tensor& x);

 private:
  bool quick_gelu_;
  LoRACompatibleLinear fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(CLIPMLP);

// HF CLIPEncoderLayer (pre-LN): x += self_attn(layer_norm1 x); x += mlp(layer_norm2 x).
class CLIPEncoderLayerImpl : public torch::nn::Module {
 public:
  explicit CLIPEncoderLayerImpl(const CLIPTextConfig& config);
  // x [B, T, hidden] -> [B, T, hidden].
  torch::Tensor forward(const torch::Tensor& x);

 private:
  CLIPAttention self_attn_{nullptr};
  torch::nn::LayerNorm layer_norm1_{nullptr};
  CLIPMLP mlp_{nullptr};
  torch::nn::LayerNorm layer_norm2_{nullptr};
};
TORCH_MODULE(CLIPEncoderLayer);

// CLIP text transformer: embeddings.{token_embedding, position_embedding},
// encoder.layers.I..., final_layer_norm. The checkpoint's int64 [1, 77]
// "embeddings.position_ids" buffer is not held (positions are 0..T-1); loading ignores it.
// Parameters are frozen (requires_grad false).
class CLIPTextModelImpl : public torch::nn::Module {
 public:
  // Throws std::invalid_argument when config.validate() fails.
  explicit CLIPTextModelImpl(const CLIPTextConfig& config);

  // input_ids [B, T] int64 (T <= max_position_embeddings, SD: 77) -> [B, T, hidden].
  // clip_skip = 1 returns the last layer's output, k > 1 the output of layer num_layers + 1 - k
  // (A1111/kohya "clip skip"); final_layer_norm is applied when apply_final_layer_norm (SD1 and
  // kohya apply it for every clip_skip). Throws std::invalid_argument for clip_skip outside
  // [1, num_layers] or T > max_position_embeddings.
  torch::Tensor forward(const torch::Tensor& input_ids, int64_t clip_skip = 1,
                        bool apply_final_layer_norm = true);

  const CLIPTextConfig& config() const { return config_; }

 private:
  CLIPTextConfig config_;
  std::shared_ptr<torch::nn::Module> embeddings_;
  torch::nn::Embedding token_embedding_{nullptr}, position_embedding_{nullptr};
  std::shared_ptr<torch::nn::Module> encoder_;
  torch::nn::ModuleList layers_{nullptr};
  torch::nn::LayerNorm final_layer_norm_{nullptr};
};
TORCH_MODULE(CLIPTextModel);

// Loads weights[prefix + name] into the text model (see load_module_weights). Ignored key under
// the prefix: "embeddings.position_ids". Throws std::runtime_error on missing / mismatched /
// other unexpected keys.
void load_state_dict(CLIPTextModel& text_model,
                     const std::unordered_map<std::string, torch::Tensor>& weights,
                     const std::string& prefix = kCLIPTextCheckpointPrefix);

}  // namespace lf
