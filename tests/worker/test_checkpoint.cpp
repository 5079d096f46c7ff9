// Checkpoint directories: train state round trip (and its header read without torch),
// newest-committed resolution that skips torn dirs, atomic publish over an existing step,
// pruning, and a disk-full write on a small tmpfs that leaves the previous checkpoint intact.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/checkpoint/train_position.h"
#include "tests/support/full_position.h"
#include "worker/io/checkpoint.h"
#include "worker/io/tensor_file.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

class CheckpointDirs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("lf_ckpt_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // A complete checkpoint at `step` whose LoRA holds one tensor filled with `value`.
  std::string make(std::int64_t step, float value) {
    const std::string staging = prepare_staging_dir(root_.string(), step);
    save_safetensors(staging + "/lora.safetensors", {{"w", torch::full({2}, value)}}, {});
    TrainState s;
    s.global_step = step;
    save_train_state(staging, s);
    return publish_staging_dir(staging, root_.string(), step);
  }
  fs::path root_;
};

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// One checkpoint as CheckpointWriter writes it on a single rank: staging dir, RNG file, LoRA,
// train state with `n` LoRA values and AdamW moments of 2n, publish + COMMITTED; on a failed
// write the staging dir is discarded and the error rethrown.
std::string write_checkpoint(const std::string& root, std::int64_t step, std::int64_t n) {
  const std::string staging = prepare_staging_dir(root, step);
  try {
    save_rng_state(staging, 0, torch::arange(64, torch::kUInt8));
    save_safetensors(staging + "/lora.safetensors", {{"w", torch::full({n}, 1.5f)}}, {});
    TrainState s;
    s.global_step = step;
    s.optimizer = {{"w.exp_avg", torch::full({n}, 0.25f)}, {"w.exp_avg_sq", torch::ones({n})}};
    save_train_state(staging, s);
  } catch (...) {
    discard_staging_dir(staging);
    throw;
  }
  return publish_staging_dir(staging, root, step);
}

// Every field of the position set (none at its default), so a field that did not round-trip
// would show in the whole-position comparison.
TrainState full_state() {
  TrainState s;
  static_cast<TrainPosition&>(s) = test_support::full_position();
  s.optimizer = {{"a.exp_avg", torch::arange(6, torch::kFloat)}, {"step", torch::tensor(12.0)}};
  return s;
}

// The whole state comes back: the position compared as one (TrainPosition's operator==, every
// field), the optimizer tensors by name and value.
TEST_F(CheckpointDirs, TrainStateRoundTrip) {
  const TrainState s = full_state();
  save_train_state(root_.string(), s);
  const TrainState t = load_train_state(root_.string());
  EXPECT_EQ(train_position_metadata(t), train_position_metadata(s));
  ASSERT_EQ(t.optimizer.size(), s.optimizer.size());
  for (const auto& [name, tensor] : s.optimizer) {
    ASSERT_EQ(t.optimizer.count(name), 1u) << name;
    EXPECT_TRUE(torch::equal(t.optimizer.at(name), tensor)) << name;
  }
  // The coordinator reads the same position from the header alone.
  const TrainPosition header = read_train_position(root_.string());
  EXPECT_TRUE(header == static_cast<const TrainPosition&>(s));
}

TEST_F(CheckpointDirs, CheckpointWithoutMarkerIsTorn) {
  // Written as before commit markers existed: complete files, no COMMITTED.
  const std::string old = make(40, 1.0f);
  fs::remove(fs::path(old) / "COMMITTED");
  EXPECT_THROW(resolve_checkpoint(root_.string()), std::runtime_error);
  try {
    resolve_checkpoint(old);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(old + ": torn checkpoint: no COMMITTED marker"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(CheckpointDirs, ResolvesNewestCompleteAndSkipsTornOnes) {
  make(50, 1.0f);
  make(100, 2.0f);
  // A torn staging dir of a later step, and a step dir without its state file.
  fs::create_directories(root_ / ".step-00000150.tmp");
  fs::create_directories(root_ / "step-00000200");
  std::ofstream(root_ / "step-00000200" / "lora.safetensors") << "partial";
  EXPECT_EQ(resolve_checkpoint(root_.string()), (root_ / "step-00000100").string());
  EXPECT_EQ(resolve_checkpoint((root_ / "step-00000050").string()),
            (root_ / "step-00000050").string());
  EXPECT_THROW(resolve_checkpoint((root_ / "nope").string()), std::runtime_error);
}

TEST_F(CheckpointDirs, NoCompleteCheckpointIsAnErrorNamingThePath) {
  fs::create_directories(root_ / ".step-00000010.tmp");
  try {
    resolve_checkpoint(root_.string());
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(root_.string()), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointDirs, PublishReplacesTheSameStepAndPruneKeepsNewest) {
  make(10, 1.0f);
  make(10, 5.0f);  // the same step again (a rerun): replaced, not merged
  auto w = load_safetensors((root_ / "step-00000010/lora.safetensors").string());
  EXPECT_FLOAT_EQ(w.tensors.at("w")[0].item<float>(), 5.0f);
  make(20, 1.0f);
  make(30, 1.0f);
  prune_checkpoints(root_.string(), 2);
  EXPECT_FALSE(fs::exists(root_ / "step-00000010"));
  EXPECT_TRUE(fs::exists(root_ / "step-00000020"));
  EXPECT_TRUE(fs::exists(root_ / "step-00000030"));
  EXPECT_EQ(checkpoint_dir_name(7), "step-00000007");
}

// A 256 KiB tmpfs as the checkpoint root: a second checkpoint that does not fit must fail naming
// the file and ENOSPC, and leave the first one resolvable and byte-identical.
class CheckpointDiskFull : public ::testing::Test {
 protected:
  void SetUp() override {
    mnt_ = fs::temp_directory_path() / ("lf_ckpt_tmpfs_" + std::to_string(getpid()));
    fs::create_directories(mnt_);
    if (::mount("tmpfs", mnt_.c_str(), "tmpfs", 0, "size=256k") != 0) {
      const std::string why = std::strerror(errno);
      fs::remove(mnt_);
      GTEST_SKIP() << "cannot mount a tmpfs at " << mnt_.string() << " (" << why
                   << "); needs root or CAP_SYS_ADMIN";
    }
    mounted_ = true;
    root_ = mnt_ / "checkpoints";
    fs::create_directories(root_);
  }
  void TearDown() override {
    if (mounted_) ::umount2(mnt_.c_str(), MNT_DETACH);
    std::error_code ec;
    fs::remove(mnt_, ec);
  }
  fs::path mnt_, root_;
  bool mounted_ = false;
};

TEST_F(CheckpointDiskFull, FailedWriteKeepsThePreviousCheckpoint) {
  // 4096 values: 16 KiB LoRA + 32 KiB moments; 24576 values: 96 + 192 KiB, over the 256 KiB.
  const std::string first = write_checkpoint(root_.string(), 1, 4096);
  ASSERT_EQ(resolve_checkpoint(root_.string()), first);
  std::map<std::string, std::string> before;
  for (const auto& e : fs::recursive_directory_iterator(first)) {
    if (e.is_regular_file()) before[e.path().string()] = read_bytes(e.path());
  }
  ASSERT_EQ(before.size(), 4u);  // lora, train state, rng/rank-0, COMMITTED

  std::string error;
  try {
    write_checkpoint(root_.string(), 2, 24576);
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  ASSERT_FALSE(error.empty()) << "the oversized checkpoint was written";
  const std::string staging = staging_dir_path(root_.string(), 2);
  EXPECT_TRUE(error.find(staging + "/lora.safetensors") != std::string::npos ||
              error.find(staging + "/train_state.safetensors") != std::string::npos)
      << error;
  EXPECT_NE(error.find("No space left on device"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(staging));
  EXPECT_FALSE(fs::exists(root_ / "step-00000002"));

  EXPECT_EQ(resolve_checkpoint(root_.string()), first);
  std::map<std::string, std::string> after;
  for (const auto& e : fs::recursive_directory_iterator(first)) {
    if (e.is_regular_file()) after[e.path().string()] = read_bytes(e.path());
  }
  EXPECT_EQ(after, before);
  EXPECT_EQ(checkpoint_torn_reason(first, CheckpointCheck::kSizesAndHash), std::nullopt);
  EXPECT_EQ(load_train_state(first).optimizer.at("w.exp_avg").numel(), 4096);

  // The space of the failed attempt was given back: the next checkpoint that fits succeeds.
  const std::string third = write_checkpoint(root_.string(), 3, 4096);
  EXPECT_EQ(resolve_checkpoint(root_.string()), third);
}

}  // namespace
}  // namespace lf
