// Text-encoder output cache (see header).
#include "worker/train/text_cache.h"

#include <torch/torch.h>

#include "worker/train/text_disk_cache.h"

namespace lf {

TextCache::TextCache(TextEncoderStack& encoders, Options options)
    : encoders_(encoders), options_(std::move(options)) {
  if (!options_.disk_dir.empty()) disk_ = std::make_unique<TextDiskCache>(options_.disk_dir);
}

TextCache::~TextCache() = default;

TextConditioning TextCache::encode(const std::string& caption) {
  torch::NoGradGuard no_grad;
  TextConditioning c = encoders_.encode({caption}, options_.device);
  c.context = c.context.squeeze(0).detach();                        // [75 n + 2, context_dim]
  if (c.pooled.defined()) c.pooled = c.pooled.squeeze(0).detach();  // [P]
  return c;
}

std::size_t TextCache::precompute(const std::vector<std::string>& captions) {
  std::size_t added = 0;
  for (const std::string& caption : captions) {
    const std::size_t before = cache_.size();
    get(caption);
    added += cache_.size() > before;
  }
  return added;
}

const TextConditioning& TextCache::get(const std::string& caption) {
  auto it = cache_.find(caption);
  if (it != cache_.end()) return it->second;
  TextConditioning c;
  if (disk_) {
    TextCacheKey key;
    key.caption = caption;
    key.tokenizer_identity = options_.tokenizer_identity;
    // The identity covers every encoder's weights and its layer choice (clip_skip).
    key.text_encoder_identity = options_.text_encoder_identity;
    key.with_pooled = encoders_.has_pooled();
    key.max_token_length = encoders_.max_token_length();
    if (auto hit = disk_->load(key)) {
      c.context = hit->context.to(options_.device);
      if (hit->pooled.defined()) c.pooled = hit->pooled.to(options_.device);
    } else {
      c = encode(caption);
      TextEncoderEntry entry;
      entry.context = c.context.to(at::kCPU).contiguous();
      if (c.pooled.defined()) entry.pooled = c.pooled.to(at::kCPU).contiguous();
      disk_->store(key, entry);
    }
  } else {
    c = encode(caption);
  }
  return cache_.emplace(caption, std::move(c)).first->second;
}

}  // namespace lf
