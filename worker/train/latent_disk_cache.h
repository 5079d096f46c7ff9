// On-disk latent cache (kohya's --cache_latents_to_disk): one safetensors file per (image
// content, bucket, resize, crop, flip, alpha mask, VAE), so a later run, another rank or a resume
// skips the VAE encode. Unlike kohya's "<stem>_<W>x<H>_sd.npz" next to the image (named by the
// original size only, and reused after a bucket change without a shape check: sd-scripts
// library/train_util.py is_disk_cached_latents_is_expected / load_latents_from_disk), the file
// is named by a digest of the whole key, holds the full key in its metadata and is validated
// before use.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>

namespace lf {

// Everything that determines an image's latents. Sizes are pixels; the bucket is the encoded
// image size (kohya's bucket_reso), resized_* the image size before the crop (kohya's
// resized_size).
struct LatentCacheKey {
  std::string content_sha256;  // of the image file's bytes (sha256_file_hex), lowercase hex
  int bucket_width = 0;
  int bucket_height = 0;
  int resized_width = 0;
  int resized_height = 0;
  int crop_left = 0;
  int crop_top = 0;
  bool flip = false;         // horizontally flipped before encoding (kohya flip_aug)
  bool alpha_mask = false;   // the entry carries the image's alpha channel (kohya alpha_mask)
  std::string vae_identity;  // module_identity() of the VAE's state dict

  // Canonical text of every field under a kind line (cache_file.h CacheKeyRendering). It leaves
  // out the format version (kept in the file's metadata instead), so after a version bump the
  // new file replaces the old one at the same path rather than orphaning it.
  std::string rendering() const;
  // sha256 hex of rendering().
  std::string digest() const;
  // digest() + ".safetensors".
  std::string file_name() const;
};

// Bumped when the file layout changes; files of another version are stale (re-encoded).
inline constexpr const char* kLatentCacheFormat = "lorafleet-latent-cache/1";

// Seed of the VAE's posterior sample for this key: the first 8 bytes of key.digest(), big-endian.
// A pure function of the key, not of the job seed or the image's index, so that a cache written by
// one run is what any other run (other seed, other dataset order, other rank) would have encoded,
// and re-encoding a deleted entry reproduces the same bytes. (kohya draws from the global torch
// RNG, so its cached latents depend on the encode order.)
std::uint64_t latent_noise_seed(const LatentCacheKey& key);

struct LatentEntry {
  at::Tensor latents;     // [4, bucket_height/8, bucket_width/8] float32 CPU, scaled by the VAE
                          // scale factor (0.18215 for SD1)
  at::Tensor alpha_mask;  // [bucket_height, bucket_width] uint8 (alpha 0..255; kohya stores it as
                          // float32 0..1), undefined when !key.alpha_mask
};

class LatentDiskCache {
 public:
  // `dir` need not exist yet; store() creates it.
  explicit LatentDiskCache(std::string dir);

  // The cached entry of `key`, or nullopt when there is none or it is stale (written for another
  // key or format version; *stale_reason then says why, for a "re-encoding <image>: <reason>"
  // log; it is cleared otherwise). `image_path` is only used in messages.
  // Throws std::runtime_error naming the cache file and the image, and saying to delete the file
  // (or the cache folder), when the file is corrupt: not valid safetensors (truncated, unparsable
  // header), "latents" missing or not float32 [4, bucket_height/8, bucket_width/8] or holding
  // NaN/Inf, "alpha_mask" not uint8 [bucket_height, bucket_width], present without
  // key.alpha_mask or missing with it, or another tensor present.
  // Throws std::invalid_argument if the key's bucket is not a positive multiple of 8.
  std::optional<LatentEntry> load(const LatentCacheKey& key, const std::string& image_path,
                                  std::string* stale_reason = nullptr) const;

  // Writes the entry atomically at path_for(key), replacing any file there (cache_file.h
  // write_cache_file: safe when several ranks store the same key at once).
  // Throws std::invalid_argument naming the image key if the entry does not have the shapes and
  // dtypes load() expects or its latents hold NaN/Inf (kohya raises on NaN latents too);
  // std::runtime_error naming the path on IO failure.
  void store(const LatentCacheKey& key, const LatentEntry& entry) const;

  // "<dir>/<first two hex chars>/<key.file_name()>".
  std::string path_for(const LatentCacheKey& key) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace lf
