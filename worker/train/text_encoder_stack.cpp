// Text conditioning of SD 1.x / 2.x / XL from their text encoders (see header).
#include "worker/train/text_encoder_stack.h"

#include <torch/torch.h>

#include <stdexcept>

#include "worker/train/token_windows.h"

namespace lf {

TextEncoderStack::TextEncoderStack(const ModelPreset& preset, std::vector<CLIPTextModel> encoders,
                                   const CLIPTokenizer& tokenizer, int clip_skip,
                                   int max_token_length)
    : preset_(preset),
      encoders_(std::move(encoders)),
      tokenizer_(tokenizer),
      max_token_length_(max_token_length),
      windows_(token_window_count(max_token_length)) {
  if (encoders_.size() != preset_.text_encoders.size() || encoders_.empty()) {
    throw std::invalid_argument("TextEncoderStack: " + std::to_string(encoders_.size()) +
                                " text encoders for a preset with " +
                                std::to_string(preset_.text_encoders.size()));
  }
  if (clip_skip > 1 && preset_.family == ModelFamily::kSDXL) {
    throw std::invalid_argument(
        "training.clip_skip: " + std::to_string(clip_skip) +
        " is not supported for SDXL (kohya ignores it; SDXL always uses the penultimate layer "
        "of both text encoders); remove the key or set it to 0");
  }
  for (std::size_t i = 0; i < encoders_.size(); ++i) {
    const TextEncoderSpec& spec = preset_.text_encoders[i];
    int64_t layer = spec.hidden_layer_from_end;
    if (clip_skip >= 1 && preset_.family != ModelFamily::kSDXL) {
      // SD 2.x: kohya's ViT-H has 23 layers, so its clip_skip k is layer k + 1 of the full 24.
      // SDXL keeps its penultimate layers: kohya ignores clip_skip there, and kohya_ss configs
      // often carry clip_skip: 1.
      layer = clip_skip + (preset_.family == ModelFamily::kSD2 ? 1 : 0);
    }
    if (layer > spec.config.num_layers) {
      throw std::invalid_argument("training.clip_skip: " + std::to_string(clip_skip) +
                                  " selects layer " + std::to_string(layer) +
                                  " from the end, but the text encoder has " +
                                  std::to_string(spec.config.num_layers) + " layers");
    }
    layers_.push_back(layer);
  }
  with_pooled_ = preset_.family == ModelFamily::kSDXL;
}

std::string TextEncoderStack::layer_rendering() const {
  std::string out;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(layers_[i]);
    if (preset_.text_encoders[i].apply_final_layer_norm) out += "+ln";
  }
  return out;
}

TextConditioning TextEncoderStack::encode(const std::vector<std::string>& captions,
                                          at::Device device) {
  if (captions.empty()) throw std::invalid_argument("TextEncoderStack::encode: no captions");
  const auto b = static_cast<int64_t>(captions.size());
  std::vector<at::Tensor> hidden;
  TextConditioning out;
  for (std::size_t i = 0; i < encoders_.size(); ++i) {
    const TextEncoderSpec& spec = preset_.text_encoders[i];
    const int pad = static_cast<int>(spec.pad_token);
    std::vector<int64_t> ids;
    ids.reserve(static_cast<std::size_t>(b * windows_ * kWindowLength));
    for (const std::string& c : captions) {
      const std::vector<int> t = tokenizer_.tokenize(c, max_token_length_ + 2, pad);
      const std::vector<int64_t> w = kohya_token_windows(t, CLIPTokenizer::kEndOfText, pad);
      ids.insert(ids.end(), w.begin(), w.end());
    }
    // On the encoder's own device: once the caches are complete the encoders may have left
    // the training device. Each window is one row [B * n, 77].
    const at::Device on = encoders_[i]->parameters().front().device();
    at::Tensor input_ids =
        torch::tensor(ids, torch::kLong).view({b * windows_, kWindowLength}).to(on);
    // Only SDXL's last encoder contributes a pooled output; the others stop at their layer.
    const bool pooled = with_pooled_ && i + 1 == encoders_.size();
    CLIPTextOutput o =
        encoders_[i]->forward(input_ids, layers_[i], spec.apply_final_layer_norm, pooled);
    hidden.push_back(join_window_states(o.hidden, windows_));
    if (pooled) out.pooled = first_window_pooled(o.pooled, windows_);
  }
  out.context = (hidden.size() == 1 ? hidden[0] : torch::cat(hidden, /*dim=*/-1)).to(device);
  if (out.pooled.defined()) out.pooled = out.pooled.to(device);
  return out;
}

}  // namespace lf
