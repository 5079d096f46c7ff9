// The file layer shared by the latent and text-encoder disk caches: one .safetensors file per
// cache key, whose metadata holds the key's full text rendering and a format version, so a
// reader can tell "written for another key or format" (stale: re-encode) from "damaged"
// (corrupt: stop and tell the user). kohya keeps one npz per image instead and trusts its file
// name (kohya sd-scripts train_util: <image>.npz beside the image); the rendering check replaces
// that trust.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/io/safetensors.h"

namespace lf {

// Metadata keys of every cache file.
inline constexpr const char* kCacheFormatMetadataKey = "lorafleet.cache_format";
inline constexpr const char* kCacheKeyMetadataKey = "lorafleet.cache_key";

// Canonical, unambiguous text rendering of a cache key: a kind line, then one "name=value" line
// per field in the order added. Strings are written as "<byte length>:<bytes>" so no value can
// imitate a field boundary (a caption may hold newlines or '=').
class CacheKeyRendering {
 public:
  explicit CacheKeyRendering(const std::string& kind);
  CacheKeyRendering& add(const std::string& name, const std::string& value);
  CacheKeyRendering& add(const std::string& name, std::int64_t value);
  CacheKeyRendering& add(const std::string& name, bool value);
  const std::string& str() const { return text_; }

 private:
  std::string text_;
};

// "<first two hex chars>/<digest>.safetensors" under `dir`: the sub-folder keeps each folder at
// about 1/256 of the entries (a kohya-size dataset with flip and several buckets reaches 10^5).
std::string cache_file_path(const std::string& dir, const std::string& hex_digest);

// The first 8 bytes of a lowercase hex digest as a big-endian integer.
// Throws std::invalid_argument if `hex_digest` has fewer than 16 hex characters.
std::uint64_t digest_prefix_u64(const std::string& hex_digest);

// "[a, b, c]", for messages.
std::string cache_shape_text(const std::vector<int64_t>& shape);
std::string cache_shape_text(const at::Tensor& t);

// How an existing cache file compares with the key the caller wants.
struct CacheFileCheck {
  bool stale = false;  // true: written for another key or format version; `reason` says which
  std::string reason;
};

// Opens `path` fully into memory (no mmap: another rank may replace the file meanwhile).
// Returns nullopt if the file does not exist. Throws std::runtime_error with the reader's message
// ("<path>: invalid safetensors: ...") when it exists but is not valid safetensors (e.g.
// truncated), or "<path>: cannot stat (...)" when it cannot be examined.
std::optional<SafetensorsFile> open_cache_file(const std::string& path);

// Compares the file's format and key metadata with the expected ones. A file without the
// metadata is stale (an unknown or pre-versioning writer), not corrupt.
CacheFileCheck check_cache_metadata(const SafetensorsFile& file, const std::string& format,
                                    const std::string& key_rendering);

// open_cache_file + check_cache_metadata, as both caches use them: nullopt when the file is
// missing, or stale (then *stale_reason = "<path>: <why>" when stale_reason is given). A file
// that cannot be read is rethrown as corrupt(<reader's message>).
std::optional<SafetensorsFile> open_current_cache_file(
    const std::string& path, const std::string& format, const std::string& key_rendering,
    const std::function<std::runtime_error(const std::string&)>& corrupt,
    std::string* stale_reason);

// An owned CPU tensor with the entry's bytes. Throws std::runtime_error naming the tensor if its
// dtype is not F32 or U8 (the only ones the caches write).
at::Tensor cache_tensor(const SafetensorsFile& file, const TensorInfo& info);

// Writes tensors + {format, key} metadata to `path` atomically, creating its folders. The bytes
// first go to a sibling temp file named by host, pid and a per-process counter (write_file_atomic
// alone names it by pid, which two ranks on different hosts sharing a cache folder over NFS may
// share), then rename(2) publishes it: two ranks storing the same key each publish a complete
// file, the last rename wins, and readers never see a torn one. A crash may leave a
// "*.safetensors.<host>.<pid>.<n>" temp file behind; readers ignore it.
// Throws std::runtime_error naming the path on any IO failure.
void write_cache_file(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                      const std::string& format, const std::string& key_rendering);

}  // namespace lf
