// CLIP BPE tokenizer (see clip_tokenizer.h). Mirrors openai/CLIP simple_tokenizer.py step by
// step: clip_clean_text (text_cleanup.cpp), PCRE2 pre-split with the reference regex, and the
// greedy lowest-rank merge loop of SimpleTokenizer.bpe() over bytes_to_unicode symbols.
#include "common/text/clip_tokenizer.h"

#include <zlib.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/text/pcre2_pattern.h"
#include "common/text/text_cleanup.h"
#include "common/text/utf8.h"

namespace lf {
namespace {

constexpr int kNumMerges = 49152 - 256 - 2;  // 48894: simple_tokenizer's merges[1:48895]

// ----------------------------------------------------------------------------------------------
// PCRE2


// simple_tokenizer's pre-split pattern (re.IGNORECASE); \p{L}/\p{N}/\s are Unicode (UCP).
const pcre2_code* split_pattern() {
  static const Pcre2Code code = compile_pcre2(
      "<\\|startoftext\\|>|<\\|endoftext\\|>|'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|"
      "[^\\s\\p{L}\\p{N}]+",
      PCRE2_UTF | PCRE2_UCP | PCRE2_CASELESS | PCRE2_NO_UTF_CHECK);
  return code.get();
}

// ----------------------------------------------------------------------------------------------
// bytes_to_unicode

struct ByteTable {
  std::string byte_to_symbol[256];  // UTF-8 of the symbol for each byte
  int order[256];                   // bytes in vocab order (printable ranges first)
  std::unordered_map<char32_t, uint8_t> symbol_to_byte;
  ByteTable() {
    std::vector<int> bs;
    for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
    for (int b = 0xA1; b <= 0xAC; ++b) bs.push_back(b);
    for (int b = 0xAE; b <= 0xFF; ++b) bs.push_back(b);
    std::vector<char32_t> cs(bs.begin(), bs.end());
    bool seen[256] = {};
    for (int b : bs) seen[b] = true;
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      if (!seen[b]) {
        bs.push_back(b);
        cs.push_back(256 + n++);
      }
    }
    for (int k = 0; k < 256; ++k) {
      order[k] = bs[k];
      std::string sym;
      append_utf8(sym, cs[k]);
      byte_to_symbol[bs[k]] = sym;
      symbol_to_byte[cs[k]] = static_cast<uint8_t>(bs[k]);
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable table;
  return table;
}

std::string read_gzip(const std::string& path) {
  gzFile gz = gzopen(path.c_str(), "rb");
  if (gz == nullptr) {
    int err = errno;
    throw std::runtime_error(path + ": cannot open (" +
                             std::string(err ? std::strerror(err) : "out of memory") + ")");
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    int n = gzread(gz, buf, sizeof buf);
    if (n < 0) {
      int errnum = 0;
      std::string msg = gzerror(gz, &errnum);
      gzclose(gz);
      throw std::runtime_error(path + ": invalid CLIP BPE vocab: gzip read failed (" + msg + ")");
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  gzclose(gz);
  return out;
}

}  // namespace

// ------------------------------------------------------------------------------------------------

struct CLIPTokenizer::Impl {
  std::unordered_map<std::string, int> encoder;
  std::vector<std::string> decoder;
  std::unordered_map<std::string, int> ranks;  // "first second" -> merge rank
  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int>> cache;

  std::vector<int> bpe(const std::string& token) const;
};

std::vector<int> CLIPTokenizer::Impl::bpe(const std::string& token) const {
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    auto it = cache.find(token);
    if (it != cache.end()) return it->second;
  }
  const ByteTable& bt = byte_table();
  std::vector<std::string> word;
  word.reserve(token.size());
  for (unsigned char b : token) word.push_back(bt.byte_to_symbol[b]);
  word.back() += "</w>";
  while (word.size() > 1) {
    int best_rank = std::numeric_limits<int>::max();
    size_t best = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto r = ranks.find(word[i] + " " + word[i + 1]);
      if (r != ranks.end() && r->second < best_rank) {
        best_rank = r->second;
        best = i;
      }
    }
    if (best_rank == std::numeric_limits<int>::max()) break;
    const std::string first = word[best], second = word[best + 1];
    std::vector<std::string> merged;
    merged.reserve(word.size());
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
        merged.push_back(first + second);
        i += 2;
      } else {
        merged.push_back(word[i]);
        ++i;
      }
    }
    word.swap(merged);
  }
  std::vector<int> ids;
  ids.reserve(word.size());
  for (const std::string& sym : word) ids.push_back(encoder.at(sym));
  std::lock_guard<std::mutex> lock(cache_mutex);
  if (cache.size() > (1u << 16)) cache.clear();
  cache.emplace(token, ids);
  return ids;
}

CLIPTokenizer CLIPTokenizer::from_file(const std::string& path) {
  const std::string text = read_gzip(path);
  auto fail = [&path](const std::string& what) {
    return std::runtime_error(path + ": invalid CLIP BPE vocab: " + what);
  };
  std::vector<std::string> lines;
  size_t pos = 0;
  while (lines.size() <= static_cast<size_t>(kNumMerges)) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {
      lines.push_back(text.substr(pos));
      break;
    }
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  if (lines.size() < static_cast<size_t>(kNumMerges) + 1) {
    throw fail("has " + std::to_string(lines.size()) + " lines, expected at least " +
               std::to_string(kNumMerges + 1) + " (header + merges)");
  }
  auto impl = std::make_shared<Impl>();
  const ByteTable& bt = byte_table();
  std::vector<std::string> vocab;
  vocab.reserve(kVocabSize);
  for (int k = 0; k < 256; ++k) vocab.push_back(bt.byte_to_symbol[bt.order[k]]);
  for (int k = 0; k < 256; ++k) vocab.push_back(bt.byte_to_symbol[bt.order[k]] + "</w>");
  for (int m = 0; m < kNumMerges; ++m) {
    const std::string& line = lines[m + 1];
    size_t sp = line.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 >= line.size() ||
        line.find(' ', sp + 1) != std::string::npos) {
      throw fail("line " + std::to_string(m + 2) + " is not two space-separated symbols");
    }
    vocab.push_back(line.substr(0, sp) + line.substr(sp + 1));
    impl->ranks[line] = m;  // later duplicates win, as dict(zip(merges, range(...))) does
  }
  vocab.push_back("<|startoftext|>");
  vocab.push_back("<|endoftext|>");
  for (size_t id = 0; id < vocab.size(); ++id) impl->encoder[vocab[id]] = static_cast<int>(id);
  impl->decoder = std::move(vocab);
  return CLIPTokenizer(std::move(impl));
}

std::string CLIPTokenizer::clean_text(const std::string& text) { return clip_clean_text(text); }

std::vector<int> CLIPTokenizer::encode(const std::string& text) const {
  const std::string clean = clean_text(text);
  std::vector<int> ids;
  const pcre2_code* re = split_pattern();
  Pcre2MatchData md(pcre2_match_data_create_from_pattern(re, nullptr));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(clean.data());
  PCRE2_SIZE offset = 0;
  while (offset < clean.size()) {
    int rc = pcre2_match(re, subject, clean.size(), offset, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) throw std::logic_error("CLIPTokenizer: PCRE2 match failed");
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const std::string token = clean.substr(ov[0], ov[1] - ov[0]);
    offset = ov[1] > ov[0] ? ov[1] : ov[1] + 1;  // the pattern never matches empty
    if (token == "<|startoftext|>") {
      ids.push_back(kStartOfText);
    } else if (token == "<|endoftext|>") {
      ids.push_back(kEndOfText);
    } else {
      std::vector<int> part = impl_->bpe(token);
      ids.insert(ids.end(), part.begin(), part.end());
    }
  }
  return ids;
}

std::vector<int> CLIPTokenizer::tokenize(const std::string& text, int context_length,
                                         int pad_token) const {
  if (context_length < 2) {
    throw std::invalid_argument("CLIPTokenizer::tokenize: context_length " +
                                std::to_string(context_length) + " < 2");
  }
  std::vector<int> ids;
  ids.reserve(context_length);
  ids.push_back(kStartOfText);
  std::vector<int> body = encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  ids.push_back(kEndOfText);
  if (ids.size() > static_cast<size_t>(context_length)) {
    ids.resize(context_length);
    ids.back() = kEndOfText;
  }
  ids.resize(context_length, pad_token);
  return ids;
}

std::string CLIPTokenizer::decode(const std::vector<int>& ids) const {
  std::string joined;
  for (int id : ids) {
    if (id < 0 || id >= static_cast<int>(impl_->decoder.size())) {
      throw std::out_of_range("CLIPTokenizer::decode: id " + std::to_string(id) + " outside [0, " +
                              std::to_string(impl_->decoder.size()) + ")");
    }
    joined += impl_->decoder[id];
  }
  const ByteTable& bt = byte_table();
  std::string bytes;
  for (char32_t c : decode_utf8(joined, "CLIPTokenizer")) {
    bytes += static_cast<char>(bt.symbol_to_byte.at(c));
  }
  std::string out;
  size_t pos = 0;
  for (;;) {
    size_t w = bytes.find("</w>", pos);
    if (w == std::string::npos) break;
    out.append(bytes, pos, w - pos);
    out += ' ';
    pos = w + 4;
  }
  out.append(bytes, pos, std::string::npos);
  return out;
}

int CLIPTokenizer::vocab_size() const { return static_cast<int>(impl_->decoder.size()); }

}  // namespace lf
