// The validation loss in real jobs (coordinator + mpirun workers, tiny model, CPU; issue 13):
// dataset validation_split holds one of the 3 training photos out; the coordinator names it and
// no rank ever trains on it (the workers' --sample-log audit trail); validate_every_n_steps 2
// gives the loss at steps 2, 4, 6 in TensorBoard (loss/validation/step_average and
// step_divergence), /metrics and the coordinator's status; a second run repeats the values
// exactly, and a resumed run (--stop-at-step 4, then --resume auto) gives the straight run's
// value at step 6 exactly. A validation_split of 1 is refused naming the key.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "tests/integration/process_util.h"
#include "tests/integration/tiny_job.h"

namespace fs = std::filesystem;

namespace {

using lf::test::free_port;
using lf::test::RunResult;

class ValidationJob : public lf::test::TinyJobTest {
 protected:
  // A 6-step job holding a third of the train photos out, validating every 2 steps.
  std::string config(const std::string& name, const std::string& out) {
    cport_ = free_port();
    return with_output_keys(
        write_config(name + ".yaml", out, 6, 2, cport_, free_port(), 0, "",
                     "  validation_split: 0.34\n  validation_seed: 11\n",
                     "  validate_every_n_steps: 2\n  validate_every_n_epochs: 100\n"),
        "  logging_dir: " + (fs::path(out) / "logs").string() + "\n");
  }
  // TensorBoard's scalars of the run under <out>/logs.
  nlohmann::json scalars(const std::string& out) {
    std::vector<fs::path> runs;
    for (const auto& e : fs::directory_iterator(fs::path(out) / "logs")) runs.push_back(e.path());
    EXPECT_EQ(runs.size(), 1u);
    const RunResult tb = lf::test::run(std::string(LF_VENV_PYTHON) + " " + LF_READ_TENSORBOARD +
                                       " " + (runs.at(0) / "network_train").string() + " 2>&1");
    EXPECT_EQ(tb.exit_code, 0) << tb.output;
    return nlohmann::json::parse(tb.output)["scalars"];
  }
  int cport_ = 0;
};

// step -> validation loss from the "loss/validation/step_average" series.
std::map<int, double> validation_series(const nlohmann::json& scalars) {
  std::map<int, double> out;
  for (const auto& e : scalars["loss/validation/step_average"]) out[e[0]] = e[1];
  return out;
}

TEST_F(ValidationJob, HoldsOutOneImageAndTheLossIsReproducibleAcrossRunsAndResume) {
  const std::string out = (dir_ / "a").string();
  const std::string cfg = config("a", out);
  std::string coord_log;
  const std::string audit = (dir_ / "audit").string();
  RunResult a = run_job(cfg, cport_, 2, "--sample-log " + audit, &coord_log);
  ASSERT_EQ(a.exit_code, 0) << a.output;

  // The coordinator names the held-out photo; no rank trained on it.
  const std::regex held(R"(held out for validation \(validation_split\): 1 images: (\S+\.png))");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(coord_log, m, held)) << coord_log;
  const std::string held_name = m[1];
  EXPECT_NE(coord_log.find("2 images x 2 repeats, class tokens \"photo\", 1 held out"),
            std::string::npos)
      << coord_log;
  const std::vector<std::string> train = {"astronaut.png", "chelsea.png", "coffee.png"};
  int held_index = -1;  // the image's index in the scan: train photos in name order come first
  for (std::size_t i = 0; i < train.size(); ++i) {
    if (train[i] == held_name) held_index = static_cast<int>(i);
  }
  ASSERT_GE(held_index, 0) << held_name;
  std::set<int> trained;
  for (int r = 0; r < 2; ++r) {
    std::ifstream in(audit + ".rank" + std::to_string(r) + ".jsonl");
    std::string line;
    int lines = 0;
    while (std::getline(in, line)) {
      trained.insert(nlohmann::json::parse(line)["image_index"].get<int>());
      ++lines;
    }
    EXPECT_GT(lines, 0) << "rank " << r;
  }
  EXPECT_EQ(trained.count(held_index), 0u) << "the held-out image was trained on";
  EXPECT_EQ(trained.size(), 4u);  // the 2 other train photos and the 2 reg photos

  // The loss at steps 2, 4, 6, its divergence, the worker's and the coordinator's metrics.
  const nlohmann::json s = scalars(out);
  const std::map<int, double> first = validation_series(s);
  ASSERT_EQ(first.size(), 3u) << s.dump();
  EXPECT_EQ(first.begin()->first, 2);
  EXPECT_EQ(first.rbegin()->first, 6);
  for (const auto& [step, loss] : first) EXPECT_TRUE(std::isfinite(loss) && loss > 0) << step;
  EXPECT_EQ(s["loss/validation/step_divergence"].size(), 3u);
  EXPECT_FALSE(s.contains("loss/validation/epoch_average"));  // validate_every_n_epochs 100
  const std::string coord_prom = lf::test::read_file(out + "/metrics/coordinator.prom");
  EXPECT_NE(coord_prom.find("lorafleet_validation_loss "), std::string::npos);
  const std::string worker_prom = lf::test::read_file(out + "/metrics/worker_rank1.prom");
  EXPECT_NE(worker_prom.find("lorafleet_worker_validation_loss"), std::string::npos);

  // A second run repeats every value exactly.
  const std::string out_b = (dir_ / "b").string();
  const std::string cfg_b = config("b", out_b);  // sets cport_: before run_job reads it
  RunResult b = run_job(cfg_b, cport_, 2, "");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(validation_series(scalars(out_b)), first);

  // Stopped at step 4 and resumed: the same value at step 6.
  const std::string out_c = (dir_ / "c").string();
  const std::string cfg_c = config("c", out_c);
  RunResult c1 = run_job(cfg_c, cport_, 2, "--stop-at-step 4");
  ASSERT_EQ(c1.exit_code, 0) << c1.output;
  RunResult c2 = run_job(cfg_c, cport_, 2, "--resume auto");
  ASSERT_EQ(c2.exit_code, 0) << c2.output;
  const std::map<int, double> resumed = validation_series(scalars(out_c));
  ASSERT_EQ(resumed.count(6), 1u);
  EXPECT_EQ(resumed.at(6), first.at(6));
}

TEST_F(ValidationJob, ASplitOutsideZeroToOneNamesTheKey) {
  const std::string out = (dir_ / "bad").string();
  cport_ = free_port();
  const std::string cfg =
      write_config("bad.yaml", out, 4, 0, cport_, free_port(), 0, "", "  validation_split: 1.0\n");
  const RunResult r =
      lf::test::run(std::string(LF_COORDINATOR_BIN) + " --config " + cfg + " --inspect 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("validation_split"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[0, 1)"), std::string::npos) << r.output;
}

}  // namespace
