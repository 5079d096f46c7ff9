// Latents of every training sample, encoded once by the frozen VAE (kohya cache_latents), kept
// in memory and, with dataset.cache_latents_to_disk, in one file per (image content, bucket,
// crop, flip, alpha_mask, VAE) under the cache folder (latent_disk_cache.h), so later runs and
// other ranks reuse them. Samples with a random crop are never cached: their crop changes every
// epoch (kohya refuses cache_latents with random_crop; lorafleet encodes them each time).
//
// The VAE's sampling noise is seeded by the cache key (latent_noise_seed), not by the job seed or
// the image's index, so an entry re-encoded on any rank, in any run, has the same bytes.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "common/data/dataset.h"
#include "common/image/decoded_image.h"
#include "common/image/prepared_image.h"

namespace lf {

class LatentDiskCache;
struct LatentCacheKey;

class LatentCache {
 public:
  struct Options {
    at::Device device = at::Device(at::kCPU);
    std::string disk_dir;      // "" = memory only
    std::string vae_identity;  // model_identity of the VAE weights (needed with disk_dir)
    // dataset.max_image_pixels: the coordinator's scan accepted every image under this limit,
    // so the worker's decode must use the same one.
    std::int64_t max_image_pixels = DecodeOptions{}.max_pixels;
  };
  // encode: ([1,3,H,W] image in [-1,1] on `device`, noise seed) -> [1,4,H/8,W/8] scaled latents.
  using EncodeFn = std::function<at::Tensor(const at::Tensor& pixels, std::uint64_t noise_seed)>;

  struct Entry {
    at::Tensor latents;  // [4, h, w] on the device
    at::Tensor mask;     // [1, h, w] float in [0, 1] on the device (alpha_mask), else undefined
  };

  LatentCache(const Dataset& dataset, Options options, EncodeFn encode);
  ~LatentCache();

  // The latents of image `index` under crop/flip `cf`. Throws DatasetError naming the image if
  // it no longer decodes or its bytes changed since the scan, std::runtime_error naming the
  // cache file and the image for a corrupt cache entry or an IO error writing one,
  // DatasetError naming the image when its latents hold NaN or Inf (an fp16 VAE overflows),
  // std::invalid_argument for a crop outside the resized image,
  // std::out_of_range for a bad index.
  Entry get(int index, const CropFlip& cf);

  struct ShardStats {
    int encoded = 0;  // written by this rank
    int reused = 0;   // valid entries already on disk
    int stale = 0;    // entries on disk for another key version, re-encoded
  };
  // With a disk cache: the entries every epoch can need (each image centre-cropped, unflipped
  // and, for flip_aug subsets, flipped) are checked; this rank encodes and stores the missing
  // ones with position % world_size == rank. Call comm.barrier() after it on every rank.
  // Throws as get().
  ShardStats precompute_shard(int rank, int world_size);

  // True when no subset uses random_crop: once every entry is cached (on disk after
  // precompute_shard and a barrier, or in memory after precompute_all) the VAE is not needed.
  bool fully_cacheable() const;
  // Without a disk cache: encodes into memory now every entry an epoch can need (the ones
  // precompute_shard lists, all of them on this rank), as kohya caches latents before training.
  // Returns the number encoded (0 with a disk cache). Throws as get().
  int precompute_all();

  std::size_t size() const { return memory_.size(); }

  // [1,3,H,W] float tensor in [-1,1] and the [H,W] uint8 alpha (undefined without alpha_mask)
  // of an image after resize, crop and flip (exposed for tests). Throws DatasetError for an
  // image above `max_pixels` (dataset.max_image_pixels), naming its size and the limit.
  static std::pair<at::Tensor, at::Tensor> image_tensors(
      const ImageRecord& record, const CropFlip& cf, bool alpha_mask,
      std::int64_t max_pixels = DecodeOptions{}.max_pixels);

 private:
  LatentCacheKey key_for(const ImageRecord& record, const CropFlip& cf) const;
  // Calls fn(image index, crop/flip) for every entry an epoch can need: each image not in a
  // random_crop subset centre-cropped, unflipped and, in flip_aug subsets, flipped.
  template <typename Fn>
  void for_each_cacheable(Fn fn) const;
  Entry encode_entry(const ImageRecord& record, const CropFlip& cf, bool* from_disk);
  Entry to_device(const at::Tensor& latents_cpu, const at::Tensor& alpha_u8) const;
  bool alpha_mask_of(const ImageRecord& record) const;

  const Dataset& dataset_;
  Options options_;
  EncodeFn encode_;
  std::unique_ptr<LatentDiskCache> disk_;
  std::map<std::tuple<int, int, int, bool>, Entry> memory_;
};

}  // namespace lf
