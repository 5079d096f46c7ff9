// Text-encoder outputs per distinct caption, computed once with the frozen CLIP text model
// (captions are fixed in this trainer: no shuffling or dropout yet), as kohya's
// cache_text_encoder_outputs does.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <unordered_map>

#include "common/text/clip_tokenizer.h"
#include "worker/core/model/clip_text_model.h"

namespace lf {

class TextCache {
 public:
  TextCache(CLIPTextModel& clip, const CLIPTokenizer& tokenizer, at::Device device);
  // [77, hidden] context of `caption` (tokenised, framed and padded to 77), on the device.
  const at::Tensor& get(const std::string& caption);

 private:
  CLIPTextModel& clip_;
  const CLIPTokenizer& tokenizer_;
  at::Device device_;
  std::unordered_map<std::string, at::Tensor> cache_;
};

}  // namespace lf
