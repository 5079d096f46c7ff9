// CLIP BPE tokenizer (openai/CLIP simple_tokenizer.py, as copied into open_clip tokenizer.py and
// mirrored by HF CLIPTokenizer) for SD1/SD2/SDXL caption encoding. Reads the gzipped merges file
// (bpe_simple_vocab_16e6.txt.gz) with zlib and pre-splits with PCRE2; no Python, no ICU.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace lf {

// Vocabulary (49408 ids): the 256 bytes_to_unicode symbols, the same 256 with "</w>", the
// 48,894 merges (lines 1..48894 of the vocab file) joined, then <|startoftext|> 49406 and
// <|endoftext|> 49407. Merge rank is line order.
//
// Text clean-up (ftfy + html.unescape + whitespace + lower, as simple_tokenizer's basic_clean,
// whitespace_clean and lower()) is clip_clean_text() in common/text/text_cleanup.h, which
// documents exactly what it does and does not reproduce.
//
// The special-token regex alternatives are the openai ones (<|startoftext|>, <|endoftext|>);
// open_clip 3.x spells them <start_of_text>/<end_of_text> but gives them the same ids.
class CLIPTokenizer {
 public:
  static constexpr int kStartOfText = 49406;
  static constexpr int kEndOfText = 49407;
  static constexpr int kVocabSize = 49408;

  // Loads the gzipped merges file. Throws std::runtime_error "<path>: cannot open (...)" or
  // "<path>: invalid CLIP BPE vocab: <what>" (bad gzip, fewer than 48,895 lines, bad merge line).
  static CLIPTokenizer from_file(const std::string& bpe_vocab_gz_path);

  // BPE ids of the cleaned text, without start/end framing. Thread-safe (a shared word cache).
  // Throws std::invalid_argument if text is not valid UTF-8.
  std::vector<int> encode(const std::string& text) const;

  // [49406] + encode(text) + [49407], truncated to context_length keeping EOS as the last id,
  // then padded to context_length with pad_token (49407 for SD1, 0 for SD2 / SDXL bigG).
  // Throws std::invalid_argument if context_length < 2.
  std::vector<int> tokenize(const std::string& text, int context_length = 77,
                            int pad_token = kEndOfText) const;

  // simple_tokenizer.decode: token strings joined, bytes restored, "</w>" -> " ".
  // Throws std::out_of_range for ids outside [0, vocab_size()).
  std::string decode(const std::vector<int>& ids) const;

  int vocab_size() const;

  // The clean-up applied by encode(): clip_clean_text(text) (common/text/text_cleanup.h),
  // UTF-8 in and out. Throws std::invalid_argument if text is not valid UTF-8.
  static std::string clean_text(const std::string& text);

 private:
  struct Impl;
  explicit CLIPTokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace lf
