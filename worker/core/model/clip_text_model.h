// The CLIP text encoders of SD 1.x (CLIP ViT-L/14), SD 2.x (OpenCLIP ViT-H/14) and SDXL (CLIP-L
// and OpenCLIP ViT-bigG/14), all held in the Hugging Face structure. Mirrors transformers
// CLIPTextEmbeddings, CLIPAttention, CLIPMLP, CLIPEncoderLayer, CLIPTextTransformer and
// CLIPTextModelWithProjection; loads and exports both the HF and the open_clip key layouts.
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

#include "model/gradient_checkpoint.h"
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

// HF CLIPEncoderLayer (pre-LN): x += self_attn(layer_norm1 x); x += mlp(layer_norm2 x). With
// gradient checkpointing it is one recomputed unit (transformers checkpoints each layer).
class CLIPEncoderLayerImpl : public torch::nn::Module, public CheckpointableBlock {
 public:
  explicit CLIPEncoderLayerImpl(const CLIPTextConfig& config);
  // x [B, T, hidden] -> [B, T, hidden].
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::Tensor forward_block(const torch::Tensor& x);

  CLIPAttention self_attn_{nullptr};
  torch::nn::LayerNorm layer_norm1_{nullptr};
  CLIPMLP mlp_{nullptr};
  torch::nn::LayerNorm layer_norm2_{nullptr};
};
TORCH_MODULE(CLIPEncoderLayer);

// What the text encoder returns for conditioning.
struct CLIPTextOutput {
  torch::Tensor hidden;  // [B, T, hidden]: the selected layer (final LN applied if asked)
  // [B, hidden], or [B, projection_dim] with a text_projection: final_layer_norm(last layer) at
  // the first eos_token_id position of each row (position 0 when a row has none), times
  // text_projection when present (HF CLIPTextModelWithProjection text_embeds, open_clip
  // encode_text; SDXL's pooled bigG embedding).
  torch::Tensor pooled;
};

// CLIP text transformer: embeddings.{token_embedding, position_embedding},
// encoder.layers.I..., final_layer_norm, and text_projection (Linear without bias) when
// config.projection_dim > 0. The checkpoint's int64 [1, 77] "embeddings.position_ids" buffer is
// not held (positions are 0..T-1); loading ignores it. Parameters are frozen.
class CLIPTextModelImpl : public torch::nn::Module {
 public:
  // Throws std::invalid_argument when config.validate() fails.
  explicit CLIPTextModelImpl(const CLIPTextConfig& config);

  // input_ids [B, T] int64 (T <= max_position_embeddings, SD: 77).
  // hidden_layer_from_end = 1 selects the last layer's output, k > 1 the output of layer
  // num_layers + 1 - k (A1111/kohya "clip skip"; SD2 and SDXL use 2); final_layer_norm is
  // applied to it when apply_final_layer_norm (SD1, SD2; not SDXL). The pooled output runs
  // every layer; with_pooled false skips it and the layers after the selected one (pooled is
  // then undefined). Throws std::invalid_argument for hidden_layer_from_end outside
  // [1, num_layers] or T > max_position_embeddings.
  CLIPTextOutput forward(const torch::Tensor& input_ids, int64_t hidden_layer_from_end = 1,
                         bool apply_final_layer_norm = true, bool with_pooled = true);

  const CLIPTextConfig& config() const { return config_; }

  // transformers gradient_checkpointing_enable(): every encoder layer recomputes its forward in
  // backward. Returns the number of layers.
  std::size_t set_gradient_checkpointing(bool on);

 private:
  CLIPTextConfig config_;
  std::shared_ptr<torch::nn::Module> embeddings_;
  torch::nn::Embedding token_embedding_{nullptr}, position_embedding_{nullptr};
  std::shared_ptr<torch::nn::Module> encoder_;
  torch::nn::ModuleList layers_{nullptr};
  torch::nn::LayerNorm final_layer_norm_{nullptr};
  LoRACompatibleLinear text_projection_{nullptr};
};
TORCH_MODULE(CLIPTextModel);

// Loads the text model from weights under `prefix`, all-or-nothing, converting dtype.
//  kHF: weights[prefix + name] (see load_module_weights); ignores "embeddings.position_ids".
//  kOpenCLIP: open_clip names as SD2 "cond_stage_model.model." / SDXL
//    "conditioner.embedders.1.model." carry them: token_embedding.weight, positional_embedding
//    [T, W], transformer.resblocks.I.{ln_1, ln_2, attn.in_proj_weight [3W, W] (q|k|v rows),
//    attn.in_proj_bias [3W], attn.out_proj.*, mlp.c_fc.*, mlp.c_proj.*}, ln_final.*,
//    text_projection [W, P] (x @ P; our Linear holds its transpose); ignores logit_scale and
//    attn_mask. Every resblock present must exist in the model (SD 2.x files carry all 24).
// Throws std::runtime_error listing missing keys, shape mismatches (key, expected, found) and
// unexpected keys, named as the checkpoint names them.
void load_state_dict(CLIPTextModel& text_model,
                     const std::unordered_map<std::string, torch::Tensor>& weights,
                     const std::string& prefix = kCLIPTextCheckpointPrefix,
                     TextEncoderLayout layout = TextEncoderLayout::kHF);

// Every parameter of `text_model` under `prefix` in `layout` (the inverse of load_state_dict):
// kOpenCLIP fuses q/k/v into in_proj_weight / in_proj_bias and transposes text_projection.
// Returns fresh tensors for fused / transposed entries, detached views otherwise.
std::unordered_map<std::string, torch::Tensor> text_encoder_weights(const CLIPTextModel& text_model,
                                                                    const std::string& prefix,
                                                                    TextEncoderLayout layout);

}  // namespace lf
