// Stop, cancel and sample-now from outside in a real 2-rank job (coordinator + mpirun workers,
// tiny model, CPU; issue 13), through the lorafleet-ctl binary:
// - sample-now makes the prompt's image after the next step; stop ends the job with exit 0, a
//   committed checkpoint and its LoRA, and `--resume auto` ends byte-identical to a straight run;
// - cancel ends the job at once with exit 4 and the last committed checkpoint stays;
// - Ctrl-C (SIGINT) on the coordinator stops the job as `lorafleet-ctl stop` does.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <regex>
#include <string>
#include <thread>

#include "tests/integration/process_util.h"
#include "tests/integration/tiny_job.h"

namespace fs = std::filesystem;

namespace {

using lf::test::free_port;
using lf::test::RunResult;
using Clock = std::chrono::steady_clock;

class OperatorControlJob : public lf::test::TinyJobTest {
 protected:
  std::string config(const std::string& name, const std::string& out, int steps, int save_every,
                     const std::string& output_keys = "") {
    cport_ = free_port();
    return with_output_keys(
        write_config(name + ".yaml", out, steps, save_every, cport_, free_port(), 0), output_keys);
  }
  RunResult ctl(const std::string& args) const {
    return lf::test::run(std::string(LF_CTL_BIN) + " --coordinator 127.0.0.1:" +
                         std::to_string(cport_) + " " + args + " 2>&1");
  }
  // Polls `lorafleet-ctl status --json` until `done(status)` or `timeout`; returns the last status
  // (null when the coordinator never answered).
  nlohmann::json wait_status(const std::function<bool(const nlohmann::json&)>& done,
                             std::chrono::seconds timeout = std::chrono::seconds(180)) const {
    nlohmann::json last;
    const auto until = Clock::now() + timeout;
    while (Clock::now() < until) {
      const RunResult r = ctl("status --json");
      if (r.exit_code == 0) {
        last = nlohmann::json::parse(r.output);
        if (done(last)) return last;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return last;
  }
  static std::int64_t step_of(const nlohmann::json& s, const char* key) {
    return std::stoll(s[key].get<std::string>());  // int64 is a string in protobuf's JSON
  }
  int cport_ = 0;
};

TEST_F(OperatorControlJob, SampleNowThenStopExits0AndTheResumeEndsAsAStraightRun) {
  const fs::path prompts = dir_ / "prompts.txt";
  std::ofstream(prompts) << "a photo of a dog --w 64 --h 64 --s 2 --d 3\n";
  const std::string out = (dir_ / "stopped").string();
  const int steps = 40;
  // No sampling cadence: images only on request.
  const std::string cfg =
      config("stopped", out, steps, 0, "  sample_prompts: " + prompts.string() + "\n");
  auto job = std::async(std::launch::async, [&] { return run_job(cfg, cport_, 2, ""); });

  const nlohmann::json running =
      wait_status([](const nlohmann::json& s) { return step_of(s, "global_step") >= 2; });
  ASSERT_FALSE(running.is_null()) << "the coordinator never answered";
  ASSERT_GE(step_of(running, "global_step"), 2) << running.dump();
  const RunResult sample = ctl("sample-now");
  ASSERT_EQ(sample.exit_code, 0) << sample.output;
  // The image of the step after the request appears.
  const fs::path sample_dir = fs::path(out) / "sample";
  const auto until = Clock::now() + std::chrono::seconds(120);
  while (Clock::now() < until && (!fs::exists(sample_dir) || fs::is_empty(sample_dir))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(fs::exists(sample_dir) && !fs::is_empty(sample_dir));
  const RunResult stop = ctl("stop");
  ASSERT_EQ(stop.exit_code, 0) << stop.output;

  RunResult a = job.get();
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const std::regex stopped(R"(stopped at global_step (\d+) on an operator's request)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(a.output, m, stopped)) << a.output;
  const int stop_step = std::stoi(m[1]);
  EXPECT_LT(stop_step, steps);
  // One sampling, at one step, every rank agreed (one prompt: one image).
  int images = 0;
  for (const auto& e : fs::directory_iterator(sample_dir)) {
    const std::regex name(R"(e2e_(\d{6})_00_\d{14}_3\.png)");
    std::smatch n;
    const std::string fname = e.path().filename().string();
    ASSERT_TRUE(std::regex_match(fname, n, name)) << fname;
    EXPECT_LE(std::stoi(n[1]), stop_step);
    ++images;
  }
  EXPECT_EQ(images, 1);
  // The committed checkpoint and its LoRA; no final LoRA yet.
  char step_dir[32];
  std::snprintf(step_dir, sizeof(step_dir), "step-%08d", stop_step);
  EXPECT_EQ(lf::test::newest_checkpoint(out + "/checkpoints"), step_dir);
  char lora[48];
  std::snprintf(lora, sizeof(lora), "e2e-step%08d.safetensors", stop_step);
  EXPECT_TRUE(fs::exists(fs::path(out) / lora)) << lora;
  EXPECT_FALSE(fs::exists(fs::path(out) / "e2e.safetensors"));

  // --resume continues from there and ends as a run that was never stopped.
  RunResult resumed = run_job(cfg, cport_, 2, "--resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const std::string straight = (dir_ / "straight").string();
  const std::string straight_cfg = config("straight", straight, steps, 0);
  RunResult b = run_job(straight_cfg, cport_, 2, "");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  lf::test::expect_same_lora(out + "/e2e.safetensors", straight + "/e2e.safetensors");
}

TEST_F(OperatorControlJob, CancelExits4AtOnceAndTheLastCommittedCheckpointStands) {
  const std::string out = (dir_ / "cancelled").string();
  const int steps = 400;
  const std::string cfg = config("cancelled", out, steps, 3);
  std::string coord_log;
  auto job =
      std::async(std::launch::async, [&] { return run_job(cfg, cport_, 2, "", &coord_log); });
  const nlohmann::json s =
      wait_status([](const nlohmann::json& j) { return step_of(j, "last_committed_step") >= 3; });
  ASSERT_FALSE(s.is_null());
  ASSERT_GE(step_of(s, "last_committed_step"), 3) << s.dump();
  const auto t0 = Clock::now();
  const RunResult cancel = ctl("cancel");
  ASSERT_EQ(cancel.exit_code, 0) << cancel.output;
  RunResult a = job.get();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LT(seconds, 15.0) << "a cancel does not wait for the job";
  EXPECT_EQ(a.exit_code, 4) << a.output;  // mpirun passes the ranks' exit code on
  EXPECT_NE(coord_log.find("coordinator exiting with code 4"), std::string::npos) << coord_log;
  const std::regex stands(R"(the checkpoint of global_step (\d+) stays the resume point)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(coord_log, m, stands)) << coord_log;
  const int committed = std::stoi(m[1]);
  EXPECT_GE(committed, step_of(s, "last_committed_step"));
  EXPECT_LT(committed, steps);
  char step_dir[32];
  std::snprintf(step_dir, sizeof(step_dir), "step-%08d", committed);
  EXPECT_TRUE(fs::exists(fs::path(out) / "checkpoints" / step_dir / "train_state.safetensors"))
      << step_dir;
  EXPECT_FALSE(fs::exists(fs::path(out) / "e2e.safetensors"));
}

TEST_F(OperatorControlJob, CtrlCOnTheCoordinatorStopsTheJobWithExit0) {
  const std::string out = (dir_ / "interrupted").string();
  const int steps = 400;
  const std::string cfg = config("interrupted", out, steps, 0);
  std::string coord_log;
  auto job =
      std::async(std::launch::async, [&] { return run_job(cfg, cport_, 2, "", &coord_log); });
  const nlohmann::json s =
      wait_status([](const nlohmann::json& j) { return step_of(j, "global_step") >= 2; });
  ASSERT_GE(step_of(s, "global_step"), 2) << s.dump();
  // As a terminal's Ctrl-C does to the coordinator (the workers under mpirun learn it from
  // their heartbeat).
  // Anchored: only the coordinator itself, not the shells that run it or pkill.
  const RunResult k = lf::test::run("pkill -INT -f '^" + std::string(LF_COORDINATOR_BIN) +
                                    " --config " + cfg + "'");
  ASSERT_EQ(k.exit_code, 0) << k.output;
  RunResult a = job.get();
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(coord_log.find("Ctrl-C"), std::string::npos) << coord_log;
  EXPECT_NE(coord_log.find("job done: stopped at global_step"), std::string::npos) << coord_log;
  const std::string newest = lf::test::newest_checkpoint(out + "/checkpoints");
  ASSERT_FALSE(newest.empty());
  EXPECT_LT(std::stoi(newest.substr(5)), steps);
}

}  // namespace
