// Strict UTF-8 decoding and UTF-8 encoding (see utf8.h). Moved out of the CLIP tokenizer; the
// error message names the caller so CLIPTokenizer's messages stay as they were. One decoder
// (decode_at) serves decode_utf8 and find_invalid_utf8, so both accept exactly the same bytes.
#include "common/text/utf8.h"

#include <cstddef>
#include <stdexcept>
#include <string>

namespace lf {

namespace {

// Decodes the sequence starting at s[i] into *cp and returns its length in bytes, or returns 0
// and sets *bad_at to the offset of the offending byte: the lead byte for an invalid lead, a
// truncated sequence, an overlong form, a surrogate or a value above U+10FFFF; the continuation
// byte itself when a continuation byte is wrong.
std::size_t decode_at(const std::string& s, std::size_t i, char32_t* cp, std::size_t* bad_at) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  int extra;
  char32_t v;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    v = c & 0x1F;
    extra = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    v = c & 0x0F;
    extra = 2;
  } else if (c >= 0xF0 && c <= 0xF4) {
    v = c & 0x07;
    extra = 3;
  } else {
    *bad_at = i;
    return 0;
  }
  if (i + extra >= s.size()) {
    *bad_at = i;
    return 0;
  }
  for (int k = 1; k <= extra; ++k) {
    const unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) {
      *bad_at = i + k;
      return 0;
    }
    v = (v << 6) | (cc & 0x3F);
  }
  if ((extra == 2 && v < 0x800) || (extra == 3 && (v < 0x10000 || v > 0x10FFFF)) ||
      (v >= 0xD800 && v <= 0xDFFF)) {
    *bad_at = i;
    return 0;
  }
  *cp = v;
  return 1 + static_cast<std::size_t>(extra);
}

}  // namespace

std::u32string decode_utf8(const std::string& s, const char* who) {
  std::u32string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    char32_t cp = 0;
    std::size_t bad_at = 0;
    const std::size_t n = decode_at(s, i, &cp, &bad_at);
    if (n == 0) {
      throw std::invalid_argument(std::string(who) + ": text is not valid UTF-8 (byte " +
                                  std::to_string(bad_at) + ")");
    }
    out.push_back(cp);
    i += n;
  }
  return out;
}

std::size_t find_invalid_utf8(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size()) {
    char32_t cp = 0;
    std::size_t bad_at = 0;
    const std::size_t n = decode_at(s, i, &cp, &bad_at);
    if (n == 0) return bad_at;
    i += n;
  }
  return std::string::npos;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::string encode_utf8(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

}  // namespace lf
