// Latent cache (see header).
#include "worker/train/latent_cache.h"

#include <ATen/ATen.h>

#include <stdexcept>

#include "common/data/image_ops.h"

namespace lf {

LatentCache::LatentCache(const Dataset& dataset, at::Device device, EncodeFn encode)
    : dataset_(dataset), device_(device), encode_(std::move(encode)) {}

at::Tensor LatentCache::image_tensor(const ImageRecord& record) {
  const RgbImage full = load_rgb_image(record.path);
  const RgbImage img = resize_and_center_crop(full, record.bucket);
  // HWC uint8 → [1,3,H,W] float in [-1,1] (kohya: ToTensor then Normalize(0.5, 0.5)).
  at::Tensor t = at::from_blob(const_cast<std::uint8_t*>(img.pixels.data()),
                               {img.height, img.width, 3}, at::kByte)
                     .permute({2, 0, 1})
                     .to(at::kFloat)
                     .div(127.5)
                     .sub(1.0)
                     .unsqueeze(0)
                     .contiguous();
  return t;
}

const at::Tensor& LatentCache::get(int index) {
  auto it = cache_.find(index);
  if (it != cache_.end()) return it->second;
  if (index < 0 || index >= static_cast<int>(dataset_.images.size())) {
    throw std::out_of_range("latent cache: image index " + std::to_string(index) +
                            " outside the dataset of " + std::to_string(dataset_.images.size()));
  }
  const ImageRecord& rec = dataset_.images[index];
  at::Tensor pixels = image_tensor(rec).to(device_);
  at::Tensor latents = encode_(pixels, index).squeeze(0);
  return cache_.emplace(index, latents.detach()).first->second;
}

}  // namespace lf
