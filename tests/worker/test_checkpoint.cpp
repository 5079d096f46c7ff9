// Checkpoint directories: train state round trip, newest-complete resolution that skips torn
// staging dirs, atomic publish over an existing step, pruning.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

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

TEST_F(CheckpointDirs, TrainStateRoundTrip) {
  TrainState s;
  s.global_step = 1234;
  s.epoch = 3;
  s.step_in_epoch = 17;
  s.samples_in_epoch = 68;
  s.shared_seed = 18446744073709551557ull;  // above INT64_MAX
  s.world_size = 4;
  s.session_id = 99;
  s.training_started_at = 1764450000.125;
  s.reg_cursor = {10, 0};
  s.gradient_accumulation_steps = 3;
  s.batch_sizes = {2, 1};
  s.plan_epoch = 2;
  s.plan_digest = std::string(64, 'f');
  s.optimizer = {{"a.exp_avg", torch::arange(6, torch::kFloat)}, {"step", torch::tensor(12.0)}};
  save_train_state(root_.string(), s);
  const TrainState t = load_train_state(root_.string());
  EXPECT_EQ(t.global_step, 1234);
  EXPECT_EQ(t.epoch, 3);
  EXPECT_EQ(t.step_in_epoch, 17);
  EXPECT_EQ(t.samples_in_epoch, 68);
  EXPECT_EQ(t.shared_seed, 18446744073709551557ull);
  EXPECT_EQ(t.world_size, 4);
  EXPECT_EQ(t.session_id, 99);
  EXPECT_DOUBLE_EQ(t.training_started_at, 1764450000.125);
  EXPECT_EQ(t.reg_cursor, (std::vector<std::int64_t>{10, 0}));
  EXPECT_EQ(t.gradient_accumulation_steps, 3);
  EXPECT_EQ(t.batch_sizes, (std::vector<std::int64_t>{2, 1}));
  EXPECT_EQ(t.plan_epoch, 2);
  EXPECT_EQ(t.plan_digest, std::string(64, 'f'));
  ASSERT_EQ(t.optimizer.size(), 2u);
  EXPECT_TRUE(torch::equal(t.optimizer.at("a.exp_avg"), torch::arange(6, torch::kFloat)));
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

}  // namespace
}  // namespace lf
