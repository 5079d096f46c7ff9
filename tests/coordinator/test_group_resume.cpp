// GroupResume on its own (no gRPC): one resume decision for a group, every refusal a ConfigError
// (exit 3) naming what differs, the job's schedule replanned only for an accepted checkpoint, a
// supervisor's restart continuing from the newest checkpoint, and an abandoned branch set aside.
#include "coordinator/group_resume.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/checkpoint/checkpoint_layout.h"
#include "common/config/job_config.h"
#include "tests/support/fake_checkpoint.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

using test_support::fake_position;
using test_support::write_fake_checkpoint;

class GroupResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("lf_group_resume_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "train/5_shapes");
    for (int i = 0; i < 4;
         ++i) {  // 4 images x 5 repeats in two buckets: 10 global batches an epoch on 2 ranks
      cv::Mat img(i % 2 ? 96 : 64, 64, CV_8UC3, cv::Scalar(40 * i, 80, 200 - 30 * i));
      const fs::path stem = root_ / "train/5_shapes" / ("img" + std::to_string(i));
      ASSERT_TRUE(cv::imwrite(stem.string() + ".png", img));
      std::ofstream(stem.string() + ".txt") << "a shape " << i << "\n";
    }
    std::ofstream(root_ / "model.safetensors") << "unused";
    std::ofstream(root_ / "vocab.txt.gz") << "unused";
  }
  void TearDown() override { fs::remove_all(root_); }

  JobConfig config(const std::string& training = "", int seed = 1234) const {
    const std::string r = root_.string();
    return parse_job_config("model:\n  pretrained_model_name_or_path: " + r +
                                "/model.safetensors\n  tokenizer_vocab: " + r +
                                "/vocab.txt.gz\ndataset:\n  train_data_dir: " + r +
                                "/train\n  resolution: 64\n  min_bucket_reso: 64\n"
                                "  max_bucket_reso: 128\n  bucket_reso_steps: 32\n"
                                "  caption_extension: .txt\ntraining:\n  seed: " +
                                std::to_string(seed) + "\n  max_train_steps: 12\n" + training +
                                "output:\n  output_dir: " + r + "/out\n",
                            "job.yaml");
  }
  fs::path checkpoints() const { return root_ / "out/checkpoints"; }
  // A committed checkpoint this job accepts: its seed and options, and its own 2-rank plan of
  // epoch 1 as trained for `step` batches.
  CheckpointPosition write_accepted(CoordinatorJob& job, int step) const {
    TrainPosition p = fake_position(step, 0, step, 2, "2:" + std::to_string(step));
    p.plan_digest = epoch_plan_digest(
        build_continued_epoch_plan(job.dataset(), job.plan_options(2), 0, {{2, step}}));
    const fs::path dir = checkpoints() / checkpoint_dir_name(step);
    write_fake_checkpoint(dir, p);
    CheckpointPosition c;
    static_cast<TrainPosition&>(c) = p;
    c.dir = dir.string();
    return c;
  }
  static std::vector<RankResumeRequest> all(const std::string& resume, int n = 2,
                                            int restart_count = 0) {
    return std::vector<RankResumeRequest>(n, RankResumeRequest{resume, restart_count});
  }
  // The ConfigError plan() throws, as text ("" when it accepted).
  static std::string refusal(GroupResume& g, const std::vector<RankResumeRequest>& ranks) {
    try {
      g.plan(ranks);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }

  fs::path root_;
};

TEST_F(GroupResumeTest, FreshRunPlansTheJobAndRefusesAnOutputDirWithCheckpoints) {
  CoordinatorJob job(config(), /*check_model_files=*/false);
  GroupResume g(job);
  EXPECT_EQ(g.plan(all("")), std::nullopt);
  EXPECT_EQ(job.schedule().world_size, 2);
  EXPECT_EQ(g.plan(all("auto", 3)), std::nullopt);  // nothing to resume yet: fresh
  EXPECT_EQ(job.schedule().world_size, 3);
  write_accepted(job, 2);
  const std::string why = refusal(g, all(""));
  EXPECT_NE(why.find("job.yaml: key 'output.output_dir': " + (root_ / "out").string() +
                     " already holds checkpoints"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("nothing was overwritten"), std::string::npos) << why;
}

TEST_F(GroupResumeTest, RanksAskingDifferentThingsAreNamed) {
  CoordinatorJob job(config(), false);
  GroupResume g(job);
  std::vector<RankResumeRequest> ranks = all("auto", 3);
  ranks[1].resume = "";
  EXPECT_EQ(refusal(g, ranks),
            "the ranks asked to resume from different checkpoints (ranks 1: no --resume; ranks "
            "0, 2: --resume auto); start every rank with the same --resume");
}

TEST_F(GroupResumeTest, AnAcceptedCheckpointReplansTheRestForTheGroupsSize) {
  CoordinatorJob job(config(), false);
  const CheckpointPosition c = write_accepted(job, 3);
  GroupResume g(job);
  const std::optional<CheckpointPosition> pos = g.plan(all("auto", 1));
  ASSERT_TRUE(pos.has_value());
  EXPECT_TRUE(static_cast<const TrainPosition&>(*pos) == c);
  EXPECT_EQ(pos->dir, c.dir);
  // The resumed epoch is the 2-rank plan continued on 1 rank, its 3 consumed batches kept.
  const EpochPlan continued =
      build_continued_epoch_plan(job.dataset(), job.plan_options(1), 0, {{2, 3}, {1, 0}});
  EXPECT_EQ(epoch_plan_digest(*job.epoch_plan(0)), epoch_plan_digest(continued));
  EXPECT_EQ(job.schedule().world_size, 1);
  EXPECT_EQ(job.schedule().max_train_steps, 12);
}

// Each job fact that differs is refused before anything is replanned; the schedule stays.
TEST_F(GroupResumeTest, IncompatibleCheckpointsAreRefusedAndTheScheduleKept) {
  {
    CoordinatorJob job(config(), false);
    write_accepted(job, 3);
  }
  const fs::path state = checkpoints() / "step-00000003/train_state.safetensors";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  gradient_accumulation_steps: 2\n",
       "key 'training.gradient_accumulation_steps': the checkpoint was trained with 1, the job "
       "has 2"},
      {"  train_batch_size: 2\n",
       "key 'training.train_batch_size / dataset batch_size': the checkpoint was trained with "
       "per-dataset batch sizes [1], the job has [2]"},
      {"  optimizer_type: Lion\n",
       "key 'training.optimizer_type': the checkpoint was trained with AdamW, the job has Lion"},
  };
  for (const auto& [extra, message] : cases) {
    CoordinatorJob job(config(extra), false);
    job.set_world_size(4);
    const JobSchedule before = job.schedule();
    GroupResume g(job);
    const std::string why = refusal(g, all("auto", 2));
    EXPECT_EQ(why.rfind(state.string() + ": " + message, 0), 0u) << why;
    EXPECT_EQ(job.schedule().world_size, before.world_size);
    EXPECT_EQ(job.schedule().max_train_steps, before.max_train_steps);
  }
  // Another seed: a plan of other samples as well, refused on the seed first.
  CoordinatorJob job(config("", 77), false);
  GroupResume g(job);
  EXPECT_NE(refusal(g, all("auto"))
                .find("key 'training.seed': the checkpoint was trained with "
                      "1234, the job has 77"),
            std::string::npos);
}

TEST_F(GroupResumeTest, AChangedPlanOrAMissingCheckpointIsRefused) {
  CoordinatorJob job(config(), false);
  TrainPosition p = fake_position(3, 0, 3, 2, "2:3");  // digest "abc": not this job's plan
  write_fake_checkpoint(checkpoints() / "step-00000003", p);
  GroupResume g(job);
  std::string why = refusal(g, all("auto"));
  EXPECT_NE(why.find("this job's plan of epoch 1 differs from the one the checkpoint was trained "
                     "on"),
            std::string::npos)
      << why;
  why = refusal(g, all((root_ / "missing").string()));
  EXPECT_EQ(why.rfind("cannot resume (--resume " + (root_ / "missing").string() + "): ", 0), 0u)
      << why;
}

// A supervisor repeating the first command line (--resume <older step>) continues from the
// newest checkpoint; the same --resume on a first start goes back to it and sets the newer
// checkpoints aside in checkpoints/abandoned-<time>/.
TEST_F(GroupResumeTest, ExplicitResumeOfAnOlderCheckpoint) {
  CoordinatorJob job(config(), false);
  const CheckpointPosition step2 = write_accepted(job, 2);
  write_accepted(job, 4);
  GroupResume g(job);
  EXPECT_EQ(g.plan(all(step2.dir, 2, /*restart_count=*/1))->global_step, 4);
  EXPECT_TRUE(fs::exists(checkpoints() / "step-00000004"));
  EXPECT_EQ(g.plan(all(step2.dir))->global_step, 2);
  EXPECT_FALSE(fs::exists(checkpoints() / "step-00000004"));
  int aside = 0;
  for (const auto& e : fs::directory_iterator(checkpoints())) {
    if (e.path().filename().string().rfind("abandoned-", 0) == 0) {
      aside += fs::exists(e.path() / "step-00000004");
    }
  }
  EXPECT_EQ(aside, 1);
  EXPECT_EQ(g.plan(all("auto"))->global_step, 2);
}

}  // namespace
}  // namespace lf
