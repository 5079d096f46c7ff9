// kohya's sample-prompt files: the .txt line options, the .toml [prompt] defaults with
// [[prompt.subset]] entries, the .json list, kohya's rounding, and errors naming file and line.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/config/sample_prompts.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

// A scratch folder per test process, removed when the tests end.
const fs::path& scratch() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("lf_prompts_" + std::to_string(getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}
struct RemoveScratch : ::testing::Environment {
  void TearDown() override { fs::remove_all(scratch()); }
};
const auto* const kRemoveScratch = ::testing::AddGlobalTestEnvironment(new RemoveScratch);

std::string write(const std::string& name, const std::string& text) {
  const fs::path p = scratch() / ("prompts" + name);
  std::ofstream(p) << text;
  return p.string();
}

std::string error_of(const std::string& path) {
  try {
    load_sample_prompts(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(SamplePrompts, TxtLinesTakeKohyasOptions) {
  const std::string path =
      write(".txt",
            "# a comment\n"
            "a photo of sks dog --n lowres, blurry --w 770 --h 600 --d 42 --s 20 --l 5.5\n"
            "\n"
            "masterpiece, cat --ss euler_a --s 2000 --w 10\n");
  const auto prompts = load_sample_prompts(path);
  ASSERT_EQ(prompts.size(), 2u);
  const SamplePrompt& a = prompts[0];
  EXPECT_EQ(a.index, 0);
  EXPECT_EQ(a.line, 2);
  EXPECT_EQ(a.prompt, "a photo of sks dog");
  EXPECT_EQ(a.negative_prompt, "lowres, blurry");
  EXPECT_EQ(a.width, 768);  // kohya: down to a multiple of 8
  EXPECT_EQ(a.height, 600);
  EXPECT_EQ(a.seed, 42);
  EXPECT_EQ(a.sample_steps, 20);
  EXPECT_DOUBLE_EQ(a.scale, 5.5);
  const SamplePrompt& b = prompts[1];
  EXPECT_EQ(b.index, 1);
  EXPECT_EQ(b.line, 4);
  EXPECT_EQ(b.prompt, "masterpiece, cat");
  EXPECT_EQ(b.sampler, "euler_a");
  EXPECT_EQ(b.sample_steps, 1000);  // clamped
  EXPECT_EQ(b.width, 64);           // at least 64
  EXPECT_EQ(b.height, 512);
  EXPECT_FALSE(b.seed.has_value());
  EXPECT_DOUBLE_EQ(b.scale, 7.5);
}

TEST(SamplePrompts, MalformedLinesNameFileAndLine) {
  const std::string bad_w = write("_w.txt", "ok\na dog --w wide\n");
  EXPECT_EQ(error_of(bad_w), bad_w + ":2: --w expects an integer, got 'wide'");
  const std::string unknown = write("_u.txt", "a dog --q 3\n");
  EXPECT_EQ(
      error_of(unknown),
      unknown + ":1: unknown option --q (lorafleet takes kohya's --n --w --h --d --s --l --ss)");
  const std::string empty = write("_e.txt", "# nothing\n");
  EXPECT_EQ(error_of(empty), empty + ": no prompt in the sample prompts file");
  const std::string no_prompt = write("_n.json", R"([{"prompt": " ", "width": 512}])");
  EXPECT_EQ(error_of(no_prompt), no_prompt + ": prompt 1: empty prompt");
  EXPECT_NE(error_of(write(".yaml", "x")).find("must be a .txt, .toml or .json"),
            std::string::npos);
  const std::string latin1 = write("_l.txt", "ok\ncaf\xe9 au lait --w 64\n");
  EXPECT_EQ(error_of(latin1),
            latin1 + ":2: not UTF-8 text (byte 7; save the prompt file as UTF-8)");
  const std::string sampler = write("_s.txt", "a cat --ss plms\n");
  EXPECT_EQ(error_of(sampler), sampler +
                                   ":1: unknown sampler 'plms' (expected one of: ddim, "
                                   "euler, k_euler, euler_a, k_euler_a, dpmsolver++, "
                                   "k_dpm_2, dpm_2)");
}

// Found by the sample_prompts fuzzer: a JSON width of 3.3e33 was cast to int64 (undefined
// behaviour); sizes past what a worker could draw, and non-finite scales, are refused up front.
TEST(SamplePrompts, OutOfRangeValuesAreRefusedNotWrapped) {
  const std::string huge_json = write("_hj.json", R"([{"prompt": "a", "width": 3.3e33}])");
  EXPECT_EQ(error_of(huge_json), huge_json + ": prompt 1: 'width' expects an integer");
  const std::string u64 = write("_u64.json", R"([{"prompt": "a", "seed": 18446744073709551615}])");
  EXPECT_EQ(error_of(u64), u64 + ": prompt 1: 'seed' expects an integer");
  const std::string wide = write("_wide.txt", "a dog --w 4294967360\n");
  EXPECT_EQ(error_of(wide), wide + ":1: --w expects at most 16384 pixels, got 4294967360");
  const std::string tall = write("_t.toml",
                                 "[prompt]\nheight = 20000\n[[prompt.subset]]\n"
                                 "prompt = \"a\"\n");
  EXPECT_EQ(error_of(tall), tall + ":1: 'height' expects at most 16384 pixels, got 20000");
  // Found by the same fuzzer in TOML (regressions/sample_prompts/toml_float_width_overflow):
  // toml++ cast a float of 5e251 to int64 itself; an integral float within range still counts.
  const std::string huge_toml =
      write("_ht.toml", "[prompt]\nwidth = 5e251\n[[prompt.subset]]\nprompt = \"a\"\n");
  EXPECT_EQ(error_of(huge_toml), huge_toml + ":2: 'width' expects an integer");
  const std::string half = write("_hf.toml", "[prompt]\nwidth = 256.5\n[[prompt.subset]]\n");
  EXPECT_EQ(error_of(half), half + ":2: 'width' expects an integer");
  const auto whole = load_sample_prompts(
      write("_wf.toml", "[prompt]\nwidth = 256.0\n[[prompt.subset]]\nprompt = \"a\"\n"));
  EXPECT_EQ(whole.at(0).width, 256);
  const std::string nan = write("_nan.txt", "a dog --l nan\n");
  EXPECT_EQ(error_of(nan), nan + ":1: --l expects a finite number");
  // kohya's clamp of the steps, now without wrapping: 2^32 + 5 steps is 1000, not 5.
  const auto steps = load_sample_prompts(write("_s.txt", "a dog --s 4294967301\n"));
  EXPECT_EQ(steps.at(0).sample_steps, 1000);
}

TEST(SamplePrompts, KohyasLooseSpellings) {
  // A UTF-8 BOM, upper-case option letters (kohya's re.IGNORECASE) and a negative seed, which
  // kohya's \d+ does not match (the prompt keeps a derived seed).
  const auto p =
      load_sample_prompts(write("_k.txt", "\xEF\xBB\xBF# c\ncat --W 128 --D -1 --S 4\n"));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].prompt, "cat");
  EXPECT_EQ(p[0].width, 128);
  EXPECT_EQ(p[0].sample_steps, 4);
  EXPECT_FALSE(p[0].seed.has_value());
}

TEST(SamplePrompts, TomlSubsetsInheritThePromptTable) {
  const std::string path = write(".toml",
                                 "[prompt]\n"
                                 "negative_prompt = \"bad\"\n"
                                 "width = 640\n"
                                 "sample_steps = 12\n"
                                 "\n"
                                 "[[prompt.subset]]\n"
                                 "prompt = \"first\"\n"
                                 "seed = 7\n"
                                 "\n"
                                 "[[prompt.subset]]\n"
                                 "prompt = \"second\"\n"
                                 "width = 512\n"
                                 "scale = 4\n");
  const auto prompts = load_sample_prompts(path);
  ASSERT_EQ(prompts.size(), 2u);
  EXPECT_EQ(prompts[0].prompt, "first");
  EXPECT_EQ(prompts[0].negative_prompt, "bad");
  EXPECT_EQ(prompts[0].width, 640);
  EXPECT_EQ(prompts[0].sample_steps, 12);
  EXPECT_EQ(prompts[0].seed, 7);
  EXPECT_EQ(prompts[1].width, 512);
  EXPECT_DOUBLE_EQ(prompts[1].scale, 4.0);
  EXPECT_EQ(prompts[1].index, 1);
  const std::string bad =
      write("_b.toml", "[prompt]\n[[prompt.subset]]\nprompt = \"x\"\nwidth = \"a\"\n");
  EXPECT_EQ(error_of(bad), bad + ":4: 'width' expects an integer");  // the key's line
}

TEST(SamplePrompts, JsonListsOfObjectsOrLines) {
  const std::string path =
      write(".json", R"([{"prompt": "a", "height": 256.0, "seed": 3}, "b --n c --d 9"])");
  const auto prompts = load_sample_prompts(path);
  ASSERT_EQ(prompts.size(), 2u);
  EXPECT_EQ(prompts[0].height, 256);
  EXPECT_EQ(prompts[0].seed, 3);
  EXPECT_EQ(prompts[1].prompt, "b");
  EXPECT_EQ(prompts[1].negative_prompt, "c");
  EXPECT_EQ(prompts[1].seed, 9);
  EXPECT_EQ(prompts[1].index, 1);
  EXPECT_NE(error_of(write("_f.json", R"([{"prompt": "a", "width": 128.5}])"))
                .find(": prompt 1: 'width' expects an integer"),
            std::string::npos);
  const std::string bad = write("_b.json", R"([{"prompt": "a", "colour": 1}])");
  EXPECT_NE(error_of(bad).find(bad + ": prompt 1: unknown key 'colour'"), std::string::npos);
}

}  // namespace
}  // namespace lf
