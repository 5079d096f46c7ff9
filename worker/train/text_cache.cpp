// Text-encoder output cache (see header).
#include "worker/train/text_cache.h"

#include <torch/torch.h>

namespace lf {

TextCache::TextCache(CLIPTextModel& clip, const CLIPTokenizer& tokenizer, at::Device device)
    : clip_(clip), tokenizer_(tokenizer), device_(device) {}

const at::Tensor& TextCache::get(const std::string& caption) {
  auto it = cache_.find(caption);
  if (it != cache_.end()) return it->second;
  const std::vector<int> ids = tokenizer_.tokenize(caption);
  at::Tensor input_ids =
      torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()), torch::kLong).unsqueeze(0).to(device_);
  torch::NoGradGuard no_grad;
  at::Tensor context = clip_->forward(input_ids).squeeze(0).detach();  // [77, hidden]
  return cache_.emplace(caption, context).first->second;
}

}  // namespace lf
