// Latent cache (see header).
#include "worker/train/latent_cache.h"

#include <ATen/ATen.h>

#include <stdexcept>

#include "common/image/decoded_image.h"
#include "common/io/sha256.h"
#include "common/util/log.h"
#include "worker/train/latent_disk_cache.h"

namespace lf {

LatentCache::LatentCache(const Dataset& dataset, Options options, EncodeFn encode)
    : dataset_(dataset), options_(std::move(options)), encode_(std::move(encode)) {
  if (!options_.disk_dir.empty()) disk_ = std::make_unique<LatentDiskCache>(options_.disk_dir);
}

LatentCache::~LatentCache() = default;

bool LatentCache::alpha_mask_of(const ImageRecord& record) const {
  return record.subset_index >= 0 && record.subset_index < static_cast<int>(dataset_.subsets.size()) &&
         dataset_.subsets[record.subset_index].config.alpha_mask;
}

std::pair<at::Tensor, at::Tensor> LatentCache::image_tensors(const ImageRecord& record,
                                                             const CropFlip& cf, bool alpha_mask,
                                                             std::int64_t max_pixels) {
  DecodeOptions decode;
  decode.keep_alpha = alpha_mask;
  decode.max_pixels = max_pixels;
  const std::vector<std::uint8_t> bytes = read_file_bytes(record.path);
  // The cache key holds the scan's content hash: latents of other bytes must never be stored
  // (or trained on) under it.
  if (!record.content_sha256.empty() &&
      sha256_hex(bytes.data(), bytes.size()) != record.content_sha256) {
    throw DatasetError(record.path + ": the file changed after the dataset was scanned; "
                       "restart the job so the coordinator rescans it");
  }
  const DecodedImage full = decode_image(record.path, bytes, decode);
  if (full.width != record.width || full.height != record.height) {
    throw DatasetError(record.path + ": the image is now " + std::to_string(full.width) + "x" +
                       std::to_string(full.height) + ", it was " + std::to_string(record.width) +
                       "x" + std::to_string(record.height) +
                       " when the dataset was scanned; restart the job to rescan");
  }
  PreparedImage img = prepare_image(full, record.bucket, cf, alpha_mask);
  // HWC uint8 -> [1,3,H,W] float in [-1,1] (kohya: ToTensor then Normalize(0.5, 0.5)).
  at::Tensor pixels = at::from_blob(img.rgb.data(), {img.height, img.width, 3}, at::kByte)
                          .permute({2, 0, 1})
                          .to(at::kFloat)
                          .div(127.5)
                          .sub(1.0)
                          .unsqueeze(0)
                          .contiguous();
  at::Tensor alpha;
  if (alpha_mask) {
    alpha = at::from_blob(img.alpha.data(), {img.height, img.width}, at::kByte).clone();
  }
  return {pixels, alpha};
}

namespace {

// The encoder's output, checked: a latent with NaN or Inf would only show up later as a NaN loss.
at::Tensor checked_latents(at::Tensor latents, const ImageRecord& record) {
  if (!at::isfinite(latents).all().item<bool>()) {
    throw DatasetError(record.path + ": its latents hold NaN or Inf values (an fp16 VAE "
                       "overflows, SDXL's in particular: set model.vae_dtype: fp32)");
  }
  return latents;
}

}  // namespace

LatentCacheKey LatentCache::key_for(const ImageRecord& record, const CropFlip& cf) const {
  LatentCacheKey key;
  key.content_sha256 = record.content_sha256;
  key.bucket_width = record.bucket.bucket.width;
  key.bucket_height = record.bucket.bucket.height;
  key.resized_width = record.bucket.resized_width;
  key.resized_height = record.bucket.resized_height;
  // Centre crop written out, so a centre entry and an explicit equal offset share a file.
  key.crop_left = cf.crop_left >= 0 ? cf.crop_left
                                    : (record.bucket.resized_width - record.bucket.bucket.width) / 2;
  key.crop_top = cf.crop_top >= 0 ? cf.crop_top
                                  : (record.bucket.resized_height - record.bucket.bucket.height) / 2;
  key.flip = cf.flip;
  key.alpha_mask = alpha_mask_of(record);
  key.vae_identity = options_.vae_identity;
  return key;
}

LatentCache::Entry LatentCache::to_device(const at::Tensor& latents_cpu,
                                          const at::Tensor& alpha_u8) const {
  Entry e;
  e.latents = latents_cpu.to(options_.device);
  if (alpha_u8.defined()) {
    // kohya apply_masked_loss: the alpha (0..1) area-resized to the latent size.
    at::Tensor a = alpha_u8.to(at::kFloat).div(255.0).unsqueeze(0).unsqueeze(0);
    e.mask = at::adaptive_avg_pool2d(a, {latents_cpu.size(1), latents_cpu.size(2)})
                 .squeeze(0)
                 .to(options_.device);
  }
  return e;
}

LatentCache::Entry LatentCache::encode_entry(const ImageRecord& record, const CropFlip& cf,
                                             bool* from_disk) {
  *from_disk = false;
  const bool alpha = alpha_mask_of(record);
  const LatentCacheKey key = key_for(record, cf);
  // A random crop changes every epoch: such entries would only fill the disk (see header).
  const bool use_disk = disk_ && cf.crop_left < 0 && cf.crop_top < 0;
  if (use_disk) {
    std::string stale_reason;
    if (auto hit = disk_->load(key, record.path, &stale_reason)) {
      *from_disk = true;
      return to_device(hit->latents, hit->alpha_mask);
    }
    if (!stale_reason.empty()) {
      LF_INFO("latent cache: re-encoding " << record.path << " (" << stale_reason << ")");
    }
  }
  auto [pixels, alpha_u8] = image_tensors(record, cf, alpha, options_.max_image_pixels);
  at::Tensor latents = checked_latents(
      encode_(pixels.to(options_.device), latent_noise_seed(key)).squeeze(0).detach(), record);
  if (use_disk) {
    LatentEntry entry;
    entry.latents = latents.to(at::kCPU).contiguous();
    entry.alpha_mask = alpha_u8;
    disk_->store(key, entry);
  }
  return to_device(latents.to(at::kCPU), alpha_u8);
}

LatentCache::Entry LatentCache::get(int index, const CropFlip& cf) {
  if (index < 0 || index >= static_cast<int>(dataset_.images.size())) {
    throw std::out_of_range("latent cache: image index " + std::to_string(index) +
                            " outside the dataset of " + std::to_string(dataset_.images.size()));
  }
  const ImageRecord& rec = dataset_.images[index];
  bool from_disk = false;
  if (cf.crop_left >= 0 || cf.crop_top >= 0) return encode_entry(rec, cf, &from_disk);
  const auto mkey = std::make_tuple(index, cf.crop_left, cf.crop_top, cf.flip);
  auto it = memory_.find(mkey);
  if (it != memory_.end()) return it->second;
  return memory_.emplace(mkey, encode_entry(rec, cf, &from_disk)).first->second;
}

template <typename Fn>
void LatentCache::for_each_cacheable(Fn fn) const {
  for (const ImageRecord& rec : dataset_.images) {
    const SubsetConfig& sub = dataset_.subsets.at(rec.subset_index).config;
    if (sub.random_crop) continue;  // never cached (see header)
    for (bool flip : {false, true}) {
      if (flip && !sub.flip_aug) continue;
      CropFlip cf;
      cf.flip = flip;
      fn(rec.index, cf);
    }
  }
}

LatentCache::ShardStats LatentCache::precompute_shard(int rank, int world_size) {
  ShardStats stats;
  if (!disk_) return stats;
  std::size_t position = 0;
  for_each_cacheable([&](int index, const CropFlip& cf) {
    if (position++ % static_cast<std::size_t>(world_size) != static_cast<std::size_t>(rank)) {
      return;
    }
    const ImageRecord& rec = dataset_.images[index];
    const LatentCacheKey key = key_for(rec, cf);
    std::string stale_reason;
    if (disk_->load(key, rec.path, &stale_reason)) {
      ++stats.reused;
      return;
    }
    if (!stale_reason.empty()) ++stats.stale;
    auto [pixels, alpha_u8] = image_tensors(rec, cf, key.alpha_mask, options_.max_image_pixels);
    LatentEntry entry;
    entry.latents = checked_latents(encode_(pixels.to(options_.device), latent_noise_seed(key))
                                        .squeeze(0)
                                        .detach()
                                        .to(at::kCPU)
                                        .contiguous(),
                                    rec);
    entry.alpha_mask = alpha_u8;
    disk_->store(key, entry);
    ++stats.encoded;
  });
  return stats;
}

bool LatentCache::fully_cacheable() const {
  for (const SubsetInfo& sub : dataset_.subsets) {
    if (sub.config.random_crop) return false;
  }
  return true;
}

int LatentCache::precompute_all() {
  if (disk_) return 0;
  int encoded = 0;
  for_each_cacheable([&](int index, const CropFlip& cf) {
    const std::size_t before = memory_.size();
    get(index, cf);
    encoded += memory_.size() > before;
  });
  return encoded;
}

}  // namespace lf
