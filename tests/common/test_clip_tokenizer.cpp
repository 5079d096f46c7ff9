// CLIPTokenizer ids against the reference open_clip tokenizer (open_clip_torch 3.3.0,
// tokenizer.SimpleTokenizer.encode with ftfy 6.3.1 and regex 2026.11.19 under Python 3.11).
// Expected ids were produced once by loading open_clip/tokenizer.py from the downloaded wheel
// (pip download --no-deps open_clip_torch==3.3.0) with its special tokens respelled as openai's
// <|startoftext|>/<|endoftext|> (same ids), and printing tok.encode(text) for each caption below.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/text/clip_tokenizer.h"

namespace lf {
namespace {

const char* kVocab = LF_SOURCE_DIR "/.deps/bpe_simple_vocab_16e6.txt.gz";

struct Case {
  const char* text;
  std::vector<int> ids;
};

// clang-format off
const std::vector<Case> kCases = {
    {"a photo of a cat",
     {320, 1125, 539, 320, 2368}},
    {"A Photo of a CAT, sitting on a Mat!",
     {320, 1125, 539, 320, 2368, 267, 4919, 525, 320, 9063, 256}},
    {"masterpiece, best quality, 1girl, solo, long hair, looking at viewer",
     {12066, 267, 949, 3027, 267, 272, 1611, 267, 5797, 267, 1538, 2225, 267, 1312, 536, 15061}},
    {"in 2024 there were 3.14 apples",
     {530, 273, 271, 273, 275, 997, 1365, 274, 269, 272, 275, 14032}},
    {"café au lait",
     {15304, 2566, 572, 585}},
    {"emoji 🎉🐱 party 👨\xe2\x80\x8d👩\xe2\x80\x8d👧",
     {16327, 4310, 22979, 1580, 25023, 26304, 964, 356}},
    {"don't you're we've I'm they'll she'd it's",
     {847, 713, 592, 982, 649, 1200, 328, 880, 889, 1342, 1043, 1896, 585, 568}},
    {"Tom &amp; Jerry &lt;3 &#233;t&#xE9; &nbsp;x",
     {2435, 261, 9164, 283, 274, 3459, 39694, 343}},
    {"fish &amp;amp;amp; chips",
     {2759, 261, 8855}},
    {"<i>fish</i> &amp;amp;amp; chips",
     {283, 328, 285, 2759, 34308, 328, 285, 261, 6259, 282, 8855}},
    {"“curly quotes” and ‘single’ ﬁne ﬂower",
     {257, 20795, 5808, 257, 537, 568, 17005, 262, 3797, 4055}},
    {"ＦＵＬＬＷＩＤＴＨ\xe3\x80\x80ｔｅｘｔ１２３ ｶﾀｶﾅ",
     {9407, 23571, 4160, 272, 273, 274, 37367, 34941, 37367, 2429, 488}},
    {"   lots \x09 of\x0a\x0awhitespace\xc2\xa0" "and\xe2\x80\x83more   ",
     {2958, 539, 4699, 2138, 537, 750}},
    {"",
     {}},
    {"ÀÉÎÕÜ ΣΟΦΟΣ İstanbul Ⅻ Ⓐ STRASSE",
     {36149, 3459, 48704, 127, 113, 47177, 139, 225, 138, 123, 139, 228, 138, 123, 139, 480,
      328, 16384, 11231, 158, 227, 375, 27400, 494, 1894, 8938}},
    {"中文 日本語のテキスト 한국어",
     {19759, 255, 29032, 485, 39121, 44353, 34002, 252, 21575, 2429, 228, 47121, 32421, 486,
      15197, 250, 31871, 255, 31625, 368}},
    {"a dog's ball (red) -- 50% off!!! @user #tag_name",
     {320, 1929, 568, 1069, 263, 736, 264, 2432, 276, 271, 260, 1007, 995, 287, 7031, 258,
      3640, 318, 1981}},
    {"price\xc2\x80 5 \x1b[31mred\x1b[0m text\x07",
     {2827, 6309, 276, 736, 4160}},
    {"<|startoftext|>Hello<|endoftext|> world",
     {49406, 3306, 49407, 1002}},
    {"a highly detailed digital painting of a majestic snow leopard resting on a rocky cliff a"
     "t sunset, dramatic lighting, volumetric fog, intricate fur texture, golden hour, trendin"
     "g on artstation, 8k resolution, sharp focus, cinematic composition, by greg rutkowski an"
     "d alphonse mucha, award winning photograph, ultra realistic, extremely detailed face, be"
     "autiful eyes, soft skin, flowing silk dress, ornate jewelry, dynamic pose, wind blowing "
     "through her hair, epic fantasy landscape in the background",
     {320, 5302, 12609, 2794, 3086, 539, 320, 15335, 2583, 15931, 18044, 525, 320, 9648, 10625,
      536, 3424, 267, 11240, 5799, 267, 3563, 19950, 9417, 267, 29616, 9686, 16505, 267, 3878,
      2232, 267, 6087, 525, 1486, 2631, 267, 279, 330, 9977, 267, 8157, 4353, 267, 25602,
      17510, 267, 638, 7943, 14973, 17649, 537, 37865, 611, 42191, 267, 2047, 2577, 8853, 267,
      8118, 16157, 267, 6519, 12609, 1710, 267, 1215, 3095, 267, 3773, 3575, 267, 14922, 9743,
      2595, 267, 46865, 6039, 267, 10057, 4230, 267, 3630, 12087, 1417, 899, 2225, 267, 4991,
      5267, 5727, 530, 518, 5994}},
};
// clang-format on

class CLIPTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    struct stat st {};
    if (::stat(kVocab, &st) == 0) tokenizer_ = new CLIPTokenizer(CLIPTokenizer::from_file(kVocab));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override {
    if (tokenizer_ == nullptr) {
      GTEST_SKIP() << "CLIP vocab not found at " << kVocab
                   << " (copy bpe_simple_vocab_16e6.txt.gz from the open_clip_torch wheel there)";
    }
  }
  static CLIPTokenizer* tokenizer_;
};
CLIPTokenizer* CLIPTokenizerTest::tokenizer_ = nullptr;

TEST_F(CLIPTokenizerTest, VocabSize) { EXPECT_EQ(tokenizer_->vocab_size(), 49408); }

TEST_F(CLIPTokenizerTest, EncodeMatchesOpenClip) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(tokenizer_->encode(c.text), c.ids);
  }
}

TEST_F(CLIPTokenizerTest, CleanTextMatchesReference) {
  // _clean_lower(text) from the same reference run.
  EXPECT_EQ(CLIPTokenizer::clean_text("A Photo of a CAT, sitting on a Mat!"),
            "a photo of a cat, sitting on a mat!");
  EXPECT_EQ(CLIPTokenizer::clean_text("Tom &amp; Jerry &lt;3 &#233;t&#xE9; &nbsp;x"),
            "tom & jerry <3 \xc3\xa9t\xc3\xa9 x");
  EXPECT_EQ(CLIPTokenizer::clean_text("<i>fish</i> &amp;amp;amp; chips"),
            "<i>fish</i> &amp; chips");
  EXPECT_EQ(CLIPTokenizer::clean_text("   lots \t of\n\nwhitespace\xc2\xa0"
                                      "and\xe2\x80\x83more   "),
            "lots of whitespace and more");
  EXPECT_EQ(CLIPTokenizer::clean_text("\xc3\x80\xc3\x89\xc3\x8e\xc3\x95\xc3\x9c \xce\xa3\xce\x9f"
                                      "\xce\xa6\xce\x9f\xce\xa3 \xc4\xb0stanbul \xe2\x85\xab "
                                      "\xe2\x92\xb6 STRASSE"),
            "\xc3\xa0\xc3\xa9\xc3\xae\xc3\xb5\xc3\xbc \xcf\x83\xce\xbf\xcf\x86\xce\xbf\xcf\x82 "
            "i\xcc\x87stanbul \xe2\x85\xbb \xe2\x93\x90 strasse");
  EXPECT_EQ(CLIPTokenizer::clean_text("price\xc2\x80 5 \x1b[31mred\x1b[0m text\x07"),
            "price\xe2\x82\xac 5 red text");
  EXPECT_EQ(CLIPTokenizer::clean_text(""), "");
}

TEST_F(CLIPTokenizerTest, TokenizeFramesAndPads) {
  std::vector<int> expected = {49406, 320, 1125, 539, 320, 2368, 49407};
  expected.resize(77, 49407);
  EXPECT_EQ(tokenizer_->tokenize("a photo of a cat"), expected);
  std::fill(expected.begin() + 7, expected.end(), 0);  // SD2 / SDXL bigG pad with 0
  EXPECT_EQ(tokenizer_->tokenize("a photo of a cat", 77, 0), expected);
  std::vector<int> empty = {49406, 49407};
  empty.resize(77, 49407);
  EXPECT_EQ(tokenizer_->tokenize(""), empty);
}

TEST_F(CLIPTokenizerTest, TokenizeTruncatesKeepingEos) {
  const Case& longest = kCases.back();
  ASSERT_EQ(longest.ids.size(), 95u);
  std::vector<int> expected = {49406};
  expected.insert(expected.end(), longest.ids.begin(), longest.ids.begin() + 75);
  expected.push_back(49407);
  const std::vector<int> got = tokenizer_->tokenize(longest.text);
  ASSERT_EQ(got.size(), 77u);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(got[75], 9743);  // "silk</w>", the 75th BPE id, is the last one kept
  const std::string kept = tokenizer_->decode(std::vector<int>(got.begin() + 1, got.begin() + 76));
  EXPECT_EQ(kept.substr(kept.size() - 20), "skin , flowing silk ");  // reference decode()
  EXPECT_THROW(tokenizer_->tokenize("x", 1), std::invalid_argument);
}

TEST_F(CLIPTokenizerTest, DecodeRestoresText) {
  EXPECT_EQ(tokenizer_->decode({320, 1125, 539, 320, 2368}), "a photo of a cat ");
  EXPECT_EQ(tokenizer_->decode({15304, 2566, 572, 585}), "caf\xc3\xa9 au lait ");
  EXPECT_THROW(tokenizer_->decode({49408}), std::out_of_range);
}

TEST_F(CLIPTokenizerTest, RejectsInvalidUtf8) {
  EXPECT_THROW(tokenizer_->encode("caf\xe9"), std::invalid_argument);
  EXPECT_THROW(tokenizer_->encode("\xed\xa0\x80"), std::invalid_argument);  // surrogate
}

TEST_F(CLIPTokenizerTest, ConcurrentEncodeAgrees) {
  std::vector<std::vector<int>> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep) results[t] = tokenizer_->encode(kCases.back().text);
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& r : results) EXPECT_EQ(r, kCases.back().ids);
}

TEST(CLIPTokenizerFile, MissingVocabNamesPath) {
  try {
    CLIPTokenizer::from_file("/nonexistent/bpe.txt.gz");
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "/nonexistent/bpe.txt.gz: cannot open (No such file or directory)");
  }
}

TEST(CLIPTokenizerFile, ShortVocabRejected) {
  const std::string path = std::string(LF_BINARY_DIR) + "/short_vocab_test.txt";
  FILE* f = std::fopen(path.c_str(), "w");  // zlib reads uncompressed files transparently
  ASSERT_NE(f, nullptr);
  std::fputs("#version: 0.2\ni n\nt h\n", f);
  std::fclose(f);
  try {
    CLIPTokenizer::from_file(path);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              path +
                  ": invalid CLIP BPE vocab: has 4 lines, expected at least 48895 (header + "
                  "merges)");
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace lf
