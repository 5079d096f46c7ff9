// Coordinator durability end to end: a real coordinator and `mpirun -np 2` real workers train
// the tiny model; the coordinator is killed with SIGKILL after the first checkpoint committed,
// while the workers train on, and restarted on the same port with the same config. It restores
// the job from <output_dir>/coordinator/state.sqlite, the workers reconnect, and the job ends
// with exit code 0 on both sides and the same LoRA tensors, byte for byte, as an uninterrupted
// run of the same config.
#include <gtest/gtest.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "tests/integration/child_process.h"
#include "tests/integration/process_util.h"
#include "tests/integration/tiny_job.h"
#include "worker/io/tensor_file.h"

namespace fs = std::filesystem;

namespace {

const std::string kDemo = std::string(LF_SOURCE_DIR) + "/.deps/demo";
const std::string kVocab = std::string(LF_SOURCE_DIR) + "/.deps/bpe_simple_vocab_16e6.txt.gz";

using lf::test::free_port;
using lf::test::mpirun;
using lf::test::read_file;
using lf::test::run;
using lf::test::RunResult;

// A coordinator process with its output in a file, so the test can watch it and kill it.
std::unique_ptr<lf::test::ChildProcess> start_coordinator(const std::string& config,
                                                          const fs::path& log) {
  return std::make_unique<lf::test::ChildProcess>(
      std::vector<std::string>{LF_COORDINATOR_BIN, "--config", config}, log.string());
}
constexpr std::chrono::seconds kWait30(30), kWait60(60), kWait120(120);

class CoordinatorRestart : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kVocab)) << kVocab << " missing: run scripts/install_deps.sh";
    dir_ = fs::temp_directory_path() / ("lf_coord_restart_" + std::to_string(getpid()));
    try {
      checkpoint_ = lf::test::lay_out_tiny_job(dir_.string(), kDemo, LF_MAKE_CHECKPOINT_BIN);
    } catch (const std::exception& e) {
      FAIL() << e.what();
    }
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  std::string write_config(const std::string& name, const std::string& output_dir, int port) {
    const fs::path p = dir_ / name;
    std::ofstream f(p);
    f << "model:\n  pretrained_model_name_or_path: " << checkpoint_
      << "\n  architecture: tiny\n  tokenizer_vocab: " << kVocab << "\n"
      << "dataset:\n  train_data_dir: " << (dir_ / "train").string()
      << "\n  reg_data_dir: " << (dir_ / "reg").string()
      << "\n  resolution: 128\n  min_bucket_reso: 64\n  max_bucket_reso: 256\n"
      << "  caption_extension: .txt\n"
      << "network:\n  network_dim: 4\n  network_alpha: 2.0\n"
      << "training:\n  seed: 5\n  train_batch_size: 1\n  learning_rate: 0.001\n"
      << "  lr_scheduler: cosine\n  lr_warmup_steps: 2\n  max_train_steps: " << kSteps
      << "\n  save_every_n_steps: " << kSaveEvery << "\n"
      << "output:\n  output_dir: " << output_dir << "\n  output_name: restart\n"
      << "coordinator:\n  listen_address: 127.0.0.1:" << port << "\n  metrics_address: \"\"\n"
      << "worker:\n  metrics_port_base: 0\n  device: cpu\n";
    return p.string();
  }

  std::future<RunResult> start_workers(int port) {
    const std::string cmd = mpirun(2) + " " + LF_WORKER_BIN +
                            " --coordinator 127.0.0.1:" + std::to_string(port) +
                            " --no-progress-bar";
    return std::async(std::launch::async, [cmd] { return run(cmd); });
  }

  static constexpr int kSteps = 40;
  static constexpr int kSaveEvery = 4;
  fs::path dir_;
  std::string checkpoint_;
};

using lf::test::lora_tensors;

TEST_F(CoordinatorRestart, KilledCoordinatorRestoresAndTheJobEndsAsIfUninterrupted) {
  // The uninterrupted run.
  const int straight_port = free_port();
  const std::string straight = (dir_ / "straight").string();
  {
    auto coord = start_coordinator(write_config("straight.yaml", straight, straight_port),
                                   dir_ / "straight_coordinator.log");
    auto workers = start_workers(straight_port);
    const RunResult w = workers.get();
    ASSERT_EQ(w.exit_code, 0) << w.output;
    ASSERT_EQ(coord->wait(kWait30), 0) << coord->log();
  }

  // The interrupted run.
  const int port = free_port();
  const std::string out = (dir_ / "killed").string();
  const std::string cfg = write_config("killed.yaml", out, port);
  auto first = start_coordinator(cfg, dir_ / "coordinator_1.log");
  auto workers = start_workers(port);
  ASSERT_TRUE(
      first->wait_for_log("checkpoint step " + std::to_string(kSaveEvery) + " committed", kWait120))
      << first->log();
  first->kill_group();
  const std::string first_log = first->log();
  ASSERT_EQ(first_log.find("job done"), std::string::npos) << "killed too late:\n" << first_log;
  ASSERT_TRUE(fs::exists(out + "/coordinator/state.sqlite"));
  // The workers train on meanwhile (no step waits on the coordinator).
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));

  auto second = start_coordinator(cfg, dir_ / "coordinator_2.log");
  ASSERT_TRUE(second->wait_for_log("restored job state from " + out +
                                       "/coordinator/state.sqlite: generation 1, world_size 2, "
                                       "last committed step ",
                                   kWait60))
      << second->log();
  const RunResult w = workers.get();
  EXPECT_EQ(w.exit_code, 0) << w.output;
  EXPECT_EQ(second->wait(kWait60), 0) << second->log();
  const std::string log = second->log();
  EXPECT_NE(log.find("job done"), std::string::npos) << log;
  // The restore line names a committed step of the first coordinator.
  EXPECT_EQ(log.find("last committed step -1"), std::string::npos) << log;
  // The workers noticed the outage and came back.
  EXPECT_NE(w.output.find("reconnected"), std::string::npos) << w.output;

  const auto a = lora_tensors(straight + "/restart.safetensors");
  const auto b = lora_tensors(out + "/restart.safetensors");
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GT(a.size(), 0u);
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    const at::Tensor& u = b.at(name);
    EXPECT_TRUE(t.sizes() == u.sizes() && t.scalar_type() == u.scalar_type() &&
                std::memcmp(t.data_ptr(), u.data_ptr(), t.nbytes()) == 0)
        << "tensor differs: " << name;
  }
}

}  // namespace
