// On-disk cache of text-encoder outputs per caption (kohya's cache_text_encoder_outputs_to_disk,
// which writes "<stem>_te_outputs.npz" per image; here one safetensors file per distinct
// (caption, tokenizer, text encoder, clip_skip, max_token_length), validated like the latent
// cache).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>

namespace lf {

struct TextCacheKey {
  std::string caption;                // the exact text given to the tokenizer
  std::string tokenizer_identity;     // e.g. sha256 of vocab.json + merges.txt
  std::string text_encoder_identity;  // module_identity() of the text encoder's state dict
  int clip_skip = 1;                  // kohya clip_skip: 1 = last layer, 2 = penultimate, ...
  bool with_pooled = false;           // the entry carries the pooled output (SDXL's pool2)
  // kohya --max_token_length (75, 150, 225): the context has context_length() = 75 n + 2
  // positions (token_windows.h).
  int max_token_length = 75;

  // Canonical text of every field under a kind line (cache_file.h CacheKeyRendering); the format
  // version lives in the file's metadata.
  std::string rendering() const;
  // sha256 hex of rendering().
  std::string digest() const;
  // digest() + ".safetensors".
  std::string file_name() const;
};

// Bumped when the file layout changes; files of another version are stale (re-encoded).
// 2: captions NFC-normalised before tokenising; the encoder identity covers every encoder and
// its layer choice (SD 2.x / SDXL). 3: the key holds max_token_length and the context has its
// length (77, 152 or 227 positions), so an entry of one token length is never read for another.
inline constexpr const char* kTextCacheFormat = "lorafleet-text-cache/3";

struct TextEncoderEntry {
  // [context_length(key.max_token_length), hidden] float32 CPU: the (clip_skip-selected) hidden
  // states, windows joined
  at::Tensor context;
  at::Tensor
      pooled;  // [P] float32 CPU (SDXL: the projection width), undefined when !key.with_pooled
};

class TextDiskCache {
 public:
  // `dir` need not exist yet; store() creates it.
  explicit TextDiskCache(std::string dir);

  // The cached entry of `key`, or nullopt when there is none or it is stale (another key or
  // format version; *stale_reason then says why, and is cleared otherwise).
  // Throws std::runtime_error naming the cache file, quoting the caption (first 80 characters)
  // and saying to delete the file (or the cache folder) when it is corrupt: not valid
  // safetensors, "context" not float32 [L, hidden>0] (L = context_length(key.max_token_length))
  // or holding NaN/Inf, "pooled" not float32 [P > 0], present without key.with_pooled or
  // missing with it, or another tensor present.
  std::optional<TextEncoderEntry> load(const TextCacheKey& key,
                                       std::string* stale_reason = nullptr) const;

  // Writes the entry atomically at path_for(key) (safe for concurrent ranks, cache_file.h).
  // Throws std::invalid_argument quoting the caption if the entry does not have the shapes and
  // dtypes load() expects or holds NaN/Inf; std::runtime_error naming the path on IO failure.
  void store(const TextCacheKey& key, const TextEncoderEntry& entry) const;

  // "<dir>/<first two hex chars>/<key.file_name()>".
  std::string path_for(const TextCacheKey& key) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

// "\"<caption>\"", cut to its first 80 bytes (not splitting a UTF-8 sequence) plus "..." when
// longer, for messages.
std::string quote_caption(const std::string& caption);

}  // namespace lf
