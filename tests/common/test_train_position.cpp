// The train position in a train state's header (version 2: every field required), compared
// whole, and the resume compatibility check the coordinator makes once for a group.
#include "common/checkpoint/train_position.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/checkpoint/checkpoint_layout.h"
#include "common/config/job_config.h"
#include "common/io/safetensors.h"
#include "tests/support/full_position.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

const std::string kPrefix = "lorafleet.state.";

TrainPosition sample_position() { return test_support::full_position(); }

class TrainPositionFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lf_train_position_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write_state(const std::map<std::string, std::string>& meta) {
    SafetensorsWriter w;
    w.set_metadata(meta);
    w.write_atomic((dir_ / kCheckpointStateFile).string());
  }
  fs::path dir_;
};

// Written into a train state's header and read back from it, the position is the same whole:
// its complete metadata, every field, compares equal.
TEST_F(TrainPositionFile, WholePositionRoundTripsThroughTheHeader) {
  const TrainPosition want = sample_position();
  write_state(train_position_metadata(want));
  const TrainPosition back = read_train_position(dir_.string());
  EXPECT_EQ(train_position_metadata(back), train_position_metadata(want));
  EXPECT_TRUE(back == want);
  EXPECT_EQ(train_position_metadata(want).size(), 19u);  // 18 fields and the version
  EXPECT_EQ(train_position_metadata(want).at(kPrefix + "version"), "2");
  const CheckpointPosition c = read_checkpoint_position(dir_.string());
  EXPECT_TRUE(static_cast<const TrainPosition&>(c) == want);
  EXPECT_EQ(c.dir, fs::absolute(dir_).lexically_normal().string());
}

// Equality sees every field: each one changed alone makes the positions differ.
TEST(TrainPosition, EqualityComparesEveryField) {
  const std::vector<std::function<void(TrainPosition&)>> changes = {
      [](TrainPosition& p) { ++p.global_step; },
      [](TrainPosition& p) { ++p.epoch; },
      [](TrainPosition& p) { ++p.step_in_epoch; },
      [](TrainPosition& p) { ++p.samples_in_epoch; },
      [](TrainPosition& p) { ++p.shared_seed; },
      [](TrainPosition& p) { ++p.world_size; },
      [](TrainPosition& p) { ++p.session_id; },
      [](TrainPosition& p) { p.training_started_at += 0.001; },
      [](TrainPosition& p) { p.reg_cursor.push_back(1); },
      [](TrainPosition& p) { ++p.gradient_accumulation_steps; },
      [](TrainPosition& p) { p.batch_sizes[0] = 5; },
      [](TrainPosition& p) { p.optimizer_type = "AdamW"; },
      [](TrainPosition& p) { ++p.plan_epoch; },
      [](TrainPosition& p) { p.plan_digest[0] = 'e'; },
      [](TrainPosition& p) { p.plan_lineage.back().batches = 6; },
      [](TrainPosition& p) { p.loss_scale = 65536.0; },
      [](TrainPosition& p) { ++p.loss_scale_growth_tracker; },
      [](TrainPosition& p) { ++p.skipped_steps; },
  };
  const TrainPosition base = sample_position();
  for (std::size_t i = 0; i < changes.size(); ++i) {
    TrainPosition p = base;
    changes[i](p);
    EXPECT_TRUE(p != base) << "change " << i;
  }
}

// Version 2 reads only version 2, and every key is required (no defaults for older states).
TEST(TrainPosition, EveryKeyIsRequiredAndOtherVersionsAreRefused) {
  const auto full = train_position_metadata(sample_position());
  for (const auto& [key, value] : full) {
    if (key == kPrefix + "version") continue;
    auto meta = full;
    meta.erase(key);
    try {
      parse_train_position(meta, "f.safetensors");
      ADD_FAILURE() << key << " was not required";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "f.safetensors: train state lacks '" + key + "'");
    }
  }
  auto meta = full;
  meta[kPrefix + "version"] = "1";
  try {
    parse_train_position(meta, "f.safetensors");
    ADD_FAILURE() << "version 1 was read";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "f.safetensors: train state version 1 is not supported (expected 2)");
  }
  meta = full;
  meta[kPrefix + "epoch"] = "3x";
  try {
    parse_train_position(meta, "f.safetensors");
    ADD_FAILURE() << "a malformed epoch was read";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "f.safetensors: train state 'lorafleet.state.epoch' is '3x', expected an integer");
  }
  meta = full;
  meta[kPrefix + "batch_sizes"] = "2,x";
  EXPECT_THROW(parse_train_position(meta, "f.safetensors"), std::runtime_error);
  // Empty lists are lists: no reg images, a lineage at an epoch's start.
  meta = full;
  meta[kPrefix + "reg_cursor"] = "";
  meta[kPrefix + "plan_lineage"] = "";
  const TrainPosition p = parse_train_position(meta, "f.safetensors");
  EXPECT_TRUE(p.reg_cursor.empty());
  EXPECT_TRUE(p.plan_lineage.empty());
}

TEST_F(TrainPositionFile, MissingOrOutOfRangeStateNamesTheFile) {
  try {
    read_train_position(dir_.string());
    FAIL() << "a missing train state was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find((dir_ / "train_state.safetensors").string() + ": missing"),
              std::string::npos)
        << e.what();
  }
  TrainPosition bad = sample_position();
  bad.world_size = 0;
  write_state(train_position_metadata(bad));
  try {
    read_checkpoint_position(dir_.string());
    FAIL() << "world_size 0 was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("out of range (world_size 0"), std::string::npos)
        << e.what();
  }
}

// The job facts a resume must share, each refused as bad input (ConfigError: exit 3) naming the
// checkpoint's train state, the key and both values.
TEST(ResumeCompatibility, EachDifferenceIsAConfigErrorNamingTheKey) {
  CheckpointPosition c;
  static_cast<TrainPosition&>(c) = sample_position();
  c.dir = "/out/checkpoints/step-00001234";
  ResumeExpectations job;
  job.shared_seed = c.shared_seed;
  job.gradient_accumulation_steps = 3;
  job.batch_sizes = {2, 1};
  job.optimizer_type = "Prodigy";
  EXPECT_NO_THROW(check_resume_compatible(c, job));
  const std::string file = "/out/checkpoints/step-00001234/train_state.safetensors: ";
  const std::vector<std::pair<std::function<void(ResumeExpectations&)>, std::string>> cases = {
      {[](ResumeExpectations& j) { j.shared_seed = 7; },
       "key 'training.seed': the checkpoint was trained with 18446744073709551557, the job has 7"},
      {[](ResumeExpectations& j) { j.gradient_accumulation_steps = 1; },
       "key 'training.gradient_accumulation_steps': the checkpoint was trained with 3, the job "
       "has 1"},
      {[](ResumeExpectations& j) {
         j.batch_sizes = {2, 2};
       },
       "key 'training.train_batch_size / dataset batch_size': the checkpoint was trained with "
       "per-dataset batch sizes [2,1], the job has [2,2]"},
      {[](ResumeExpectations& j) { j.optimizer_type = "AdamW"; },
       "key 'training.optimizer_type': the checkpoint was trained with Prodigy, the job has "
       "AdamW"},
  };
  for (const auto& [change, message] : cases) {
    ResumeExpectations j = job;
    change(j);
    try {
      check_resume_compatible(c, j);
      ADD_FAILURE() << "accepted: " << message;
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(file + message, 0), 0u) << e.what();
    }
  }
}

TEST(ResumeCompatibility, ExpectationsComeFromTheJobConfig) {
  const JobConfig config = parse_job_config(
      "model:\n  pretrained_model_name_or_path: m.safetensors\n  tokenizer_vocab: v.txt.gz\n"
      "dataset:\n  train_data_dir: train\n"
      "training:\n  seed: 99\n  train_batch_size: 2\n  gradient_accumulation_steps: 4\n"
      "  optimizer_type: prodigy\n"
      "  learning_rate: 1.0\n  max_train_steps: 10\n"
      "output:\n  output_dir: out\n",
      "job.yaml");
  const ResumeExpectations e = resume_expectations_of(config);
  EXPECT_EQ(e.shared_seed, 99u);
  EXPECT_EQ(e.gradient_accumulation_steps, 4);
  EXPECT_EQ(e.batch_sizes, std::vector<std::int64_t>{2});
  EXPECT_EQ(e.optimizer_type, "Prodigy");
}

}  // namespace
}  // namespace lf
