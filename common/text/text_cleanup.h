// CLIP caption clean-up: openai/CLIP simple_tokenizer.py's basic_clean + whitespace_clean + lower()
// (ftfy 6.3 fix_text, Python html.unescape twice, str.split() whitespace, Python str.lower()),
// done on code points in C++ (ICU only for NFC) so CLIPTokenizer needs no Python or ftfy.
#pragma once

#include <string>

namespace lf {

// Text clean-up follows simple_tokenizer's basic_clean + whitespace_clean + lower():
//   ftfy.fix_text -> html.unescape twice -> strip -> collapse whitespace -> lower.
// Done exactly here (tables from Python 3.11 / ftfy 6.3 / Unicode 14, as PCRE2 10.42 uses):
//   - ftfy fixers, repeated until nothing changes like ftfy's loop: HTML unescape (only when the
//     input has no '<'), C1 controls read as windows-1252, Latin ligatures, half/fullwidth forms,
//     curly quotes, ANSI terminal escapes, removal of the control characters ftfy removes, and
//     NFC normalisation (ICU) at the end of every round;
//   - numeric character references (&#233; &#xE9;) with html's windows-1252/invalid rules;
//   - Python str.split() whitespace; Python str.lower() for single code points (PCRE2 Unicode
//     case tables plus U+0130, Roman numerals and circled letters, which PCRE2 leaves alone).
// Not done (documented differences from the reference; rare in training captions):
//   - ftfy's mojibake repair (fix_encoding), a heuristic with no C++ counterpart;
//   - named HTML entities other than &amp; &lt; &gt; &quot; &apos; &nbsp; (and the
//     semicolon-less &amp &lt &gt &quot &nbsp, upper-case &AMP &LT &GT &QUOT), which stay as text;
//   - Greek final sigma: Σ becomes ς only when directly preceded by a cased letter and not
//     directly followed by one (Python also skips case-ignorable characters in between).
//
// The cleaned caption, UTF-8 in and out; what CLIPTokenizer::encode() feeds to its pre-split.
// Throws std::invalid_argument "CLIPTokenizer: text is not valid UTF-8 (byte N)" if utf8 is not
// valid UTF-8.
std::string clip_clean_text(const std::string& utf8);

}  // namespace lf
