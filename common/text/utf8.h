// Strict UTF-8 <-> Unicode code points, shared by the CLIP text clean-up (text_cleanup.cpp) and
// the CLIP tokenizer (clip_tokenizer.cpp), which work on code points as simple_tokenizer.py does
// on Python str. Accepts exactly what bytes.decode("utf-8") accepts (no overlongs, surrogates).
#pragma once

#include <cstddef>
#include <string>

namespace lf {

// Code points of s. Throws std::invalid_argument "<who>: text is not valid UTF-8 (byte N)" with
// N the offset of the first byte of the offending sequence (or of a bad continuation byte).
std::u32string decode_utf8(const std::string& s, const char* who);

// Offset of the first invalid byte of s by the same rules and the same offset as decode_utf8's
// error (e.g. caption files, which report it in their own error), or std::string::npos when s is
// valid UTF-8. Never throws.
std::size_t find_invalid_utf8(const std::string& s);

// Appends the UTF-8 encoding of c (c must be a Unicode scalar value).
void append_utf8(std::string& out, char32_t c);

// UTF-8 of s (every element must be a Unicode scalar value).
std::string encode_utf8(const std::u32string& s);

}  // namespace lf
