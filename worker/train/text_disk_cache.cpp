// On-disk text-encoder output cache (see header).
#include "worker/train/text_disk_cache.h"

#include <ATen/ATen.h>

#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

#include "common/io/sha256.h"
#include "worker/train/cache_file.h"
#include "worker/train/token_windows.h"

namespace lf {
namespace {

constexpr const char* kContextName = "context";
constexpr const char* kPooledName = "pooled";
constexpr size_t kCaptionQuoteBytes = 80;

std::string describe(const at::Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  return std::string(c10::toString(t.scalar_type())) + " " + cache_shape_text(t);
}

}  // namespace

std::string quote_caption(const std::string& caption) {
  if (caption.size() <= kCaptionQuoteBytes) return "\"" + caption + "\"";
  size_t n = kCaptionQuoteBytes;
  // Back up over UTF-8 continuation bytes (10xxxxxx) so the cut falls between characters.
  while (n > 0 && (static_cast<unsigned char>(caption[n]) & 0xC0) == 0x80) --n;
  return "\"" + caption.substr(0, n) + "...\"";
}

std::string TextCacheKey::rendering() const {
  CacheKeyRendering r("lorafleet text encoder cache key");
  r.add("caption", caption)
      .add("tokenizer_identity", tokenizer_identity)
      .add("text_encoder_identity", text_encoder_identity)
      .add("clip_skip", static_cast<std::int64_t>(clip_skip))
      .add("with_pooled", with_pooled)
      .add("max_token_length", static_cast<std::int64_t>(max_token_length));
  return r.str();
}

std::string TextCacheKey::digest() const { return sha256_hex(rendering()); }

std::string TextCacheKey::file_name() const { return digest() + ".safetensors"; }

TextDiskCache::TextDiskCache(std::string dir) : dir_(std::move(dir)) {}

std::string TextDiskCache::path_for(const TextCacheKey& key) const {
  return cache_file_path(dir_, key.digest());
}

std::optional<TextEncoderEntry> TextDiskCache::load(const TextCacheKey& key,
                                                    std::string* stale_reason) const {
  if (stale_reason) stale_reason->clear();
  const std::string path = path_for(key);
  const auto corrupt = [&](const std::string& what) {
    return std::runtime_error("text encoder cache file " + path + " (for caption " +
                              quote_caption(key.caption) + ") is corrupt: " + what +
                              "; delete this file (or the whole cache folder " + dir_ +
                              ") and the caption will be encoded again");
  };

  std::optional<SafetensorsFile> file =
      open_current_cache_file(path, kTextCacheFormat, key.rendering(), corrupt, stale_reason);
  if (!file) return std::nullopt;

  const TensorInfo* ctx = file->find(kContextName);
  if (!ctx) throw corrupt("no 'context' tensor");
  const std::int64_t length = context_length(key.max_token_length);
  if (ctx->dtype != DType::F32 || ctx->shape.size() != 2 || ctx->shape[0] != length ||
      ctx->shape[1] <= 0) {
    throw corrupt("'context' is " + dtype_name(ctx->dtype) + " " + cache_shape_text(ctx->shape) +
                  ", expected F32 [" + std::to_string(length) + ", hidden] (max_token_length " +
                  std::to_string(key.max_token_length) + ")");
  }
  const TensorInfo* pooled = file->find(kPooledName);
  if (key.with_pooled && !pooled) throw corrupt("no 'pooled' tensor although with_pooled is on");
  if (!key.with_pooled && pooled) throw corrupt("a 'pooled' tensor although with_pooled is off");
  // SDXL's pooled bigG embedding has the projection's width (1280), not the context's (2048).
  if (pooled &&
      (pooled->dtype != DType::F32 || pooled->shape.size() != 1 || pooled->shape[0] <= 0)) {
    throw corrupt("'pooled' is " + dtype_name(pooled->dtype) + " " +
                  cache_shape_text(pooled->shape) + ", expected F32 [projection_dim]");
  }
  const size_t expected_count = pooled ? 2 : 1;
  if (file->tensors().size() != expected_count) {
    throw corrupt(std::to_string(file->tensors().size()) + " tensors, expected " +
                  std::to_string(expected_count));
  }

  TextEncoderEntry entry;
  entry.context = cache_tensor(*file, *ctx);
  if (!at::isfinite(entry.context).all().item<bool>()) {
    throw corrupt("'context' holds NaN or Inf values");
  }
  if (pooled) {
    entry.pooled = cache_tensor(*file, *pooled);
    if (!at::isfinite(entry.pooled).all().item<bool>()) {
      throw corrupt("'pooled' holds NaN or Inf values");
    }
  }
  return entry;
}

void TextDiskCache::store(const TextCacheKey& key, const TextEncoderEntry& entry) const {
  const std::string what = "text encoder cache entry for caption " + quote_caption(key.caption);
  const at::Tensor& ctx = entry.context;
  const std::int64_t length = context_length(key.max_token_length);
  if (!ctx.defined() || ctx.scalar_type() != at::kFloat || ctx.dim() != 2 ||
      ctx.size(0) != length || ctx.size(1) <= 0) {
    throw std::invalid_argument(what + ": context must be float32 [" + std::to_string(length) +
                                ", hidden] (max_token_length " +
                                std::to_string(key.max_token_length) + "), got " + describe(ctx));
  }
  if (!at::isfinite(ctx).all().item<bool>()) {
    throw std::invalid_argument(what + ": context holds NaN or Inf values");
  }
  std::map<std::string, at::Tensor> tensors{{kContextName, ctx}};
  const at::Tensor& pooled = entry.pooled;
  if (key.with_pooled) {
    if (!pooled.defined() || pooled.scalar_type() != at::kFloat || pooled.dim() != 1 ||
        pooled.size(0) <= 0) {
      throw std::invalid_argument(what + ": pooled must be float32 [projection_dim], got " +
                                  describe(pooled));
    }
    if (!at::isfinite(pooled).all().item<bool>()) {
      throw std::invalid_argument(what + ": pooled holds NaN or Inf values");
    }
    tensors.emplace(kPooledName, pooled);
  } else if (pooled.defined()) {
    throw std::invalid_argument(what + ": pooled given although the key's with_pooled is off");
  }
  write_cache_file(path_for(key), tensors, kTextCacheFormat, key.rendering());
}

}  // namespace lf
