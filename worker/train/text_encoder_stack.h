// The text conditioning of one model family: every text encoder of the checkpoint run on the
// same caption, each with its own padding, layer choice and final LayerNorm, their hidden states
// concatenated (SDXL: CLIP-L 768 ‖ bigG 1280 = 2048) and the last encoder's pooled output kept
// (SDXL's vector conditioning). Mirrors kohya's strategy_sd / strategy_sdxl TextEncodingStrategy
// and sgm's GeneralConditioner for the crossattn and vector keys.
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
  at::Tensor context;  // [B, 77, context_dim]: the encoders' selected hidden states, concatenated
  at::Tensor pooled;   // [B, P]: the last encoder's pooled output (SDXL); undefined otherwise
};

class TextEncoderStack {
 public:
  // `encoders[i]` runs with `preset.text_encoders[i]`'s layer rule, on whatever device the caller
  // put it. clip_skip (kohya/A1111): 0 keeps each encoder's family default; k >= 1 takes
  // the output k layers from the end of SD 1.x's encoder, and of SD 2.x's encoder without its
  // last layer (kohya drops ViT-H's 24th layer, so k = 1 is the penultimate, SD 2.x's default),
  // final LayerNorm applied as kohya does; SDXL ignores clip_skip 1 (kohya ignores clip_skip
  // there) and refuses more. Throws std::invalid_argument for clip_skip > 1 with SDXL, for a layer beyond the encoder's depth, or when the
  // encoder count differs from the preset's.
  TextEncoderStack(const ModelPreset& preset, std::vector<CLIPTextModel> encoders,
                   const CLIPTokenizer& tokenizer, int clip_skip);

  // Tokenises each caption per encoder (77 ids with the encoder's pad token), runs them where
  // each encoder is and returns the conditioning on `device`. Runs under the caller's grad mode
  // (text-encoder LoRA training needs gradients).
  TextConditioning encode(const std::vector<std::string>& captions, at::Device device);

  // Layer each encoder returns, counted from its end (1 = last).
  const std::vector<int64_t>& hidden_layers_from_end() const { return layers_; }
  // A short canonical description of the layer choices, for cache keys ("1", "2+ln,2").
  std::string layer_rendering() const;
  std::vector<CLIPTextModel>& encoders() { return encoders_; }
  bool has_pooled() const { return with_pooled_; }

 private:
  ModelPreset preset_;
  std::vector<CLIPTextModel> encoders_;
  const CLIPTokenizer& tokenizer_;
  std::vector<int64_t> layers_;
  bool with_pooled_ = false;
};

}  // namespace lf
