// Text-encoder outputs per caption, computed with the frozen text encoders of the model family
// (kohya cache_text_encoder_outputs; only when the text encoders are not trained). Base captions are cached in memory and, with
// dataset.cache_text_encoder_outputs_to_disk, on disk (text_disk_cache.h); captions that change
// per epoch (shuffle_caption, dropout) come from the plan and are encoded each time.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "worker/train/text_encoder_stack.h"

namespace lf {

class TextDiskCache;

class TextCache {
 public:
  struct Options {
    at::Device device = at::Device(at::kCPU);
    std::string disk_dir;               // "" = memory only
    // Identity of the text encoders' weights and layer choices (with disk_dir).
    std::string text_encoder_identity;
    std::string tokenizer_identity;     // e.g. SHA-256 of the BPE vocabulary file
  };
  TextCache(TextEncoderStack& encoders, Options options);
  ~TextCache();

  // The conditioning of `caption` for one sample: context [75 n + 2, context_dim] (77, 152 or 227
  // positions for the encoders' max_token_length 75, 150 or 225) and, for SDXL,
  // pooled [P], on the device, cached. Throws std::runtime_error naming the cache file for a
  // corrupt disk entry.
  const TextConditioning& get(const std::string& caption);
  // The same, computed now under NoGrad and not cached (per-epoch captions).
  TextConditioning encode(const std::string& caption);
  // get() for every caption now (kohya caches the text-encoder outputs before training, so the
  // encoders can leave the device). Returns how many were not cached yet.
  std::size_t precompute(const std::vector<std::string>& captions);

 private:
  TextEncoderStack& encoders_;
  Options options_;
  std::unique_ptr<TextDiskCache> disk_;
  std::unordered_map<std::string, TextConditioning> cache_;
};

}  // namespace lf
