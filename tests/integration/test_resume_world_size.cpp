// Resume on a different world size, end to end: a real coordinator and `mpirun` workers train
// the tiny model for max_train_epochs 2 under a cosine schedule on 2 ranks, stop mid-epoch, and
// the checkpoint is resumed on 1 rank and on 3. From the workers' --sample-log audit trail: the
// interrupted epoch trains exactly its samples (the 2-rank prefix + the resumed rest equal the
// epoch's full plan as a straight 2-rank run trains it: none twice, none missed), global_step
// continues at stop + 1, the first resumed step's lr is the cosine at the stop step for the
// recomputed total, and the run ends at that total.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/integration/process_util.h"

namespace fs = std::filesystem;

namespace {

const std::string kDemo = std::string(LF_SOURCE_DIR) + "/.deps/demo";
const std::string kVocab = std::string(LF_SOURCE_DIR) + "/.deps/bpe_simple_vocab_16e6.txt.gz";
constexpr double kLearningRate = 0.001;
constexpr int kStopStep = 3;

using lf::test::free_port;
using lf::test::mpirun;
using lf::test::run;
using lf::test::RunResult;

// One logged sample.
struct Entry {
  std::int64_t global_step = 0;
  int epoch = 0;
  int rank = 0;
  double lr = 0.0;
  // What identifies the sample within its epoch's plan.
  std::tuple<int, bool, int, int> sample;  // image_index, flip, crop_left, crop_top
};

// All ranks' lines of a --sample-log prefix.
std::vector<Entry> read_sample_log(const std::string& prefix, int world_size) {
  std::vector<Entry> out;
  for (int r = 0; r < world_size; ++r) {
    std::ifstream in(prefix + ".rank" + std::to_string(r) + ".jsonl");
    EXPECT_TRUE(in.good()) << prefix << " rank " << r;
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line);
      Entry e;
      e.global_step = j.at("global_step").get<std::int64_t>();
      e.epoch = j.at("epoch").get<int>();
      e.rank = j.at("rank").get<int>();
      EXPECT_EQ(e.rank, r);
      e.lr = j.at("lr").get<double>();
      e.sample = {j.at("image_index").get<int>(), j.at("flip").get<bool>(),
                  j.at("crop_left").get<int>(), j.at("crop_top").get<int>()};
      out.push_back(e);
    }
  }
  return out;
}

std::multiset<std::tuple<int, bool, int, int>> samples_of_epoch(const std::vector<Entry>& log,
                                                                int epoch) {
  std::multiset<std::tuple<int, bool, int, int>> out;
  for (const Entry& e : log) {
    if (e.epoch == epoch) out.insert(e.sample);
  }
  return out;
}

// lr_schedule.h's cosine with warmup 0: base * 0.5 (1 + cos(pi * s / N)).
double cosine_lr(std::int64_t step, std::int64_t total) {
  const double q =
      static_cast<double>(step) / static_cast<double>(std::max<std::int64_t>(1, total));
  return kLearningRate * std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * 2.0 * 0.5 * q)));
}

// max_train_steps the workers announced ("job <name>: world_size W, N steps over E epochs").
std::int64_t announced_steps(const std::string& output, int world_size) {
  std::smatch m;
  const std::regex re("world_size " + std::to_string(world_size) +
                      R"(, (\d+) steps over 2 epochs)");
  if (!std::regex_search(output, m, re)) return -1;
  return std::stoll(m[1]);
}

class ResumeWorldSize : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kDemo + "/train/10_photo/astronaut.png") && fs::exists(kVocab))
        << "demo data missing: run scripts/prepare_demo_data.sh (scripts/test.sh does)";
    dir_ = fs::temp_directory_path() / ("lf_wsize_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    lf::test::copy_demo_photos(kDemo, dir_.string());
    lf::test::copy_demo_reg_photos(kDemo, dir_.string());
    checkpoint_ = (dir_ / "base.safetensors").string();
    RunResult mk = lf::test::make_tiny_checkpoint(LF_MAKE_CHECKPOINT_BIN, checkpoint_);
    ASSERT_EQ(mk.exit_code, 0) << mk.output;
    cport_ = free_port();
    mport_ = free_port();
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // Two epochs of 3 train photos x 2 repeats + 6 reg samples, flip_aug on, cosine lr.
  std::string write_config(const std::string& name, const std::string& output_dir) {
    const fs::path p = dir_ / name;
    std::ofstream f(p);
    f << "model:\n  pretrained_model_name_or_path: " << checkpoint_
      << "\n  architecture: tiny\n  tokenizer_vocab: " << kVocab << "\n"
      << "dataset:\n  train_data_dir: " << (dir_ / "train").string()
      << "\n  reg_data_dir: " << (dir_ / "reg").string()
      << "\n  resolution: 128\n  min_bucket_reso: 64\n  max_bucket_reso: 256\n"
      << "  caption_extension: .txt\n  flip_aug: true\n"
      << "network:\n  network_dim: 4\n  network_alpha: 2.0\n  network_train_unet_only: true\n"
      << "training:\n  seed: 5\n  train_batch_size: 1\n  learning_rate: " << kLearningRate
      << "\n  lr_scheduler: cosine\n  max_train_epochs: 2\n  save_every_n_steps: 0\n"
      << "output:\n  output_dir: " << output_dir << "\n  output_name: wsize\n"
      << "coordinator:\n  listen_address: 127.0.0.1:" << cport_
      << "\n  metrics_address: 127.0.0.1:" << mport_ << "\n";
    return p.string();
  }

  RunResult run_job(const std::string& config, int np, const std::string& worker_flags) {
    auto coord = std::async(std::launch::async, [&] {
      return run(std::string(LF_COORDINATOR_BIN) + " --config " + config);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    RunResult w = run(mpirun(np) + " " + LF_WORKER_BIN + " --coordinator 127.0.0.1:" +
                      std::to_string(cport_) + " --no-progress-bar " + worker_flags);
    RunResult c = coord.get();
    w.output += "\n[coordinator exit " + std::to_string(c.exit_code) + "]\n" + c.output;
    if (w.exit_code == 0 && c.exit_code != 0) w.exit_code = 100 + c.exit_code;
    return w;
  }

  fs::path dir_;
  std::string checkpoint_;
  int cport_ = 0;
  int mport_ = 0;
};

TEST_F(ResumeWorldSize, TwoRanksResumeOnOneAndOnThreeWithExactSamples) {
  // The reference: epoch 1's full plan as 2 ranks train it straight.
  const std::string straight = (dir_ / "straight").string();
  RunResult r =
      run_job(write_config("straight.yaml", straight), 2, "--sample-log " + straight + "-log");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<Entry> ref = read_sample_log(straight + "-log", 2);
  const auto epoch0 = samples_of_epoch(ref, 0);
  ASSERT_EQ(epoch0.size(), 12u);  // 3 photos x 2 repeats + 6 reg samples (kohya's rule)

  // The interrupted run: 2 ranks, stopped at step 3 of epoch 1.
  const std::string split = (dir_ / "split").string();
  RunResult a =
      run_job(write_config("split.yaml", split), 2,
              "--stop-at-step " + std::to_string(kStopStep) + " --sample-log " + split + "-log");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const std::vector<Entry> before = read_sample_log(split + "-log", 2);
  const std::int64_t total2 = announced_steps(a.output, 2);
  ASSERT_GT(total2, kStopStep) << a.output;
  std::multiset<std::tuple<std::int64_t, int, std::tuple<int, bool, int, int>>> ref_prefix, got;
  for (const Entry& e : ref) {
    if (e.global_step <= kStopStep) ref_prefix.insert({e.global_step, e.rank, e.sample});
  }
  for (const Entry& e : before) {
    EXPECT_EQ(e.epoch, 0);
    EXPECT_LE(e.global_step, kStopStep);
    got.insert({e.global_step, e.rank, e.sample});
  }
  EXPECT_EQ(got, ref_prefix);  // the same prefix as the straight run
  const auto done0 = samples_of_epoch(before, 0);
  ASSERT_LT(done0.size(), 12u);

  for (int w1 : {1, 3}) {
    SCOPED_TRACE("resumed on " + std::to_string(w1) + " ranks");
    const std::string copy = (dir_ / ("resumed" + std::to_string(w1))).string();
    fs::copy(split, copy, fs::copy_options::recursive);
    const std::string log = copy + "-log";
    // 1 rank names the folder; 3 ranks let the coordinator pick the newest checkpoint.
    RunResult b = run_job(
        write_config("resumed" + std::to_string(w1) + ".yaml", copy), w1,
        (w1 == 1 ? "--resume " + copy : std::string("--resume auto")) + " --sample-log " + log);
    ASSERT_EQ(b.exit_code, 0) << b.output;
    EXPECT_NE(b.output.find("resumed from " + copy + "/checkpoints/step-00000003"),
              std::string::npos)
        << b.output;
    const std::vector<Entry> after = read_sample_log(log, w1);
    ASSERT_FALSE(after.empty());

    // Epoch 1: what 2 ranks trained + what the new group trained = the full plan, exactly.
    auto combined = done0;
    const auto rest0 = samples_of_epoch(after, 0);
    combined.insert(rest0.begin(), rest0.end());
    EXPECT_EQ(combined, epoch0);
    EXPECT_EQ(rest0.size(), 12u - done0.size());
    // Epoch 2 is a whole epoch on the new group.
    EXPECT_EQ(samples_of_epoch(after, 1).size(), 12u);

    // global_step continues; the schedule's total is recomputed for the new world size.
    std::int64_t first = after.front().global_step, last = first;
    std::map<std::int64_t, int> per_step;
    for (const Entry& e : after) {
      first = std::min(first, e.global_step);
      last = std::max(last, e.global_step);
      ++per_step[e.global_step];
    }
    EXPECT_EQ(first, kStopStep + 1);
    const std::int64_t total = announced_steps(b.output, w1);
    EXPECT_EQ(last, total) << b.output;
    EXPECT_EQ(static_cast<std::int64_t>(per_step.size()), total - kStopStep);
    for (const auto& [step, n] : per_step) EXPECT_LE(n, w1) << "step " << step;
    if (w1 == 1) {
      // One sample per step: the rest of epoch 1, then epoch 2's 12.
      EXPECT_EQ(total, kStopStep + static_cast<std::int64_t>(12 - done0.size()) + 12);
    } else {
      EXPECT_LT(total, total2);  // 3 ranks take fewer, larger steps than 2
    }
    // The first resumed step applies lr_at_step(stop step) of the new total.
    for (const Entry& e : after) {
      EXPECT_NEAR(e.lr, cosine_lr(e.global_step - 1, total), 1e-15)
          << "global_step " << e.global_step;
    }
    const Entry& first_entry = *std::find_if(
        after.begin(), after.end(), [&](const Entry& e) { return e.global_step == kStopStep + 1; });
    EXPECT_NEAR(first_entry.lr, cosine_lr(kStopStep, total), 1e-15);
    EXPECT_NE(first_entry.lr, cosine_lr(kStopStep, total2));
  }
}

}  // namespace
