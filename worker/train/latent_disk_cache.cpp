// On-disk latent cache (see header).
#include "worker/train/latent_disk_cache.h"

#include <ATen/ATen.h>

#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

#include "common/io/sha256.h"
#include "worker/train/cache_file.h"

namespace lf {
namespace {

constexpr const char* kLatentsName = "latents";
constexpr const char* kAlphaMaskName = "alpha_mask";
constexpr std::int64_t kLatentChannels = 4;  // SD1/SD2/SDXL VAEs

void check_bucket(const LatentCacheKey& key) {
  if (key.bucket_width <= 0 || key.bucket_height <= 0 || key.bucket_width % 8 != 0 ||
      key.bucket_height % 8 != 0) {
    throw std::invalid_argument("latent cache: bucket " + std::to_string(key.bucket_width) + "x" +
                                std::to_string(key.bucket_height) +
                                " is not a positive multiple of 8 in both sides");
  }
}

std::vector<int64_t> latent_shape(const LatentCacheKey& key) {
  return {kLatentChannels, key.bucket_height / 8, key.bucket_width / 8};
}

std::vector<int64_t> mask_shape(const LatentCacheKey& key) {
  return {key.bucket_height, key.bucket_width};
}

}  // namespace

std::string LatentCacheKey::rendering() const {
  CacheKeyRendering r("lorafleet latent cache key");
  r.add("content_sha256", content_sha256)
      .add("bucket_width", static_cast<std::int64_t>(bucket_width))
      .add("bucket_height", static_cast<std::int64_t>(bucket_height))
      .add("resized_width", static_cast<std::int64_t>(resized_width))
      .add("resized_height", static_cast<std::int64_t>(resized_height))
      .add("crop_left", static_cast<std::int64_t>(crop_left))
      .add("crop_top", static_cast<std::int64_t>(crop_top))
      .add("flip", flip)
      .add("alpha_mask", alpha_mask)
      .add("vae_identity", vae_identity);
  return r.str();
}

std::string LatentCacheKey::digest() const { return sha256_hex(rendering()); }

std::string LatentCacheKey::file_name() const { return digest() + ".safetensors"; }

std::uint64_t latent_noise_seed(const LatentCacheKey& key) {
  return digest_prefix_u64(key.digest());
}

LatentDiskCache::LatentDiskCache(std::string dir) : dir_(std::move(dir)) {}

std::string LatentDiskCache::path_for(const LatentCacheKey& key) const {
  return cache_file_path(dir_, key.digest());
}

std::optional<LatentEntry> LatentDiskCache::load(const LatentCacheKey& key,
                                                 const std::string& image_path,
                                                 std::string* stale_reason) const {
  if (stale_reason) stale_reason->clear();
  check_bucket(key);
  const std::string path = path_for(key);
  const auto corrupt = [&](const std::string& what) {
    return std::runtime_error("latent cache file " + path + " (for image " + image_path +
                              ") is corrupt: " + what +
                              "; delete this file (or the whole cache "
                              "folder " +
                              dir_ + ") and the latents will be encoded again");
  };

  std::optional<SafetensorsFile> file =
      open_current_cache_file(path, kLatentCacheFormat, key.rendering(), corrupt, stale_reason);
  if (!file) return std::nullopt;

  const TensorInfo* lat = file->find(kLatentsName);
  if (!lat) throw corrupt("no 'latents' tensor");
  if (lat->dtype != DType::F32 || lat->shape != latent_shape(key)) {
    throw corrupt("'latents' is " + dtype_name(lat->dtype) + " " + cache_shape_text(lat->shape) +
                  ", expected F32 " + cache_shape_text(latent_shape(key)) + " for bucket " +
                  std::to_string(key.bucket_width) + "x" + std::to_string(key.bucket_height));
  }
  const TensorInfo* mask = file->find(kAlphaMaskName);
  if (key.alpha_mask && !mask) throw corrupt("no 'alpha_mask' tensor although alpha_mask is on");
  if (!key.alpha_mask && mask) throw corrupt("an 'alpha_mask' tensor although alpha_mask is off");
  if (mask && (mask->dtype != DType::U8 || mask->shape != mask_shape(key))) {
    throw corrupt("'alpha_mask' is " + dtype_name(mask->dtype) + " " +
                  cache_shape_text(mask->shape) + ", expected U8 " +
                  cache_shape_text(mask_shape(key)));
  }
  const size_t expected_count = mask ? 2 : 1;
  if (file->tensors().size() != expected_count) {
    throw corrupt(std::to_string(file->tensors().size()) + " tensors, expected " +
                  std::to_string(expected_count));
  }

  LatentEntry entry;
  entry.latents = cache_tensor(*file, *lat);
  if (!at::isfinite(entry.latents).all().item<bool>()) {
    throw corrupt("'latents' holds NaN or Inf values");
  }
  if (mask) entry.alpha_mask = cache_tensor(*file, *mask);
  return entry;
}

void LatentDiskCache::store(const LatentCacheKey& key, const LatentEntry& entry) const {
  check_bucket(key);
  const std::string what = "latent cache entry for image " + key.content_sha256 + " (bucket " +
                           std::to_string(key.bucket_width) + "x" +
                           std::to_string(key.bucket_height) + ")";
  const at::Tensor& lat = entry.latents;
  const std::vector<int64_t> want = latent_shape(key);
  if (!lat.defined() || lat.scalar_type() != at::kFloat ||
      std::vector<int64_t>(lat.sizes().begin(), lat.sizes().end()) != want) {
    throw std::invalid_argument(
        what + ": latents must be float32 " + cache_shape_text(want) + ", got " +
        (lat.defined() ? std::string(c10::toString(lat.scalar_type())) + " " + cache_shape_text(lat)
                       : std::string("an undefined tensor")));
  }
  if (!at::isfinite(lat).all().item<bool>()) {
    throw std::invalid_argument(what + ": latents hold NaN or Inf values");
  }
  std::map<std::string, at::Tensor> tensors{{kLatentsName, lat}};
  const at::Tensor& mask = entry.alpha_mask;
  if (key.alpha_mask) {
    const std::vector<int64_t> mwant = mask_shape(key);
    if (!mask.defined() || mask.scalar_type() != at::kByte ||
        std::vector<int64_t>(mask.sizes().begin(), mask.sizes().end()) != mwant) {
      throw std::invalid_argument(
          what + ": alpha_mask must be uint8 " + cache_shape_text(mwant) + ", got " +
          (mask.defined()
               ? std::string(c10::toString(mask.scalar_type())) + " " + cache_shape_text(mask)
               : std::string("an undefined tensor")));
    }
    tensors.emplace(kAlphaMaskName, mask);
  } else if (mask.defined()) {
    throw std::invalid_argument(what + ": alpha_mask given although the key's alpha_mask is off");
  }
  write_cache_file(path_for(key), tensors, kLatentCacheFormat, key.rendering());
}

}  // namespace lf
