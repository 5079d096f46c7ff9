// Fault tolerance with real processes: a coordinator and `lorafleet-launch --nproc 2` workers in
// Kubernetes-native mode (ranks from the environment, Gloo collectives). A worker killed with
// SIGKILL mid-run is restarted by the launcher from the last committed checkpoint, and SIGTERM
// to the group commits a checkpoint and exits 143 within the grace period; either way the final
// LoRA file equals an uninterrupted run's byte for byte (SOURCE_DATE_EPOCH fixes its timestamps).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <sstream>
#include <string>
#include <thread>

#include "tests/integration/process_util.h"

namespace fs = std::filesystem;

namespace {

const std::string kDemo = std::string(LF_SOURCE_DIR) + "/.deps/demo";
const std::string kVocab = std::string(LF_SOURCE_DIR) + "/.deps/bpe_simple_vocab_16e6.txt.gz";
using Clock = std::chrono::steady_clock;

using lf::test::free_port;
using lf::test::newest_checkpoint;
using lf::test::read_file;
using lf::test::run;
using lf::test::RunResult;

// pids of this test's workers (their command line names the coordinator port).
std::vector<pid_t> worker_pids(int coord_port) {
  // Anchored at the binary path: the launcher's and shells' command lines hold the same words.
  RunResult r = run("pgrep -f '^" + std::string(LF_WORKER_BIN) +
                    " --coordinator 127.0.0.1:" + std::to_string(coord_port) + " '");
  std::vector<pid_t> pids;
  std::istringstream in(r.output);
  for (pid_t p; in >> p;) pids.push_back(p);
  return pids;
}

class FaultTolerance : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kDemo + "/train/10_photo/astronaut.png") && fs::exists(kVocab))
        << "demo data missing: run scripts/prepare_demo_data.sh (scripts/test.sh does)";
    dir_ = fs::temp_directory_path() /
           ("lf_ft_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "train/2_photo");
    for (const char* stem : {"astronaut", "chelsea", "coffee"}) {
      for (const char* ext : {".png", ".txt"}) {
        fs::copy_file(kDemo + "/train/10_photo/" + stem + ext,
                      dir_ / "train/2_photo" / (std::string(stem) + ext));
      }
    }
    checkpoint_ = (dir_ / "base.safetensors").string();
    RunResult mk = run(std::string(LF_MAKE_CHECKPOINT_BIN) +
                       " --architecture tiny --seed 7 --output " + checkpoint_);
    ASSERT_EQ(mk.exit_code, 0) << mk.output;
    setenv("SOURCE_DATE_EPOCH", "1700000000", 1);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // 3 photos x 2 repeats, batch 1 per rank on 2 ranks: 3 steps per epoch; 4 epochs.
  std::string write_config(const std::string& name, const std::string& output_dir, int coord_port,
                           int save_every = 2) {
    const fs::path p = dir_ / name;
    std::ofstream f(p);
    f << "model:\n  pretrained_model_name_or_path: " << checkpoint_
      << "\n  architecture: tiny\n  tokenizer_vocab: " << kVocab << "\n"
      << "dataset:\n  train_data_dir: " << (dir_ / "train").string()
      << "\n  resolution: 128\n  min_bucket_reso: 64\n  max_bucket_reso: 256\n"
      << "  caption_extension: .txt\n"
      << "network:\n  network_dim: 4\n  network_alpha: 2.0\n"
      << "training:\n  seed: 5\n  train_batch_size: 1\n  learning_rate: 0.001\n"
      << "  lr_scheduler: cosine\n  max_train_epochs: 4\n  save_every_n_steps: " << save_every
      << "\n"
      << "output:\n  output_dir: " << output_dir << "\n  output_name: ft\n"
      << "coordinator:\n  listen_address: 127.0.0.1:" << coord_port << "\n  metrics_address: \"\"\n"
      << "worker:\n  metrics_port_base: 0\n"
      << "cluster:\n  world_size: 2\n  collective_timeout: 10\n  preempt_grace_seconds: 20\n"
      << "  max_restarts: 2\n  restart_backoff_seconds: 0.5\n";
    return p.string();
  }

  std::string launch_cmd(int coord_port) const {
    return std::string(LF_LAUNCH_BIN) + " --nproc 2 --restart-backoff 0.5 -- " + LF_WORKER_BIN +
           " --coordinator 127.0.0.1:" + std::to_string(coord_port) + " --no-progress-bar" +
           worker_flags_;
  }

  // Coordinator + launcher; `during` runs while they do. Returns the launcher's result.
  RunResult run_job(const std::string& config, int coord_port, const std::function<void()>& during,
                    std::string* coord_output) {
    auto coord = std::async(std::launch::async, [&] {
      return run(std::string(LF_COORDINATOR_BIN) + " --config " + config);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto launcher = std::async(std::launch::async, [&] { return run(launch_cmd(coord_port)); });
    if (during) during();
    RunResult w = launcher.get();
    RunResult c = coord.get();
    if (coord_output) *coord_output = c.output;
    w.output += "\n[coordinator exit " + std::to_string(c.exit_code) + "]\n" + c.output;
    return w;
  }

  fs::path dir_;
  std::string checkpoint_;
  std::string worker_flags_;  // appended to the worker command
};

TEST_F(FaultTolerance, KilledWorkerIsRestartedAndTheLoRAIsIdentical) {
  const int ref_port = free_port();
  const fs::path ref_out = dir_ / "ref";
  RunResult ref =
      run_job(write_config("ref.yaml", ref_out.string(), ref_port), ref_port, {}, nullptr);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;

  const int port = free_port();
  const fs::path out = dir_ / "killed";
  const std::string cfg = write_config("killed.yaml", out.string(), port);
  RunResult r = run_job(
      cfg, port,
      [&] {
        // Kill rank 1 with SIGKILL once the second checkpoint (step 4) exists: mid-epoch 2.
        const auto deadline = Clock::now() + std::chrono::seconds(240);
        while (newest_checkpoint((out / "checkpoints").string()) < "step-00000004" &&
               Clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        const auto pids = worker_pids(port);
        ASSERT_EQ(pids.size(), 2u);
        kill(pids.back(), SIGKILL);
      },
      nullptr);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("killed by signal 9"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resumed from "), std::string::npos) << r.output;
  EXPECT_EQ(read_file((out / "ft.safetensors").string()),
            read_file((ref_out / "ft.safetensors").string()))
      << "the restarted run's LoRA differs from the uninterrupted run's";
}

// A group that fails before its first checkpoint starts afresh in generation 2: nothing of the
// failed attempt may show in the LoRA, not even in its metadata (ss_session_id was drawn from
// the generation, so the file differed from an uninterrupted run's; found by the chaos run).
TEST_F(FaultTolerance, KilledBeforeTheFirstCheckpointStartsAfreshWithTheSameLoRA) {
  const int ref_port = free_port();
  const fs::path ref_out = dir_ / "ref";
  RunResult ref =
      run_job(write_config("ref.yaml", ref_out.string(), ref_port, 0), ref_port, {}, nullptr);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;

  const int port = free_port();
  const fs::path out = dir_ / "killed";
  const std::string samples = (dir_ / "samples").string();
  worker_flags_ = " --sample-log " + samples;
  std::string coord_log;
  RunResult r = run_job(
      write_config("killed.yaml", out.string(), port, 0), port,
      [&] {
        // Rank 1 is SIGKILLed once rank 0 trained a step: no checkpoint exists (none is saved
        // before the end).
        const auto deadline = Clock::now() + std::chrono::seconds(240);
        while (read_file(samples + ".rank0.jsonl").empty() && Clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        const auto pids = worker_pids(port);
        ASSERT_EQ(pids.size(), 2u);
        ASSERT_FALSE(fs::exists(out / "checkpoints") && !fs::is_empty(out / "checkpoints"));
        kill(pids.back(), SIGKILL);
      },
      &coord_log);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("killed by signal 9"), std::string::npos) << r.output;
  EXPECT_NE(coord_log.find("generation 2 formed"), std::string::npos) << coord_log;
  // Both generations started afresh.
  std::size_t fresh = 0;
  for (std::size_t at = coord_log.find("no checkpoint yet, starting fresh");
       at != std::string::npos; at = coord_log.find("no checkpoint yet, starting fresh", at + 1)) {
    ++fresh;
  }
  EXPECT_EQ(fresh, 2u) << coord_log;
  EXPECT_EQ(read_file((out / "ft.safetensors").string()),
            read_file((ref_out / "ft.safetensors").string()))
      << "the run restarted afresh differs from the uninterrupted run's LoRA";
}

TEST_F(FaultTolerance, SigtermCommitsACheckpointWithinTheGraceAndTheRunResumesIdentically) {
  const int ref_port = free_port();
  const fs::path ref_out = dir_ / "ref";
  ASSERT_EQ(run_job(write_config("ref.yaml", ref_out.string(), ref_port), ref_port, {}, nullptr)
                .exit_code,
            0);

  const int port = free_port();
  const fs::path out = dir_ / "preempted";
  const std::string cfg = write_config("preempted.yaml", out.string(), port);
  double seconds_to_commit = -1;
  std::string newest_before;
  std::string coord_log;
  RunResult r = run_job(
      cfg, port,
      [&] {
        const auto deadline = Clock::now() + std::chrono::seconds(240);
        while (newest_checkpoint((out / "checkpoints").string()) < "step-00000002" &&
               Clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        newest_before = newest_checkpoint((out / "checkpoints").string());
        const auto pids = worker_pids(port);
        ASSERT_EQ(pids.size(), 2u);
        const auto t0 = Clock::now();
        for (pid_t p : pids) kill(p, SIGTERM);  // as the kubelet does to every pod of the group
        // The ranks agree on a last step and commit it; the launcher then starts the group again
        // (a preemption restart, not counted against max_restarts), which finishes the run.
        while (newest_checkpoint((out / "checkpoints").string()) <= newest_before &&
               Clock::now() < t0 + std::chrono::seconds(60)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        seconds_to_commit = std::chrono::duration<double>(Clock::now() - t0).count();
      },
      &coord_log);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GE(seconds_to_commit, 0.0);
  EXPECT_LT(seconds_to_commit, 20.0) << "preempt_grace_seconds is 20";
  EXPECT_NE(r.output.find("preempted: checkpoint"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exited with code 143"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(preemption, not counted)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resumed from "), std::string::npos) << r.output;
  EXPECT_EQ(read_file((out / "ft.safetensors").string()),
            read_file((ref_out / "ft.safetensors").string()))
      << "the preempted and resumed run's LoRA differs from the uninterrupted run's";
}

}  // namespace
