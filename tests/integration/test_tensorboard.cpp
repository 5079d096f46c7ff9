// TensorBoard logs of real 2-rank jobs (coordinator + mpirun workers, tiny model, CPU), read
// back with the tensorboard package's event reader (read_tensorboard.py, issue 13):
//  - the run folder is <logging_dir>/<log_prefix><YYYYmmddHHMMSS>/network_train, written by
//    rank 0 only, with kohya's tags (loss/current, loss/average, lr/unet, lr/textencoder) and
//    lorafleet's (grad_norm, perf/*) at steps 1..4, and the job config as text "config";
//  - a run resumed from an older checkpoint (step 2 of 4) appends to the same folder and leaves
//    each step once, with the values of the straight run.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "common/checkpoint/checkpoint_layout.h"
#include "tests/integration/process_util.h"
#include "tests/integration/tiny_job.h"

namespace fs = std::filesystem;

namespace {

using lf::test::free_port;
using lf::test::RunResult;

class TensorBoardLogs : public lf::test::TinyJobTest {
 protected:
  std::string config(const std::string& name, const std::string& out, const std::string& logs) {
    cport_ = free_port();
    return with_output_keys(
        write_config(name + ".yaml", out, 4, 2, cport_, free_port(), 0),
        "  logging_dir: " + logs + "\n  log_prefix: tiny_\n  log_config: true\n");
  }
  RunResult run(const std::string& cfg, const std::string& flags) {
    return run_job(cfg, cport_, 2, flags);
  }
  // The single run folder's event folder under `logs`.
  fs::path event_dir(const fs::path& logs) {
    std::vector<fs::path> runs;
    for (const auto& e : fs::directory_iterator(logs)) runs.push_back(e.path());
    EXPECT_EQ(runs.size(), 1u);
    if (runs.empty()) return {};
    EXPECT_TRUE(std::regex_match(runs[0].filename().string(), std::regex("tiny_[0-9]{14}")))
        << runs[0];
    return runs[0] / "network_train";
  }
  nlohmann::json read_back(const fs::path& dir) {
    const RunResult r = lf::test::run(std::string(LF_VENV_PYTHON) + " " + LF_READ_TENSORBOARD +
                                      " " + dir.string() + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output);
  }
  int cport_ = 0;
};

std::vector<std::int64_t> steps_of(const nlohmann::json& series) {
  std::vector<std::int64_t> steps;
  for (const auto& point : series) steps.push_back(point[0].get<std::int64_t>());
  return steps;
}

TEST_F(TensorBoardLogs, KohyaTagsOnceAStepAcrossAResumeOfAnOlderCheckpoint) {
  const fs::path logs_a = dir_ / "logs_a";
  const std::string out_a = (dir_ / "straight").string();
  const std::string cfg_a = config("a", out_a, logs_a.string());
  RunResult a = run(cfg_a, "");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const nlohmann::json straight = read_back(event_dir(logs_a));
  const std::vector<std::int64_t> all_steps = {1, 2, 3, 4};
  for (const char* tag : {"loss/current", "loss/average", "lr/unet", "lr/textencoder", "grad_norm",
                          "perf/samples_per_second", "perf/step_seconds"}) {
    ASSERT_TRUE(straight["scalars"].contains(tag)) << tag << "\n" << straight.dump();
    EXPECT_EQ(steps_of(straight["scalars"][tag]), all_steps) << tag;
  }
  // Only rank 0 writes: one event file in the only run folder.
  int files = 0;
  for (const auto& e : fs::directory_iterator(event_dir(logs_a))) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  // The tiny job's lr: 1e-3, cosine with 2 warmup steps; the step that completes global_step g
  // trains at lr_lambda(g - 1) (transformers' get_cosine_schedule_with_warmup): 0, then 1/2.
  const auto& lr = straight["scalars"]["lr/unet"];
  EXPECT_DOUBLE_EQ(lr[0][1].get<double>(), 0.0);
  EXPECT_NEAR(lr[1][1].get<double>(), 1e-3 * 0.5, 1e-9);
  // loss/average of step 2 is the mean of the first two (kohya's LossRecorder, first epoch).
  const auto& loss = straight["scalars"]["loss/current"];
  EXPECT_NEAR(straight["scalars"]["loss/average"][1][1].get<double>(),
              (loss[0][1].get<double>() + loss[1][1].get<double>()) / 2, 1e-6);
  ASSERT_TRUE(straight["texts"].contains("config")) << straight.dump();
  EXPECT_NE(straight["texts"]["config"][0][1].get<std::string>().find("log_prefix: tiny_"),
            std::string::npos);

  // The same job, then resumed from its step-2 checkpoint: steps 3 and 4 run twice, the logs
  // hold them once, with the straight run's values (the training is byte-exact).
  const fs::path logs_b = dir_ / "logs_b";
  const std::string out_b = (dir_ / "resumed").string();
  const std::string cfg_b = config("b", out_b, logs_b.string());
  RunResult b1 = run(cfg_b, "");
  ASSERT_EQ(b1.exit_code, 0) << b1.output;
  const fs::path ckpts_b = fs::path(out_b) / "checkpoints";
  std::vector<std::string> newer;  // the branch the resume abandons
  for (const auto& e : fs::directory_iterator(ckpts_b)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) == 0 && name > "step-00000002") newer.push_back(name);
  }
  std::sort(newer.begin(), newer.end());
  ASSERT_FALSE(newer.empty());
  std::string coordinator_b2;
  RunResult b2 = run_job(with_rendezvous_timeout(cfg_b, 60), cport_, 2,
                         "--resume " + out_b + "/checkpoints/step-00000002", &coordinator_b2);
  ASSERT_EQ(b2.exit_code, 0) << b2.output;
  // Those checkpoints were moved aside whole, never deleted, and the resumed run wrote its own
  // (byte-identical: the training is exact) in their place.
  EXPECT_NE(coordinator_b2.find("moved to " + ckpts_b.string() + "/abandoned-"), std::string::npos)
      << coordinator_b2;
  std::vector<fs::path> folders;
  for (const auto& e : fs::directory_iterator(ckpts_b)) {
    if (e.path().filename().string().rfind("abandoned-", 0) == 0) folders.push_back(e.path());
  }
  ASSERT_EQ(folders.size(), 1u);
  std::vector<std::string> aside;
  for (const auto& e : fs::directory_iterator(folders[0])) aside.push_back(e.path().filename());
  std::sort(aside.begin(), aside.end());
  EXPECT_EQ(aside, newer);
  for (const std::string& name : newer) {
    EXPECT_FALSE(lf::checkpoint_torn_reason((folders[0] / name).string()).has_value()) << name;
    lf::test::expect_same_lora((folders[0] / name / "lora.safetensors").string(),
                               (ckpts_b / name / "lora.safetensors").string());
  }
  EXPECT_NE(b2.output.find("TensorBoard: dropped"), std::string::npos) << b2.output;
  const nlohmann::json resumed = read_back(event_dir(logs_b));
  for (const char* tag : {"loss/current", "lr/unet", "lr/textencoder", "grad_norm"}) {
    ASSERT_TRUE(resumed["scalars"].contains(tag)) << tag;
    EXPECT_EQ(steps_of(resumed["scalars"][tag]), all_steps) << tag;
    for (std::size_t i = 0; i < all_steps.size(); ++i) {
      EXPECT_EQ(resumed["scalars"][tag][i][1].get<double>(),
                straight["scalars"][tag][i][1].get<double>())
          << tag << " step " << i + 1;
    }
  }
  EXPECT_EQ(resumed["texts"]["config"].size(), 1u);
}

}  // namespace
