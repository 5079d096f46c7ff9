// CLIP caption clean-up (see text_cleanup.h), moved out of the CLIP tokenizer. Follows Python 3.11
// html.unescape (html/__init__.py), ftfy 6.3 fix_text (fixes.py, chardata.py) and the
// basic_clean/whitespace_clean of openai/CLIP simple_tokenizer.py step by step on code points.
#include "common/text/text_cleanup.h"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>
#include <unicode/utypes.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/text/pcre2_pattern.h"
#include "common/text/utf8.h"

namespace lf {
namespace {

// Error-message prefix, unchanged from when this code lived in CLIPTokenizer.
constexpr const char* kWho = "CLIPTokenizer";

// ----------------------------------------------------------------------------------------------
// Tables (from Python 3.11 html/__init__.py and ftfy 6.3 chardata.py)

// html._invalid_charrefs for 0x80..0x9F = windows-1252 ("sloppy": undefined bytes map to
// themselves); also ftfy's fix_c1_controls table.
const char32_t kCp1252[32] = {0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
                              0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008D, 0x017D, 0x008F,
                              0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
                              0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178};

struct Ligature {
  char32_t from;
  char32_t to[3];
};
// ftfy.chardata.LIGATURES
const Ligature kLigatures[] = {
    {0x0132, {'I', 'J'}},      {0x0133, {'i', 'j'}},      {0x0149, {0x02BC, 'n'}},
    {0x01F1, {'D', 'Z'}},      {0x01F2, {'D', 'z'}},      {0x01F3, {'d', 'z'}},
    {0x01C4, {'D', 0x017D}},   {0x01C5, {'D', 0x017E}},   {0x01C6, {'d', 0x017E}},
    {0x01C7, {'L', 'J'}},      {0x01C8, {'L', 'j'}},      {0x01C9, {'l', 'j'}},
    {0x01CA, {'N', 'J'}},      {0x01CB, {'N', 'j'}},      {0x01CC, {'n', 'j'}},
    {0xFB00, {'f', 'f'}},      {0xFB01, {'f', 'i'}},      {0xFB02, {'f', 'l'}},
    {0xFB03, {'f', 'f', 'i'}}, {0xFB04, {'f', 'f', 'l'}}, {0xFB05, {0x017F, 't'}},
    {0xFB06, {'s', 't'}},
};

struct WidthForm {
  char32_t from;
  const char* to;  // UTF-8
};
// ftfy.chardata.WIDTH_MAP beyond U+3000 -> ' ' and U+FF01..U+FF5E -> U+0021..U+007E:
// unicodedata.normalize("NFKC", chr(c)) for c in U+FF5F..U+FFEF where it differs (Unicode 14).
const WidthForm kWidthForms[] = {
    {0xFF5F, "\xe2\xa6\x85"}, {0xFF60, "\xe2\xa6\x86"}, {0xFF61, "\xe3\x80\x82"},
    {0xFF62, "\xe3\x80\x8c"}, {0xFF63, "\xe3\x80\x8d"}, {0xFF64, "\xe3\x80\x81"},
    {0xFF65, "\xe3\x83\xbb"}, {0xFF66, "\xe3\x83\xb2"}, {0xFF67, "\xe3\x82\xa1"},
    {0xFF68, "\xe3\x82\xa3"}, {0xFF69, "\xe3\x82\xa5"}, {0xFF6A, "\xe3\x82\xa7"},
    {0xFF6B, "\xe3\x82\xa9"}, {0xFF6C, "\xe3\x83\xa3"}, {0xFF6D, "\xe3\x83\xa5"},
    {0xFF6E, "\xe3\x83\xa7"}, {0xFF6F, "\xe3\x83\x83"}, {0xFF70, "\xe3\x83\xbc"},
    {0xFF71, "\xe3\x82\xa2"}, {0xFF72, "\xe3\x82\xa4"}, {0xFF73, "\xe3\x82\xa6"},
    {0xFF74, "\xe3\x82\xa8"}, {0xFF75, "\xe3\x82\xaa"}, {0xFF76, "\xe3\x82\xab"},
    {0xFF77, "\xe3\x82\xad"}, {0xFF78, "\xe3\x82\xaf"}, {0xFF79, "\xe3\x82\xb1"},
    {0xFF7A, "\xe3\x82\xb3"}, {0xFF7B, "\xe3\x82\xb5"}, {0xFF7C, "\xe3\x82\xb7"},
    {0xFF7D, "\xe3\x82\xb9"}, {0xFF7E, "\xe3\x82\xbb"}, {0xFF7F, "\xe3\x82\xbd"},
    {0xFF80, "\xe3\x82\xbf"}, {0xFF81, "\xe3\x83\x81"}, {0xFF82, "\xe3\x83\x84"},
    {0xFF83, "\xe3\x83\x86"}, {0xFF84, "\xe3\x83\x88"}, {0xFF85, "\xe3\x83\x8a"},
    {0xFF86, "\xe3\x83\x8b"}, {0xFF87, "\xe3\x83\x8c"}, {0xFF88, "\xe3\x83\x8d"},
    {0xFF89, "\xe3\x83\x8e"}, {0xFF8A, "\xe3\x83\x8f"}, {0xFF8B, "\xe3\x83\x92"},
    {0xFF8C, "\xe3\x83\x95"}, {0xFF8D, "\xe3\x83\x98"}, {0xFF8E, "\xe3\x83\x9b"},
    {0xFF8F, "\xe3\x83\x9e"}, {0xFF90, "\xe3\x83\x9f"}, {0xFF91, "\xe3\x83\xa0"},
    {0xFF92, "\xe3\x83\xa1"}, {0xFF93, "\xe3\x83\xa2"}, {0xFF94, "\xe3\x83\xa4"},
    {0xFF95, "\xe3\x83\xa6"}, {0xFF96, "\xe3\x83\xa8"}, {0xFF97, "\xe3\x83\xa9"},
    {0xFF98, "\xe3\x83\xaa"}, {0xFF99, "\xe3\x83\xab"}, {0xFF9A, "\xe3\x83\xac"},
    {0xFF9B, "\xe3\x83\xad"}, {0xFF9C, "\xe3\x83\xaf"}, {0xFF9D, "\xe3\x83\xb3"},
    {0xFF9E, "\xe3\x82\x99"}, {0xFF9F, "\xe3\x82\x9a"}, {0xFFA0, "\xe1\x85\xa0"},
    {0xFFA1, "\xe1\x84\x80"}, {0xFFA2, "\xe1\x84\x81"}, {0xFFA3, "\xe1\x86\xaa"},
    {0xFFA4, "\xe1\x84\x82"}, {0xFFA5, "\xe1\x86\xac"}, {0xFFA6, "\xe1\x86\xad"},
    {0xFFA7, "\xe1\x84\x83"}, {0xFFA8, "\xe1\x84\x84"}, {0xFFA9, "\xe1\x84\x85"},
    {0xFFAA, "\xe1\x86\xb0"}, {0xFFAB, "\xe1\x86\xb1"}, {0xFFAC, "\xe1\x86\xb2"},
    {0xFFAD, "\xe1\x86\xb3"}, {0xFFAE, "\xe1\x86\xb4"}, {0xFFAF, "\xe1\x86\xb5"},
    {0xFFB0, "\xe1\x84\x9a"}, {0xFFB1, "\xe1\x84\x86"}, {0xFFB2, "\xe1\x84\x87"},
    {0xFFB3, "\xe1\x84\x88"}, {0xFFB4, "\xe1\x84\xa1"}, {0xFFB5, "\xe1\x84\x89"},
    {0xFFB6, "\xe1\x84\x8a"}, {0xFFB7, "\xe1\x84\x8b"}, {0xFFB8, "\xe1\x84\x8c"},
    {0xFFB9, "\xe1\x84\x8d"}, {0xFFBA, "\xe1\x84\x8e"}, {0xFFBB, "\xe1\x84\x8f"},
    {0xFFBC, "\xe1\x84\x90"}, {0xFFBD, "\xe1\x84\x91"}, {0xFFBE, "\xe1\x84\x92"},
    {0xFFC2, "\xe1\x85\xa1"}, {0xFFC3, "\xe1\x85\xa2"}, {0xFFC4, "\xe1\x85\xa3"},
    {0xFFC5, "\xe1\x85\xa4"}, {0xFFC6, "\xe1\x85\xa5"}, {0xFFC7, "\xe1\x85\xa6"},
    {0xFFCA, "\xe1\x85\xa7"}, {0xFFCB, "\xe1\x85\xa8"}, {0xFFCC, "\xe1\x85\xa9"},
    {0xFFCD, "\xe1\x85\xaa"}, {0xFFCE, "\xe1\x85\xab"}, {0xFFCF, "\xe1\x85\xac"},
    {0xFFD2, "\xe1\x85\xad"}, {0xFFD3, "\xe1\x85\xae"}, {0xFFD4, "\xe1\x85\xaf"},
    {0xFFD5, "\xe1\x85\xb0"}, {0xFFD6, "\xe1\x85\xb1"}, {0xFFD7, "\xe1\x85\xb2"},
    {0xFFDA, "\xe1\x85\xb3"}, {0xFFDB, "\xe1\x85\xb4"}, {0xFFDC, "\xe1\x85\xb5"},
    {0xFFE0, "\xc2\xa2"},     {0xFFE1, "\xc2\xa3"},     {0xFFE2, "\xc2\xac"},
    {0xFFE3, "\x20\xcc\x84"}, {0xFFE4, "\xc2\xa6"},     {0xFFE5, "\xc2\xa5"},
    {0xFFE6, "\xe2\x82\xa9"}, {0xFFE8, "\xe2\x94\x82"}, {0xFFE9, "\xe2\x86\x90"},
    {0xFFEA, "\xe2\x86\x91"}, {0xFFEB, "\xe2\x86\x92"}, {0xFFEC, "\xe2\x86\x93"},
    {0xFFED, "\xe2\x96\xa0"}, {0xFFEE, "\xe2\x97\x8b"},
};

bool is_python_space(char32_t c) {  // str.isspace() / str.split()
  switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool is_ftfy_control(char32_t c) {  // ftfy.chardata.CONTROL_CHARS
  return c <= 0x08 || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F ||
         (c >= 0x206A && c <= 0x206F) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFC);
}

bool is_html_invalid_codepoint(uint64_t n) {  // html._invalid_codepoints
  return (n >= 0x1 && n <= 0x8) || (n >= 0xE && n <= 0x1F) || (n >= 0x7F && n <= 0x9F) ||
         (n >= 0xFDD0 && n <= 0xFDEF) || n == 0xB || (n & 0xFFFE) == 0xFFFE;
}

bool is_ascii_alnum(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_hex(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// The named entities handled (a subset of html.entities.html5; see text_cleanup.h).
const std::pair<const char*, char32_t> kNamedEntities[] = {
    {"amp;", '&'}, {"amp", '&'},    {"AMP;", '&'},   {"AMP", '&'},   {"lt;", '<'},
    {"lt", '<'},   {"LT;", '<'},    {"LT", '<'},     {"gt;", '>'},   {"gt", '>'},
    {"GT;", '>'},  {"GT", '>'},     {"quot;", '"'},  {"quot", '"'},  {"QUOT;", '"'},
    {"QUOT", '"'}, {"apos;", '\''}, {"nbsp;", 0xA0}, {"nbsp", 0xA0},
};

// ftfy's extra upper-case spellings of lower-case entities that html.unescape leaves alone.
const std::pair<const char*, char32_t> kFtfyUpperEntities[] = {{"APOS;", '\''}, {"NBSP;", 0xA0}};

template <size_t N>
bool lookup_in(const std::pair<const char*, char32_t> (&table)[N], const std::u32string& name,
               char32_t* out) {
  for (const auto& e : table) {
    size_t n = std::strlen(e.first);
    if (name.size() != n) continue;
    bool same = true;
    for (size_t k = 0; k < n && same; ++k) same = name[k] == static_cast<char32_t>(e.first[k]);
    if (same) {
      *out = e.second;
      return true;
    }
  }
  return false;
}

bool lookup_entity(const std::u32string& name, char32_t* out) {
  return lookup_in(kNamedEntities, name, out);
}

// html._replace_charref for a numeric reference value (saturated at > 0x10FFFF).
std::u32string numeric_charref(uint64_t num) {
  if (num == 0x00) return U"\uFFFD";
  if (num == 0x0D) return U"\r";
  if (num >= 0x80 && num <= 0x9F) return std::u32string(1, kCp1252[num - 0x80]);
  if ((num >= 0xD800 && num <= 0xDFFF) || num > 0x10FFFF) return U"\uFFFD";
  if (is_html_invalid_codepoint(num)) return U"";
  return std::u32string(1, static_cast<char32_t>(num));
}

// Parses "#123" / "#x1F" (with or without ';') at s[i] (just after '&'); returns chars consumed
// after '&' or 0 when it is not a numeric reference.
size_t parse_numeric(const std::u32string& s, size_t i, uint64_t* num) {
  if (i >= s.size() || s[i] != '#') return 0;
  size_t j = i + 1;
  bool hex = j < s.size() && (s[j] == 'x' || s[j] == 'X');
  if (hex) ++j;
  size_t start = j;
  uint64_t v = 0;
  const uint64_t cap = 0x110000;  // anything above 0x10FFFF behaves the same
  while (j < s.size() && (hex ? is_hex(s[j]) : (s[j] >= '0' && s[j] <= '9'))) {
    uint64_t d = s[j] <= '9' ? s[j] - '0' : (s[j] | 0x20) - 'a' + 10;
    v = v * (hex ? 16 : 10) + d;
    if (v > cap) v = cap;
    ++j;
  }
  if (j == start) return 0;
  if (j < s.size() && s[j] == ';') ++j;
  *num = v;
  return j - i;
}

// Python html.unescape (numeric references exactly; named ones from kNamedEntities).
std::u32string html_unescape(const std::u32string& s) {
  if (s.find(U'&') == std::u32string::npos) return s;
  std::u32string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] != '&') {
      out += s[i++];
      continue;
    }
    uint64_t num = 0;
    if (size_t n = parse_numeric(s, i + 1, &num)) {
      out += numeric_charref(num);
      i += 1 + n;
      continue;
    }
    // Named: [^\t\n\f <&#;]{1,32};?
    size_t j = i + 1;
    while (j < s.size() && j - (i + 1) < 32) {
      char32_t c = s[j];
      if (c == '\t' || c == '\n' || c == '\f' || c == ' ' || c == '<' || c == '&' || c == '#' ||
          c == ';') {
        break;
      }
      ++j;
    }
    if (j == i + 1) {
      out += s[i++];
      continue;
    }
    if (j < s.size() && s[j] == ';') ++j;
    std::u32string name = s.substr(i + 1, j - (i + 1));
    char32_t ch;
    if (lookup_entity(name, &ch)) {
      out += ch;
    } else {
      bool found = false;
      for (size_t x = name.size() - 1; x > 1 && !found; --x) {
        if (lookup_entity(name.substr(0, x), &ch)) {
          out += ch;
          out += name.substr(x);
          found = true;
        }
      }
      if (!found) {
        out += '&';
        out += name;
      }
    }
    i = j;
  }
  return out;
}

// ftfy.fixes.unescape_html: only "&#?[0-9A-Za-z]{1,24};" with the semicolon.
std::u32string ftfy_unescape_html(const std::u32string& s) {
  std::u32string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '&') {
      size_t j = i + 1;
      bool numeric = j < s.size() && s[j] == '#';
      if (numeric) ++j;
      size_t start = j;
      while (j < s.size() && j - start < 24 && is_ascii_alnum(s[j])) ++j;
      if (j > start && j < s.size() && s[j] == ';') {
        std::u32string body = s.substr(i + 1, j - i);  // without '&', with ';'
        char32_t ch;
        if (!numeric && (lookup_entity(body, &ch) || lookup_in(kFtfyUpperEntities, body, &ch))) {
          out += ch;
          i = j + 1;
          continue;
        }
        if (numeric) {
          uint64_t num = 0;
          size_t n = parse_numeric(s, i + 1, &num);
          if (n == j - i) {  // html.unescape consumed everything including ';'
            out += numeric_charref(num);
            i = j + 1;
            continue;
          }
        }
      }
    }
    out += s[i++];
  }
  return out;
}

// Unicode NFC (Python unicodedata.normalize("NFC")) through ICU's normalizer. ASCII-only text,
// the common case, is returned as is without a round trip.
std::u32string nfc(const std::u32string& in) {
  if (std::all_of(in.begin(), in.end(), [](char32_t c) { return c < 0x80; })) return in;
  UErrorCode err = U_ZERO_ERROR;
  static const icu::Normalizer2* normalizer = icu::Normalizer2::getNFCInstance(err);
  if (normalizer == nullptr) {
    throw std::runtime_error("CLIPTokenizer: ICU's NFC normalizer is unavailable");
  }
  const icu::UnicodeString text = icu::UnicodeString::fromUTF32(
      reinterpret_cast<const UChar32*>(in.data()), static_cast<int32_t>(in.size()));
  err = U_ZERO_ERROR;
  const icu::UnicodeString normalized = normalizer->normalize(text, err);
  if (U_FAILURE(err)) {
    throw std::runtime_error(std::string("CLIPTokenizer: NFC normalisation failed: ") +
                             u_errorName(err));
  }
  std::u32string out(static_cast<size_t>(normalized.countChar32()), U'\0');
  err = U_ZERO_ERROR;
  normalized.toUTF32(reinterpret_cast<UChar32*>(out.data()), static_cast<int32_t>(out.size()),
                     err);
  if (U_FAILURE(err)) {
    throw std::runtime_error(std::string("CLIPTokenizer: NFC normalisation failed: ") +
                             u_errorName(err));
  }
  return out;
}

// One round of the ftfy fixers this implementation covers, in fix_and_explain's order.
std::u32string ftfy_round(const std::u32string& in, bool unescape) {
  std::u32string s = unescape ? ftfy_unescape_html(in) : in;
  std::u32string out;
  out.reserve(s.size());
  for (char32_t c : s) {  // fix_c1_controls
    out += (c >= 0x80 && c <= 0x9F) ? kCp1252[c - 0x80] : c;
  }
  s.swap(out);
  out.clear();
  for (char32_t c : s) {  // fix_latin_ligatures
    const Ligature* lig = nullptr;
    for (const Ligature& l : kLigatures) {
      if (l.from == c) lig = &l;
    }
    if (lig == nullptr) {
      out += c;
    } else {
      for (char32_t t : lig->to) {
        if (t != 0) out += t;
      }
    }
  }
  s.swap(out);
  out.clear();
  for (char32_t c : s) {  // fix_character_width
    if (c == 0x3000) {
      out += ' ';
    } else if (c >= 0xFF01 && c <= 0xFF5E) {
      out += c - 0xFEE0;
    } else if (c >= 0xFF5F && c <= 0xFFEF) {
      bool mapped = false;
      for (const WidthForm& w : kWidthForms) {
        if (w.from == c) {
          out += decode_utf8(w.to, kWho);
          mapped = true;
          break;
        }
      }
      if (!mapped) out += c;
    } else {
      out += c;
    }
  }
  s.swap(out);
  out.clear();
  for (char32_t c : s) {  // uncurl_quotes
    if (c == 0x02BC || (c >= 0x2018 && c <= 0x201B)) {
      out += '\'';
    } else if (c >= 0x201C && c <= 0x201F) {
      out += '"';
    } else {
      out += c;
    }
  }
  // fix_line_breaks only swaps one whitespace character for another, which whitespace_clean
  // collapses anyway, so it is not repeated here.
  s.swap(out);
  out.clear();
  for (size_t i = 0; i < s.size(); ++i) {  // remove_terminal_escapes: \033\[[\d;]*[a-zA-Z]
    if (s[i] == 0x1B && i + 1 < s.size() && s[i + 1] == '[') {
      size_t j = i + 2;
      while (j < s.size() && ((s[j] >= '0' && s[j] <= '9') || s[j] == ';')) ++j;
      if (j < s.size() && ((s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z'))) {
        i = j;
        continue;
      }
    }
    out += s[i];
  }
  s.swap(out);
  out.clear();
  for (char32_t c : s) {  // remove_control_chars
    if (!is_ftfy_control(c)) out += c;
  }
  return nfc(out);  // ftfy's config.normalization "NFC", last step of every round
}

// ftfy.fix_text: per line, HTML unescaping disabled from the first line holding '<' on.
std::u32string ftfy_fix_text(const std::u32string& text) {
  std::u32string out;
  bool unescape = true;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find(U'\n', pos);
    size_t end = nl == std::u32string::npos ? text.size() : nl + 1;
    std::u32string seg = text.substr(pos, end - pos);
    if (seg.find(U'<') != std::u32string::npos) unescape = false;
    for (int round = 0; round < 64; ++round) {
      std::u32string next = ftfy_round(seg, unescape);
      if (next == seg) break;
      seg.swap(next);
    }
    out += seg;
    pos = end;
  }
  return out;
}

// ----------------------------------------------------------------------------------------------
// Python str.lower()

// Python str.lower() on UTF-8: fix-ups PCRE2 lacks, then PCRE2's Unicode \L case forcing.
std::string python_lower(const std::u32string& text) {
  static const Pcre2Code all = compile_pcre2(".+", PCRE2_UTF | PCRE2_UCP | PCRE2_DOTALL);
  auto cased = [](char32_t c) {  // approximates Unicode Cased for the sigma rule
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= 0xC0 && c != 0xD7 && c != 0xF7 && c < 0x2000);
  };
  std::u32string s;
  s.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char32_t c = text[i];
    if (c == 0x130) {
      s += U"i\u0307";
    } else if (c >= 0x2160 && c <= 0x216F) {
      s += c + 0x10;  // Roman numerals (Nl)
    } else if (c >= 0x24B6 && c <= 0x24CF) {
      s += c + 0x1A;  // circled Latin capitals (So)
    } else if (c == 0x3A3 && i > 0 && cased(text[i - 1]) &&
               !(i + 1 < text.size() && cased(text[i + 1]))) {
      s += 0x3C2;  // final sigma
    } else {
      s += c;
    }
  }
  const std::string in = encode_utf8(s);
  if (in.empty()) return in;
  Pcre2MatchData md(pcre2_match_data_create_from_pattern(all.get(), nullptr));
  std::string out(in.size() + in.size() / 2 + 16, '\0');
  for (int attempt = 0; attempt < 2; ++attempt) {
    PCRE2_SIZE out_len = out.size();
    int rc =
        pcre2_substitute(all.get(), reinterpret_cast<PCRE2_SPTR>(in.data()), in.size(), 0,
                         PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_EXTENDED |
                             PCRE2_SUBSTITUTE_OVERFLOW_LENGTH | PCRE2_NO_UTF_CHECK,
                         md.get(), nullptr, reinterpret_cast<PCRE2_SPTR>("\\L$0"),
                         PCRE2_ZERO_TERMINATED, reinterpret_cast<PCRE2_UCHAR*>(&out[0]), &out_len);
    if (rc == PCRE2_ERROR_NOMEMORY) {
      out.resize(out_len);
      continue;
    }
    if (rc < 0) throw std::logic_error("CLIPTokenizer: PCRE2 lower-casing failed");
    out.resize(out_len);
    return out;
  }
  throw std::logic_error("CLIPTokenizer: PCRE2 lower-casing buffer sizing failed");
}

}  // namespace

// basic_clean (ftfy.fix_text, html.unescape twice, strip) + whitespace_clean + lower().
std::string clip_clean_text(const std::string& utf8) {
  std::u32string s = ftfy_fix_text(decode_utf8(utf8, kWho));
  s = html_unescape(html_unescape(s));
  std::u32string collapsed;  // " ".join(s.split())
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_python_space(s[i])) ++i;
    size_t start = i;
    while (i < s.size() && !is_python_space(s[i])) ++i;
    if (i > start) {
      if (!collapsed.empty()) collapsed += ' ';
      collapsed.append(s, start, i - start);
    }
  }
  return python_lower(collapsed);
}

}  // namespace lf
