// transformers CLIPTextTransformer forward for SD conditioning: token + position embeddings,
// pre-LN causal encoder layers, final LayerNorm, the clip-skip hidden-state selection and the
// pooled (projected) eos embedding; HF <-> open_clip key mapping.
#include "model/clip_text_model.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <stdexcept>
#include <vector>

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
  return run_block(
      *this, [this](const std::vector<torch::Tensor>& in) { return forward_block(in[0]); }, {x});
}

torch::Tensor CLIPEncoderLayerImpl::forward_block(const torch::Tensor& x) {
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
  if (c.projection_dim > 0) {
    text_projection_ = register_module(
        "text_projection", LoRACompatibleLinear(c.hidden_size, c.projection_dim, /*bias=*/false));
  }
  freeze_parameters(*this);
}

CLIPTextOutput CLIPTextModelImpl::forward(const torch::Tensor& input_ids,
                                          int64_t hidden_layer_from_end,
                                          bool apply_final_layer_norm, bool with_pooled) {
  if (hidden_layer_from_end < 1 || hidden_layer_from_end > config_.num_layers) {
    throw std::invalid_argument("CLIPTextModel: hidden_layer_from_end (clip skip) must be in [1, " +
                                std::to_string(config_.num_layers) + "], got " +
                                std::to_string(hidden_layer_from_end));
  }
  const int64_t b = input_ids.size(0), t = input_ids.size(1);
  if (t > config_.max_position_embeddings) {
    throw std::invalid_argument("CLIPTextModel: " + std::to_string(t) +
                                " tokens exceed max_position_embeddings " +
                                std::to_string(config_.max_position_embeddings));
  }
  const auto i64 = torch::dtype(torch::kInt64).device(input_ids.device());
  torch::Tensor positions = torch::arange(t, i64).unsqueeze(0);
  torch::Tensor h = token_embedding_->forward(input_ids) + position_embedding_->forward(positions);
  const int64_t selected_layer = config_.num_layers - hidden_layer_from_end;  // 0-based
  torch::Tensor selected;
  // Without the pooled output, the layers after the selected one are not run at all (SD 2.x's
  // 24th ViT-H layer, SDXL's last CLIP-L layer): no compute, no autograd graph kept.
  const int64_t last = with_pooled ? config_.num_layers - 1 : selected_layer;
  for (int64_t i = 0; i <= last; ++i) {
    h = layers_->ptr(i)->as<CLIPEncoderLayerImpl>()->forward(h);
    if (i == selected_layer) selected = h;
  }
  CLIPTextOutput out;
  out.hidden = apply_final_layer_norm ? final_layer_norm_->forward(selected) : selected;
  if (!with_pooled) return out;
  // LayerNorm is per token, so normalising only the eos rows equals HF's LN-then-gather.
  torch::Tensor eos = (input_ids == config_.eos_token_id).to(torch::kInt32).argmax(-1);
  torch::Tensor pooled = final_layer_norm_->forward(h.index({torch::arange(b, i64), eos}));
  out.pooled = text_projection_ ? text_projection_->forward(pooled) : pooled;
  return out;
}

std::size_t CLIPTextModelImpl::set_gradient_checkpointing(bool on) {
  return lf::set_gradient_checkpointing(*this, on);
}

namespace {

// Where an HF-named parameter lives in an open_clip state dict.
struct OpenClipSource {
  std::string key;         // relative open_clip key
  int64_t slice = -1;      // 0/1/2: q/k/v row block of the fused in_proj tensor
  bool transpose = false;  // text_projection is stored [W, P]
};

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

OpenClipSource open_clip_source(const std::string& name) {
  if (name == "embeddings.token_embedding.weight") return {"token_embedding.weight"};
  if (name == "embeddings.position_embedding.weight") return {"positional_embedding"};
  if (name == "text_projection.weight") return {"text_projection", -1, true};
  if (starts_with(name, "final_layer_norm.")) return {"ln_final." + name.substr(17)};
  const std::string layers = "encoder.layers.";
  if (starts_with(name, layers)) {
    const size_t dot = name.find('.', layers.size());
    const std::string index = name.substr(layers.size(), dot - layers.size());
    const std::string rest = name.substr(dot + 1);
    const std::string block = "transformer.resblocks." + index + ".";
    const size_t last = rest.rfind('.');
    const std::string module = rest.substr(0, last), param = rest.substr(last + 1);
    static const char* kQKV[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"};
    for (int64_t k = 0; k < 3; ++k) {
      if (module == kQKV[k]) return {block + "attn.in_proj_" + param, k};
    }
    if (module == "self_attn.out_proj") return {block + "attn.out_proj." + param};
    if (module == "layer_norm1") return {block + "ln_1." + param};
    if (module == "layer_norm2") return {block + "ln_2." + param};
    if (module == "mlp.fc1") return {block + "mlp.c_fc." + param};
    if (module == "mlp.fc2") return {block + "mlp.c_proj." + param};
  }
  throw std::logic_error("CLIPTextModel: no open_clip name for parameter " + name);
}

std::string shape_of(const torch::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

std::string shape_of(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string list_first(const std::set<std::string>& keys, size_t limit = 8) {
  std::string s;
  size_t i = 0;
  for (const auto& k : keys) {
    if (i == limit) {
      s += ", ... (" + std::to_string(keys.size()) + " in total)";
      break;
    }
    s += (i++ ? ", " : "") + k;
  }
  return s;
}

void load_open_clip(CLIPTextModelImpl& model, const WeightMap& weights, const std::string& prefix) {
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;  // (destination, source)
  std::set<std::string> consumed, missing, mismatched;
  for (auto& item : model.named_parameters(/*recurse=*/true)) {
    torch::Tensor& dst = item.value();
    const OpenClipSource src = open_clip_source(item.key());
    const std::string key = prefix + src.key;
    consumed.insert(key);
    auto it = weights.find(key);
    if (it == weights.end()) {
      missing.insert(key);
      continue;
    }
    std::vector<int64_t> expected(dst.sizes().begin(), dst.sizes().end());
    if (src.slice >= 0) expected[0] *= 3;
    if (src.transpose) std::reverse(expected.begin(), expected.end());
    const torch::Tensor& found = it->second;
    if (found.sizes() != torch::IntArrayRef(expected)) {
      mismatched.insert(key + ": expected " + shape_of(expected) + ", found " + shape_of(found));
      continue;
    }
    torch::Tensor value = found;
    if (src.slice >= 0) value = found.narrow(0, src.slice * dst.size(0), dst.size(0));
    if (src.transpose) value = found.t();
    copies.emplace_back(dst, value);
  }
  std::set<std::string> unexpected;
  for (const auto& entry : weights) {
    const std::string& key = entry.first;
    if (!starts_with(key, prefix) || consumed.count(key)) continue;
    const std::string rel = key.substr(prefix.size());
    if (rel == "logit_scale" || rel == "attn_mask" || rel == "transformer.attn_mask") continue;
    unexpected.insert(key);
  }
  if (!missing.empty() || !mismatched.empty() || !unexpected.empty()) {
    std::string message =
        "cannot load CLIPTextModel weights (open_clip layout, prefix \"" + prefix + "\"):";
    if (!missing.empty()) {
      message += "\n  " + std::to_string(missing.size()) + " missing keys: " + list_first(missing);
    }
    size_t n = 0;
    for (const auto& m : mismatched) {
      if (n++ == 8) {
        message += "\n  ... " + std::to_string(mismatched.size()) + " shape mismatches in total";
        break;
      }
      message += "\n  shape mismatch for " + m;
    }
    if (!unexpected.empty()) {
      message += "\n  " + std::to_string(unexpected.size()) +
                 " unexpected keys: " + list_first(unexpected);
    }
    throw std::runtime_error(message);
  }
  torch::NoGradGuard no_grad;
  for (auto& copy : copies) copy.first.copy_(copy.second);
}

}  // namespace

void load_state_dict(CLIPTextModel& text_model,
                     const std::unordered_map<std::string, torch::Tensor>& weights,
                     const std::string& prefix, TextEncoderLayout layout) {
  if (layout == TextEncoderLayout::kOpenCLIP) {
    load_open_clip(*text_model, weights, prefix);
    return;
  }
  auto ignorable = [](const std::string& key) { return key == "embeddings.position_ids"; };
  load_module_weights(*text_model, weights, prefix, ignorable, "CLIPTextModel");
}

std::unordered_map<std::string, torch::Tensor> text_encoder_weights(const CLIPTextModel& text_model,
                                                                    const std::string& prefix,
                                                                    TextEncoderLayout layout) {
  if (layout == TextEncoderLayout::kHF) return module_weights(*text_model, prefix);
  WeightMap out;
  std::map<std::string, std::array<torch::Tensor, 3>> fused;
  for (const auto& item : text_model->named_parameters(/*recurse=*/true)) {
    const OpenClipSource src = open_clip_source(item.key());
    torch::Tensor value = item.value().detach();
    if (src.slice >= 0) {
      fused[prefix + src.key][src.slice] = value;
    } else {
      out.emplace(prefix + src.key, src.transpose ? value.t().contiguous() : value);
    }
  }
  for (auto& kv : fused) {
    out.emplace(kv.first, torch::cat({kv.second[0], kv.second[1], kv.second[2]}, /*dim=*/0));
  }
  return out;
}

}  // namespace lf
