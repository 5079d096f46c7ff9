// Owning handles for PCRE2 (8-bit) compiled patterns and match data, shared by the CLIP
// tokenizer's pre-split and the text clean-up's Unicode lower-casing.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>
#include <memory>

namespace lf {

struct Pcre2CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct Pcre2MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};
using Pcre2Code = std::unique_ptr<pcre2_code, Pcre2CodeDeleter>;
using Pcre2MatchData = std::unique_ptr<pcre2_match_data, Pcre2MatchDataDeleter>;

// Compiles a NUL-terminated pattern. Throws std::logic_error naming the pattern and PCRE2's
// message (patterns are constants of ours, so failure is a programming error).
Pcre2Code compile_pcre2(const char* pattern, std::uint32_t options);

}  // namespace lf
