// In-memory latent cache: each image is decoded, resized/cropped to its bucket, and encoded by
// the VAE once, on first use; later epochs reuse the latents (kohya cache_latents, in memory).
// The encode function seeds the VAE's sampling noise by image (rng_streams.h), so every rank and
// every rerun or resume gets the same latents for the same image.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <unordered_map>

#include "common/data/dataset.h"

namespace lf {

class LatentCache {
 public:
  // encode: ([1,3,H,W] image in [-1,1] on `device`, image index) → [1,4,H/8,W/8] scaled latents.
  using EncodeFn = std::function<at::Tensor(const at::Tensor&, int image_index)>;
  LatentCache(const Dataset& dataset, at::Device device, EncodeFn encode);

  // [4, h, w] latents of image `index` (encodes on first use). Throws DatasetError naming the
  // file if it no longer decodes.
  const at::Tensor& get(int index);
  std::size_t size() const { return cache_.size(); }

  // [1,3,H,W] float tensor in [-1,1] of an image after resize and centre crop (exposed for tests).
  static at::Tensor image_tensor(const ImageRecord& record);

 private:
  const Dataset& dataset_;
  at::Device device_;
  EncodeFn encode_;
  std::unordered_map<int, at::Tensor> cache_;
};

}  // namespace lf
