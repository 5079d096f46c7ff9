// Text-encoder output cache (see header).
#include "worker/train/text_cache.h"

#include <torch/torch.h>

#include "worker/train/text_disk_cache.h"

namespace lf {

TextCache::TextCache(CLIPTextModel& clip, const CLIPTokenizer& tokenizer, Options options)
    : clip_(clip), tokenizer_(tokenizer), options_(std::move(options)) {
  if (!options_.disk_dir.empty()) disk_ = std::make_unique<TextDiskCache>(options_.disk_dir);
}

TextCache::~TextCache() = default;

at::Tensor TextCache::encode(const std::string& caption) {
  const std::vector<int> ids = tokenizer_.tokenize(caption);
  at::Tensor input_ids = torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()), torch::kLong)
                             .unsqueeze(0)
                             .to(options_.device);
  torch::NoGradGuard no_grad;
  return clip_->forward(input_ids).squeeze(0).detach();  // [77, hidden]
}

const at::Tensor& TextCache::get(const std::string& caption) {
  auto it = cache_.find(caption);
  if (it != cache_.end()) return it->second;
  at::Tensor context;
  if (disk_) {
    TextCacheKey key;
    key.caption = caption;
    key.tokenizer_identity = options_.tokenizer_identity;
    key.text_encoder_identity = options_.text_encoder_identity;
    key.clip_skip = 1;  // the final layer
    if (auto hit = disk_->load(key)) {
      context = hit->context.to(options_.device);
    } else {
      context = encode(caption);
      TextEncoderEntry entry;
      entry.context = context.to(at::kCPU).contiguous();
      disk_->store(key, entry);
    }
  } else {
    context = encode(caption);
  }
  return cache_.emplace(caption, context).first->second;
}

}  // namespace lf
