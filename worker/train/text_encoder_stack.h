// The text conditioning of one model family: every text encoder of the checkpoint run on the
// same caption, each with its own padding, layer choice and final LayerNorm, their hidden states
// concatenated (SDXL: CLIP-L 768 ‖ bigG 1280 = 2048) and the last encoder's pooled output kept
// (SDXL's vector conditioning). Long captions (kohya --max_token_length 150 / 225) run as 75-token
// windows, joined back as kohya does (token_windows.h). Mirrors kohya's strategy_sd /
// strategy_sdxl TextEncodingStrategy and sgm's GeneralConditioner for the crossattn and vector
// keys.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/text/clip_tokenizer.h"
#include "worker/core/model/clip_text_model.h"
#include "worker/core/model/model_config.h"

namespace lf {

struct TextConditioning {
  // [B, 75 n + 2, context_dim] (77 for max_token_length 75, 152 for 150, 227 for 225): the
  // encoders' selected hidden states, windows joined, encoders concatenated
  at::Tensor context;
  // [B, P]: the last encoder's pooled output of the caption's first window (SDXL); undefined
  // otherwise
  at::Tensor pooled;
};

class TextEncoderStack {
 public:
  // `encoders[i]` runs with `preset.text_encoders[i]`'s layer rule, on whatever device the caller
  // put it. clip_skip (kohya/A1111): 0 keeps each encoder's family default; k >= 1 takes
  // the output k layers from the end of SD 1.x's encoder, and of SD 2.x's encoder without its
  // last layer (kohya drops ViT-H's 24th layer, so k = 1 is the penultimate, SD 2.x's default),
  // final LayerNorm applied as kohya does; SDXL ignores clip_skip 1 (kohya ignores clip_skip
  // there) and refuses more. max_token_length: kohya --max_token_length, 75 (kohya's unset), 150
  // or 225; clip_skip and each family's layer rule apply to every window. Throws
  // std::invalid_argument for clip_skip > 1 with SDXL, for a layer beyond the encoder's depth,
  // for another max_token_length, or when the encoder count differs from the preset's.
  TextEncoderStack(const ModelPreset& preset, std::vector<CLIPTextModel> encoders,
                   const CLIPTokenizer& tokenizer, int clip_skip, int max_token_length = 75);

  // Tokenises each caption per encoder (max_token_length + 2 ids with the encoder's pad token,
  // split into 77-id windows: kohya_token_windows), runs the windows where each encoder is, joins
  // their hidden states (join_window_states) and returns the conditioning on `device`. Runs under
  // the caller's grad mode (text-encoder LoRA training needs gradients).
  TextConditioning encode(const std::vector<std::string>& captions, at::Device device);

  // Layer each encoder returns, counted from its end (1 = last).
  const std::vector<int64_t>& hidden_layers_from_end() const { return layers_; }
  // A short canonical description of the layer choices, for cache keys ("1", "2+ln,2").
  std::string layer_rendering() const;
  std::vector<CLIPTextModel>& encoders() { return encoders_; }
  bool has_pooled() const { return with_pooled_; }
  int max_token_length() const { return max_token_length_; }

 private:
  ModelPreset preset_;
  std::vector<CLIPTextModel> encoders_;
  const CLIPTokenizer& tokenizer_;
  std::vector<int64_t> layers_;
  bool with_pooled_ = false;
  int max_token_length_ = 75;
  std::int64_t windows_ = 1;
};

}  // namespace lf
