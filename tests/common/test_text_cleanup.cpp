// clip_clean_text against the reference simple_tokenizer clean-up (_clean_lower: ftfy 6.3.1
// fix_text, Python 3.11 html.unescape twice, whitespace collapse, lower()). Needs no vocab file,
// so it runs where the CLIPTokenizer tests skip. Expected strings are the reference outputs
// recorded in test_clip_tokenizer.cpp or consistent with its reference ids; the invalid-UTF-8
// messages pin this implementation's (CLIPTokenizer's) wording and byte offsets.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "common/text/clip_tokenizer.h"
#include "common/text/text_cleanup.h"

namespace lf {
namespace {

struct Case {
  const char* text;
  const char* clean;
};

// clang-format off
const Case kCases[] = {
    // _clean_lower(text) from the reference run (see test_clip_tokenizer.cpp).
    {"A Photo of a CAT, sitting on a Mat!", "a photo of a cat, sitting on a mat!"},
    {"Tom &amp; Jerry &lt;3 &#233;t&#xE9; &nbsp;x", "tom & jerry <3 \xc3\xa9t\xc3\xa9 x"},
    {"<i>fish</i> &amp;amp;amp; chips", "<i>fish</i> &amp; chips"},
    {"   lots \t of\n\nwhitespace\xc2\xa0" "and\xe2\x80\x83more   ", "lots of whitespace and more"},
    {"\xc3\x80\xc3\x89\xc3\x8e\xc3\x95\xc3\x9c \xce\xa3\xce\x9f\xce\xa6\xce\x9f\xce\xa3 "
     "\xc4\xb0stanbul \xe2\x85\xab \xe2\x92\xb6 STRASSE",
     "\xc3\xa0\xc3\xa9\xc3\xae\xc3\xb5\xc3\xbc \xcf\x83\xce\xbf\xcf\x86\xce\xbf\xcf\x82 "
     "i\xcc\x87stanbul \xe2\x85\xbb \xe2\x93\x90 strasse"},
    {"price\xc2\x80 5 \x1b[31mred\x1b[0m text\x07", "price\xe2\x82\xac 5 red text"},
    {"", ""},
    // Captions whose reference ids (test_clip_tokenizer.cpp kCases) these clean-ups reproduce.
    {"fish &amp;amp;amp; chips", "fish & chips"},
    {"\xe2\x80\x9c" "curly quotes\xe2\x80\x9d and \xe2\x80\x98single\xe2\x80\x99 \xef\xac\x81ne "
     "\xef\xac\x82ower",
     "\"curly quotes\" and 'single' fine flower"},
    {"\xef\xbc\xa6\xef\xbc\xb5\xef\xbc\xac\xef\xbc\xac\xef\xbc\xb7\xef\xbc\xa9\xef\xbc\xa4"
     "\xef\xbc\xb4\xef\xbc\xa8\xe3\x80\x80\xef\xbd\x94\xef\xbd\x85\xef\xbd\x98\xef\xbd\x94"
     "\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93 \xef\xbd\xb6\xef\xbe\x80\xef\xbd\xb6\xef\xbe\x85",
     "fullwidth text123 \xe3\x82\xab\xe3\x82\xbf\xe3\x82\xab\xe3\x83\x8a"},
    {"don't you're we've I'm they'll she'd it's", "don't you're we've i'm they'll she'd it's"},
};
// clang-format on

TEST(ClipCleanText, MatchesReference) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(clip_clean_text(c.text), c.clean);
  }
}

TEST(ClipCleanText, IsWhatCLIPTokenizerCleanTextDoes) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(CLIPTokenizer::clean_text(c.text), clip_clean_text(c.text));
  }
}

// ftfy's NFC step: a combining sequence becomes the precomposed letter (Python
// unicodedata.normalize("NFC", "e\u0301") == "\u00e9"), so both spellings tokenize alike.
TEST(ClipCleanText, AppliesNfcAsFtfyDoes) {
  EXPECT_EQ(clip_clean_text("Caf" "e\xcc\x81"), "caf\xc3\xa9");
  EXPECT_EQ(clip_clean_text("A\xcc\x8a ngstr\xc3\xb6m"), "\xc3\xa5 ngstr\xc3\xb6m");
  EXPECT_EQ(clip_clean_text("plain ascii"), "plain ascii");
}

TEST(ClipCleanText, RejectsInvalidUtf8WithOffset) {
  const std::pair<const char*, const char*> bad[] = {
      {"caf\xe9", "CLIPTokenizer: text is not valid UTF-8 (byte 3)"},           // truncated
      {"\xed\xa0\x80", "CLIPTokenizer: text is not valid UTF-8 (byte 0)"},      // surrogate
      {"ab\xc0\x80", "CLIPTokenizer: text is not valid UTF-8 (byte 2)"},        // overlong lead
      {"\xe0\x80\x80", "CLIPTokenizer: text is not valid UTF-8 (byte 0)"},      // overlong
      {"\xf4\x90\x80\x80", "CLIPTokenizer: text is not valid UTF-8 (byte 0)"},  // > U+10FFFF
      {"ok\xe2\x28\xa1", "CLIPTokenizer: text is not valid UTF-8 (byte 3)"},    // bad continuation
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(b.second);
    try {
      clip_clean_text(b.first);
      ADD_FAILURE() << "expected std::invalid_argument";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), b.second);
    }
  }
}

}  // namespace
}  // namespace lf
