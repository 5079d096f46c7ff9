// Caption decoding (UTF-8 check, BOM, line endings, first non-empty line) and kohya's caption
// processing. The first bytes choose the processing options, the rest is the file's content.
#include <random>
#include <string>

#include "common/data/caption.h"
#include "common/data/dataset.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  lf::CaptionOptions o;
  o.shuffle_caption = (data[0] & 1) != 0;
  o.keep_tokens = data[0] >> 4;
  o.caption_separator = (data[1] & 1) ? ";" : ",";
  if (data[1] & 2) o.keep_tokens_separator = "|||";
  if (data[1] & 4) o.caption_prefix = "pre";
  if (data[1] & 8) o.caption_suffix = "suf";
  o.caption_dropout_rate = (data[2] & 15) / 16.0;
  o.caption_dropout_every_n_epochs = data[2] >> 6;
  o.caption_tag_dropout_rate = (data[3] & 15) / 16.0;
  const int epoch = 1 + (data[3] >> 4);
  bool empty = false;
  int extra = 0;
  try {
    const std::string caption = lf::decode_caption_bytes(
        std::string(reinterpret_cast<const char*>(data + 4), size - 4), "fuzz.txt", &empty, &extra);
    lf::fuzz::require(empty == caption.empty(), "empty is set exactly for an empty caption");
    lf::fuzz::require(caption.find('\n') == std::string::npos, "one line only");
    std::mt19937_64 rng(size);
    const std::string processed = lf::process_caption(caption, o, epoch, rng);
    lf::fuzz::require(processed.size() <= 2 * (caption.size() + 8), "no runaway growth");
  } catch (const lf::DatasetError&) {
    // "fuzz.txt: caption file is not valid UTF-8 ..." is the documented refusal.
  }
  return 0;
}
