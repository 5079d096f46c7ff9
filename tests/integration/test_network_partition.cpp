// Two hosts simulated with network namespaces joined by a veth pair, Kubernetes-native mode
// (ranks from LF_RANK, Gloo rendezvoused through the coordinator): the coordinator and rank 0 in
// one namespace, rank 1 in the other. Dropping the link mid-run must make both ranks give up
// within cluster.collective_timeout (plus the watchdog's slack) and exit 75, none hanging;
// restoring it and starting both ranks again (as a Job controller would) completes the run from
// the last committed checkpoint. Needs root (CAP_NET_ADMIN); skipped otherwise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/process_util.h"

namespace fs = std::filesystem;
using lf::test::newest_checkpoint;
using lf::test::run;
using lf::test::RunResult;

namespace {

const std::string kDemo = std::string(LF_SOURCE_DIR) + "/.deps/demo";
const std::string kVocab = std::string(LF_SOURCE_DIR) + "/.deps/bpe_simple_vocab_16e6.txt.gz";
using Clock = std::chrono::steady_clock;

// Kills every process left in the namespaces when it goes out of scope.
struct KillNamespaces {
  std::vector<std::string> namespaces;
  ~KillNamespaces() {
    for (const std::string& ns : namespaces) run("ip netns pids " + ns + " | xargs -r kill -9");
  }
};

class NetworkPartition : public ::testing::Test {
 protected:
  void SetUp() override {
    tag_ = std::to_string(getpid() % 100000);
    ns_a_ = "lfA" + tag_;
    ns_b_ = "lfB" + tag_;
    if (geteuid() != 0) GTEST_SKIP() << "needs root for ip netns";
    const RunResult setup =
        run("set -e; ip netns add " + ns_a_ + "; ip netns add " + ns_b_ + "; ip link add va" +
            tag_ + " type veth peer name vb" + tag_ + "; ip link set va" + tag_ + " netns " +
            ns_a_ + "; ip link set vb" + tag_ + " netns " + ns_b_ + "; ip -n " + ns_a_ +
            " addr add 10.77.0.1/24 dev va" + tag_ + "; ip -n " + ns_b_ +
            " addr add 10.77.0.2/24 dev vb" + tag_ + "; for n in " + ns_a_ + " " + ns_b_ +
            "; do ip -n $n link set lo up; done; ip -n " + ns_a_ + " link set va" + tag_ +
            " up; ip -n " + ns_b_ + " link set vb" + tag_ + " up");
    if (setup.exit_code != 0) {
      TearDownNamespaces();
      GTEST_SKIP() << "cannot create network namespaces here: " << setup.output;
    }
    dir_ = fs::temp_directory_path() / ("lf_netns_" + tag_);
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "train/2_photo");
    for (const char* stem : {"astronaut", "chelsea", "coffee"}) {
      for (const char* ext : {".png", ".txt"}) {
        fs::copy_file(kDemo + "/train/10_photo/" + stem + ext,
                      dir_ / "train/2_photo" / (std::string(stem) + ext));
      }
    }
    const RunResult mk =
        run(std::string(LF_MAKE_CHECKPOINT_BIN) + " --architecture tiny --seed 7 --output " +
            (dir_ / "base.safetensors").string());
    ASSERT_EQ(mk.exit_code, 0) << mk.output;
    std::ofstream(dir_ / "token") << "netns-test-token-0123456789abcdef\n";
  }
  void TearDown() override {
    TearDownNamespaces();
    if (!HasFailure() && !dir_.empty()) fs::remove_all(dir_);
  }
  void TearDownNamespaces() { run("ip netns del " + ns_a_ + "; ip netns del " + ns_b_); }

  std::string write_config() {
    const fs::path p = dir_ / "job.yaml";
    std::ofstream f(p);
    f << "model:\n  pretrained_model_name_or_path: " << (dir_ / "base.safetensors").string()
      << "\n  architecture: tiny\n  tokenizer_vocab: " << kVocab << "\n"
      << "dataset:\n  train_data_dir: " << (dir_ / "train").string()
      << "\n  resolution: 128\n  min_bucket_reso: 64\n  max_bucket_reso: 256\n"
      << "  caption_extension: .txt\n"
      << "network:\n  network_dim: 4\n"
      << "training:\n  seed: 5\n  train_batch_size: 1\n  learning_rate: 0.001\n"
      << "  max_train_epochs: 8\n  save_every_n_steps: 2\n"
      << "output:\n  output_dir: " << (dir_ / "out").string() << "\n  output_name: netns\n"
      << "coordinator:\n  listen_address: 10.77.0.1:" << port_
      << "\n  metrics_address: \"\"\n  job_token_file: " << (dir_ / "token").string()
      << "\n  worker_timeout_seconds: 10\n"
      << "worker:\n  metrics_port_base: 0\n"
      << "cluster:\n  world_size: 2\n  collective_timeout: 5\n  rendezvous_timeout_seconds: 120\n";
    return p.string();
  }

  // One rank in its namespace; returns its exit code and output when it ends.
  std::future<RunResult> start_rank(int rank) {
    const std::string ns = rank == 0 ? ns_a_ : ns_b_;
    const std::string cmd = "ip netns exec " + ns + " env LF_RANK=" + std::to_string(rank) + " " +
                            LF_WORKER_BIN + " --launcher env --resume auto" +
                            " --coordinator 10.77.0.1:" + std::to_string(port_) +
                            " --job-token-file " + (dir_ / "token").string() + " --no-progress-bar";
    return std::async(std::launch::async, [cmd] { return run(cmd); });
  }

  std::string tag_, ns_a_, ns_b_;
  fs::path dir_;
  int port_ = 50700;
};

TEST_F(NetworkPartition, BothSidesDetectADroppedLinkAndTheRunCompletesAfterItIsRestored) {
  const std::string cfg = write_config();
  auto coord = std::async(std::launch::async, [&] {
    return run("ip netns exec " + ns_a_ + " " + LF_COORDINATOR_BIN + " --config " + cfg);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto r0 = start_rank(0);
  auto r1 = start_rank(1);
  // Declared after the futures, so destroyed before them: on a failed assertion the processes
  // are killed instead of the futures' destructors waiting out the test's timeout.
  const KillNamespaces kill_on_exit{{ns_a_, ns_b_}};
  const std::string ckpts = (dir_ / "out/checkpoints").string();
  const auto deadline = Clock::now() + std::chrono::seconds(240);
  while (newest_checkpoint(ckpts) < "step-00000004" && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(newest_checkpoint(ckpts), "step-00000004");
  const auto t0 = Clock::now();
  ASSERT_EQ(run("ip -n " + ns_a_ + " link set va" + tag_ + " down").exit_code, 0);
  // Both ranks must end on their own, well before this test's own limit.
  ASSERT_EQ(r0.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "rank 0 hangs";
  const double t_rank0 = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(r1.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "rank 1 hangs";
  const double t_rank1 = std::chrono::duration<double>(Clock::now() - t0).count();
  const RunResult a = r0.get();
  const RunResult b = r1.get();
  EXPECT_EQ(a.exit_code, 75) << a.output;
  EXPECT_EQ(b.exit_code, 75) << b.output;
  // collective_timeout 5 s + the watchdog's 5 s slack + a step and a brief Finish attempt.
  EXPECT_LT(t_rank0, 15.0) << a.output;
  EXPECT_LT(t_rank1, 15.0) << b.output;
  const std::string stopped_at = newest_checkpoint(ckpts);

  // Restore the link and start both ranks again: a new generation continues the run.
  ASSERT_EQ(run("ip -n " + ns_a_ + " link set va" + tag_ + " up").exit_code, 0);
  auto s0 = start_rank(0);
  auto s1 = start_rank(1);
  const RunResult c = s0.get();
  const RunResult d = s1.get();
  const RunResult co = coord.get();
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_EQ(d.exit_code, 0) << d.output;
  EXPECT_EQ(co.exit_code, 0) << co.output;
  EXPECT_NE(c.output.find("resumed from " + ckpts + "/" + stopped_at), std::string::npos)
      << c.output;
  EXPECT_TRUE(fs::exists(dir_ / "out/netns.safetensors"));
  EXPECT_NE(co.output.find("restart"), std::string::npos) << co.output;
  std::printf("link drop detected: rank 0 after %.1f s, rank 1 after %.1f s\n", t_rank0, t_rank1);
}

}  // namespace
