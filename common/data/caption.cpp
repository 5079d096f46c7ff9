// Caption files and kohya's per-sample caption processing (see caption.h). The processing follows
// BaseDataset.process_caption in kohya sd-scripts library/train_util.py; the random draws come
// from our own std::mt19937_64 in a documented order (not Python's `random`), so results are
// reproducible across compilers and standard libraries but not equal to kohya's draws.
#include "common/data/caption.h"

#include <cctype>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "common/data/dataset.h"
#include "common/text/utf8.h"

namespace lf {
namespace {

const char* const kSpace = " \t\n\v\f\r";

std::string trim(const std::string& s) {
  const std::size_t b = s.find_first_not_of(kSpace);
  if (b == std::string::npos) return "";
  const std::size_t e = s.find_last_not_of(kSpace);
  return s.substr(b, e - b + 1);
}

// Python str.split(sep) for a non-empty sep; an empty sep gives the whole text as one piece
// (Python would raise; config validation is where an empty caption_separator gets rejected).
std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  if (sep.empty()) {
    out.push_back(s);
    return out;
  }
  std::size_t from = 0;
  for (;;) {
    const std::size_t at = s.find(sep, from);
    if (at == std::string::npos) break;
    out.push_back(s.substr(from, at - from));
    from = at + sep.size();
  }
  out.push_back(s.substr(from));
  return out;
}

// Tags of `part` split at sep, each trimmed; empty tags dropped (kohya drops them on the
// keep_tokens_separator path and keeps them on the keep_tokens path; we drop them on both so that
// "a,,b" never yields an empty tag in the joined caption).
void append_tags(const std::string& part, const std::string& sep, std::vector<std::string>* out) {
  for (const std::string& piece : split(part, sep)) {
    std::string tag = trim(piece);
    if (!tag.empty()) out->push_back(std::move(tag));
  }
}

// Uniform double in [0, 1) from the top 53 bits of one 64-bit draw (one draw per call).
double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

// Uniform integer in [0, n) by rejection, as Python's _randbelow: k = bit length of n, take the
// top k bits of one 64-bit draw, redraw while the value is >= n (under 2 draws expected). n <= 1
// returns 0 without a draw (never reached: Fisher-Yates asks for n >= 2).
std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t n) {
  if (n <= 1) return 0;
  int k = 0;
  while (k < 64 && (n >> k) != 0) ++k;
  for (;;) {
    const std::uint64_t r = rng() >> (64 - k);
    if (r < n) return r;
  }
}

}  // namespace

bool CaptionOptions::is_random() const {
  return shuffle_caption || caption_dropout_rate > 0.0 || caption_dropout_every_n_epochs > 0 ||
         caption_tag_dropout_rate > 0.0;
}

std::string read_caption_file(const std::string& path, bool* empty, int* extra_lines) {
  if (empty) *empty = false;
  if (extra_lines) *extra_lines = 0;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw DatasetError(path + ": cannot read caption file (it is a directory)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DatasetError(path + ": cannot read caption file");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw DatasetError(path + ": cannot read caption file (read error)");
  return decode_caption_bytes(std::move(bytes), path, empty, extra_lines);
}

std::string decode_caption_bytes(std::string bytes, const std::string& label, bool* empty,
                                 int* extra_lines) {
  if (empty) *empty = false;
  if (extra_lines) *extra_lines = 0;
  // Validate the raw bytes so the offset is the one a hex editor shows (BOM included).
  const std::size_t bad = find_invalid_utf8(bytes);
  if (bad != std::string::npos) {
    const bool utf16 = bytes.size() >= 2 && ((static_cast<unsigned char>(bytes[0]) == 0xFF &&
                                              static_cast<unsigned char>(bytes[1]) == 0xFE) ||
                                             (static_cast<unsigned char>(bytes[0]) == 0xFE &&
                                              static_cast<unsigned char>(bytes[1]) == 0xFF));
    throw DatasetError(label + ": caption file is not valid UTF-8 (invalid byte at offset " +
                       std::to_string(bad) + (utf16 ? "; the file starts with a UTF-16 BOM" : "") +
                       "); caption files must be UTF-8, re-save it as UTF-8");
  }
  if (bytes.compare(0, 3, "\xEF\xBB\xBF") == 0) bytes.erase(0, 3);

  // CRLF and lone CR -> LF, then split into lines.
  std::vector<std::string> lines(1);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (c == '\r' || c == '\n') {
      if (c == '\r' && i + 1 < bytes.size() && bytes[i + 1] == '\n') ++i;
      lines.emplace_back();
    } else {
      lines.back().push_back(c);
    }
  }
  std::string caption;
  bool found = false;
  int extra = 0;
  for (const std::string& line : lines) {
    std::string t = trim(line);
    if (t.empty()) continue;
    if (!found) {
      caption = std::move(t);
      found = true;
    } else {
      ++extra;
    }
  }
  if (empty) *empty = !found;
  if (extra_lines) *extra_lines = extra;
  return caption;
}

// Draw order from `rng` (each "draw" is one rng() call):
//   a. caption_dropout_rate > 0: one draw u (uniform01); dropped when u < rate. This draw is made
//      even when every_n_epochs also drops the caption, as kohya draws before the epoch test.
//   b. dropped -> "" with no further draws.
//   c. shuffle_caption: Fisher-Yates over the flexible tags, i = n-1 down to 1, swap tag i with
//      tag j = uniform_below(i + 1) (1+ draws each, see uniform_below), as Python random.shuffle.
//   d. caption_tag_dropout_rate > 0: one draw u per flexible tag in the shuffled order; the tag
//      is kept when u >= rate, as kohya dropout_tags.
// Nothing else draws, so a caption without any of these leaves the rng state unchanged.
std::string process_caption(const std::string& caption, const CaptionOptions& options, int epoch,
                            std::mt19937_64& rng) {
  std::string text = caption;
  if (!options.caption_prefix.empty()) text = options.caption_prefix + " " + text;
  if (!options.caption_suffix.empty()) text = text + " " + options.caption_suffix;

  bool drop = false;
  if (options.caption_dropout_rate > 0.0) drop = uniform01(rng) < options.caption_dropout_rate;
  if (options.caption_dropout_every_n_epochs > 0 &&
      epoch % options.caption_dropout_every_n_epochs == 0) {
    drop = true;
  }
  if (drop) return "";

  // kohya only splits and re-joins when shuffle, tag dropout (or token warm-up, which lorafleet
  // does not support) is on; otherwise the text goes through untouched, keep_tokens_separator
  // included.
  if (!options.shuffle_caption && !(options.caption_tag_dropout_rate > 0.0)) return text;

  const std::string& sep = options.caption_separator;
  std::vector<std::string> fixed, flex, fixed_suffix;
  const std::string& kts = options.keep_tokens_separator;
  const std::size_t k1 = kts.empty() ? std::string::npos : text.find(kts);
  if (k1 != std::string::npos) {
    // "fixed SEP flexible [SEP fixed-suffix]": split at the first and the second occurrence;
    // further occurrences stay in the suffix text, as kohya's split(sep, 1) twice.
    append_tags(text.substr(0, k1), sep, &fixed);
    std::string rest = text.substr(k1 + kts.size());
    const std::size_t k2 = rest.find(kts);
    if (k2 != std::string::npos) {
      append_tags(rest.substr(k2 + kts.size()), sep, &fixed_suffix);
      rest.resize(k2);
    }
    append_tags(rest, sep, &flex);
  } else {
    std::vector<std::string> tags;
    append_tags(text, sep, &tags);
    const std::size_t keep =
        options.keep_tokens > 0 ? static_cast<std::size_t>(options.keep_tokens) : 0;
    for (std::size_t i = 0; i < tags.size(); ++i) {
      (i < keep ? fixed : flex).push_back(std::move(tags[i]));
    }
  }

  if (options.shuffle_caption) {
    for (std::size_t i = flex.size(); i-- > 1;) {
      const std::size_t j = static_cast<std::size_t>(uniform_below(rng, i + 1));
      std::swap(flex[i], flex[j]);
    }
  }
  if (options.caption_tag_dropout_rate > 0.0) {
    std::vector<std::string> kept;
    for (std::string& tag : flex) {
      if (uniform01(rng) >= options.caption_tag_dropout_rate) kept.push_back(std::move(tag));
    }
    flex = std::move(kept);
  }

  // kohya joins with ", " whatever caption_separator is; we join with the configured separator
  // so a caption written with "|" keeps "|" (and a later split at the separator still works).
  // A separator that already ends in whitespace (" ", ", ") is used as it is.
  const bool ends_in_space = !sep.empty() && std::isspace(static_cast<unsigned char>(sep.back()));
  const std::string joiner = ends_in_space ? sep : sep + " ";
  std::string out;
  bool first = true;
  for (const auto* group : {&fixed, &flex, &fixed_suffix}) {
    for (const std::string& tag : *group) {
      if (!first) out += joiner;
      out += tag;
      first = false;
    }
  }
  return out;
}

}  // namespace lf
