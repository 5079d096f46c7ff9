// Captions: reading caption files (UTF-8, BOM, line endings) and kohya's per-sample caption
// processing (BaseDataset.process_caption in kohya sd-scripts library/train_util.py): prefix and
// suffix, dropout, keep_tokens, shuffle and tag dropout. The coordinator runs the processing when
// it plans an epoch, so every rank and every resume sees the same caption for a sample.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace lf {

// The caption keys of a kohya dataset-config subset (docs/config_README-en.md), same defaults.
struct CaptionOptions {
  bool shuffle_caption = false;
  std::string caption_separator = ",";   // splits the caption into tags
  int keep_tokens = 0;                   // the first N tags stay in place
  std::string keep_tokens_separator;     // "" = off; else "fixed SEP flexible [SEP fixed-suffix]"
  std::string caption_prefix;            // joined with one space before processing
  std::string caption_suffix;
  double caption_dropout_rate = 0.0;     // whole caption -> "" with this probability
  int caption_dropout_every_n_epochs = 0;  // caption -> "" when epoch (1-based) % n == 0
  double caption_tag_dropout_rate = 0.0;   // each flexible tag dropped with this probability

  // True when process_caption can return something other than the prefixed/suffixed caption,
  // i.e. when the caption depends on the epoch or the RNG.
  bool is_random() const;
};

// A caption file's text. Bytes must be valid UTF-8 (else DatasetError naming the file and the
// byte offset); a UTF-8 BOM is stripped, CRLF and lone CR become LF, surrounding whitespace is
// trimmed. Multi-line captions: only the first non-empty line is used (as kohya without
// enable_wildcard); *extra_lines is set to the number of further non-empty lines ignored.
// An empty (or whitespace-only) file returns "" and sets *empty = true (the caller warns).
// Throws DatasetError("<path>: ...") when the file cannot be read or is not UTF-8.
std::string read_caption_file(const std::string& path, bool* empty, int* extra_lines);
// The decoding part of read_caption_file, over bytes already read; `label` names them in the
// DatasetError ("<label>: caption file is not valid UTF-8 ...").
std::string decode_caption_bytes(std::string bytes, const std::string& label, bool* empty,
                                 int* extra_lines);

// Processes one sample's caption in kohya's order (sd-scripts library/train_util.py
// BaseDataset.process_caption):
//   1. prefix/suffix joined with a single space;
//   2. dropout: rng < caption_dropout_rate, or epoch % every_n == 0 -> "";
//   3. split at caption_separator (tags trimmed, empty tags dropped) into fixed / flexible /
//      fixed-suffix by keep_tokens_separator, else the first keep_tokens tags are fixed;
//      shuffle the flexible tags (Fisher-Yates on `rng`), drop each with caption_tag_dropout_rate;
//   4. re-join with the configured separator followed by one space (", " for the default ","),
//      where kohya always re-joins with ", ".
// epoch is 1-based as kohya's current_epoch. Draws from `rng` in a fixed order so the result is
// a pure function of (caption, options, epoch, rng state). Never throws.
std::string process_caption(const std::string& caption, const CaptionOptions& options, int epoch,
                            std::mt19937_64& rng);

}  // namespace lf
