// Sample images in a real 2-rank job (coordinator + mpirun workers, tiny model, CPU; issue 13):
// kohya's sample_prompts .txt with --w --h --s --d --n --ss (a width of 200 px: not a multiple of
// 64, so the UNet's upsamples meet odd skip sizes), sample_at_first and
// sample_every_n_steps 2 over 4 steps write 3 prompts x steps 0, 2, 4 PNGs under
// <output_dir>/sample/ with kohya's names, the prompts' sizes and the prompt in the
// "parameters" text chunk; the prompts are split across the ranks; TensorBoard gets them as
// sample_<i>; and the final LoRA's bytes equal a run without sampling. A resume makes the images
// its checkpoint's step missed. A malformed prompt line stops the job at the coordinator,
// naming the file and line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>

#include "common/image/png_encode.h"
#include "tests/integration/process_util.h"
#include "tests/integration/tiny_job.h"

namespace fs = std::filesystem;

namespace {

using lf::test::free_port;
using lf::test::RunResult;

std::uint32_t be32(const std::string& b, std::size_t at) {
  return (static_cast<std::uint32_t>(static_cast<unsigned char>(b[at])) << 24) |
         (static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 1])) << 16) |
         (static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 2])) << 8) |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 3]));
}

class SampleImagesJob : public lf::test::TinyJobTest {
 protected:
  std::string config(const std::string& name, const std::string& out, const std::string& add) {
    cport_ = free_port();
    return with_output_keys(write_config(name + ".yaml", out, 4, 2, cport_, free_port(), 0), add);
  }
  std::string prompts(const std::string& text) {
    const fs::path p = dir_ / "prompts.txt";
    std::ofstream(p) << text;
    return p.string();
  }
  int cport_ = 0;
};

TEST_F(SampleImagesJob, WritesKohyaNamedPngsAndLeavesTheLoRAUnchanged) {
  const std::string file = prompts(
      "# kohya's prompt file\n"
      "a photo of a dog --w 64 --h 64 --s 3 --d 7\n"
      "a cat, masterpiece --n blurry --w 96 --h 64 --s 2 --ss euler_a\n"
      "a bird --w 200 --h 128 --s 2 --ss dpmsolver++\n");
  const std::string out = (dir_ / "sampled").string();
  const fs::path logs = dir_ / "logs";
  const std::string cfg = config("sampled", out,
                                 "  sample_prompts: " + file +
                                     "\n  sample_at_first: true\n  sample_every_n_steps: 2\n"
                                     "  sample_sampler: euler\n  logging_dir: " +
                                     logs.string() + "\n");
  RunResult a = run_job(cfg, cport_, 2, "");
  ASSERT_EQ(a.exit_code, 0) << a.output;

  // kohya: <output_name>_<step:06d>_<prompt:02d>_<YYYYmmddHHMMSS>[_<seed>].png
  // sample_at_first images are named as epoch 0, as kohya's.
  const std::regex name(R"(e2e_(e000000|\d{6})_(\d{2})_\d{14}(_7)?\.png)");
  std::map<std::string, int> per_step;
  std::map<int, std::pair<std::uint32_t, std::uint32_t>> sizes;
  for (const auto& e : fs::directory_iterator(fs::path(out) / "sample")) {
    std::smatch m;
    const std::string fname = e.path().filename().string();
    ASSERT_TRUE(std::regex_match(fname, m, name)) << fname;
    const int prompt = std::stoi(m[2]);
    EXPECT_EQ(m[3].matched, prompt == 0) << fname;  // only prompt 0 has a --d seed
    per_step[m[1]] += 1;
    const std::string png = lf::test::read_file(e.path().string());
    sizes[prompt] = {be32(png, 16), be32(png, 20)};  // IHDR width, height
    const auto text = lf::png_text_chunks(png, fname);
    ASSERT_EQ(text.size(), 1u);
    EXPECT_EQ(text[0].first, "parameters");
    const char* want[] = {
        "a photo of a dog\nSteps: 3, Sampler: euler, CFG scale: 7.5, Seed: 7, "
        "Size: 64x64",
        "a cat, masterpiece\nNegative prompt: blurry\nSteps: 2, Sampler: "
        "euler_a",
        "a bird\nSteps: 2, Sampler: dpmsolver++, CFG scale: 7.5, Seed: "};
    EXPECT_EQ(text[0].second.rfind(want[prompt], 0), 0u) << text[0].second;
  }
  EXPECT_EQ(per_step, (std::map<std::string, int>{{"e000000", 3}, {"000002", 3}, {"000004", 3}}));
  EXPECT_EQ(sizes[0], std::make_pair(64u, 64u));
  EXPECT_EQ(sizes[1], std::make_pair(96u, 64u));
  EXPECT_EQ(sizes[2], std::make_pair(200u, 128u));
  EXPECT_NE(a.output.find("sample images: 3 after global_step 4"), std::string::npos) << a.output;

  // TensorBoard holds every prompt's image (rank 1's too) at steps 0, 2 and 4.
  std::vector<fs::path> runs;
  for (const auto& e : fs::directory_iterator(logs)) runs.push_back(e.path());
  ASSERT_EQ(runs.size(), 1u);
  const RunResult tb = lf::test::run(std::string(LF_VENV_PYTHON) + " " + LF_READ_TENSORBOARD + " " +
                                     (runs[0] / "network_train").string() + " 2>&1");
  ASSERT_EQ(tb.exit_code, 0) << tb.output;
  const nlohmann::json images = nlohmann::json::parse(tb.output)["images"];
  EXPECT_EQ(images["sample_1"], nlohmann::json::parse("[[0, 96, 64], [2, 96, 64], [4, 96, 64]]"));
  EXPECT_EQ(images["sample_2"].size(), 3u);

  // The same job without sampling trains the same bytes.
  const std::string plain = (dir_ / "plain").string();
  const std::string plain_cfg = config("plain", plain, "");  // picks a new cport_
  RunResult b = run_job(plain_cfg, cport_, 2, "");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  lf::test::expect_same_lora(out + "/e2e.safetensors", plain + "/e2e.safetensors");
}

// A preemption commits its checkpoint before the step's images are made: the resumed run makes
// the images its checkpoint's step was due when they are not in sample/ (here removed by hand
// after a --stop-at-step run).
TEST_F(SampleImagesJob, AResumeMakesTheImagesItsCheckpointStepMissed) {
  const std::string file = prompts("a dog --w 64 --h 64 --s 2\n");
  const std::string out = (dir_ / "resumed").string();
  const std::string cfg =
      config("resumed", out, "  sample_prompts: " + file + "\n  sample_every_n_steps: 2\n");
  RunResult a = run_job(cfg, cport_, 2, "--stop-at-step 2");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const fs::path dir = fs::path(out) / "sample";
  auto steps = [&dir] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) {
      names.push_back(e.path().filename().string().substr(0, 10));  // "e2e_000002"
    }
    std::sort(names.begin(), names.end());
    return names;
  };
  ASSERT_EQ(steps(), std::vector<std::string>{"e2e_000002"});
  for (const auto& e : fs::directory_iterator(dir)) fs::remove(e.path());
  RunResult b = run_job(cfg, cport_, 2, "--resume " + out);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(steps(), (std::vector<std::string>{"e2e_000002", "e2e_000004"}));
}

TEST_F(SampleImagesJob, AMalformedPromptLineStopsTheJobAtTheCoordinator) {
  const std::string file = prompts("a dog --w 64\na cat --w wide\n");
  const std::string cfg = config("bad", (dir_ / "bad").string(),
                                 "  sample_prompts: " + file + "\n  sample_every_n_steps: 2\n");
  std::string coord;
  RunResult r = run_job(cfg, cport_, 1, "", &coord);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(coord.find(file + ":2: --w expects an integer, got 'wide'"), std::string::npos)
      << coord;
}

}  // namespace
