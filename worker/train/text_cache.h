// Text-encoder outputs per caption, computed with the frozen CLIP text model (kohya
// cache_text_encoder_outputs). Base captions are cached in memory and, with
// dataset.cache_text_encoder_outputs_to_disk, on disk (text_disk_cache.h); captions that change
// per epoch (shuffle_caption, dropout) come from the plan and are encoded each time.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <unordered_map>

#include "common/text/clip_tokenizer.h"
#include "worker/core/model/clip_text_model.h"

namespace lf {

class TextDiskCache;

class TextCache {
 public:
  struct Options {
    at::Device device = at::Device(at::kCPU);
    std::string disk_dir;               // "" = memory only
    std::string text_encoder_identity;  // model_identity of the text encoder (with disk_dir)
    std::string tokenizer_identity;     // e.g. SHA-256 of the BPE vocabulary file
  };
  TextCache(CLIPTextModel& clip, const CLIPTokenizer& tokenizer, Options options);
  ~TextCache();

  // [77, hidden] context of `caption` (tokenised, framed and padded to 77), on the device,
  // cached. Throws std::runtime_error naming the cache file for a corrupt disk entry.
  const at::Tensor& get(const std::string& caption);
  // The same, computed now and not cached (per-epoch captions).
  at::Tensor encode(const std::string& caption);

 private:
  CLIPTextModel& clip_;
  const CLIPTokenizer& tokenizer_;
  Options options_;
  std::unique_ptr<TextDiskCache> disk_;
  std::unordered_map<std::string, at::Tensor> cache_;
};

}  // namespace lf
