// Where a worker's rank comes from (--launcher): the variables of mpirun, Kubernetes Indexed
// Jobs, lorafleet-launch and torchrun, their precedence, and the errors for bad values.
#include "worker/app/launch_env.h"

#include <gtest/gtest.h>

#include <torch/cuda.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "common/config/job_config.h"

namespace lf {
namespace {

class LaunchEnv : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char* v : {"LF_RANK", "JOB_COMPLETION_INDEX", "RANK", "LF_WORLD_SIZE", "WORLD_SIZE",
                          "LF_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
                          "OMPI_COMM_WORLD_LOCAL_RANK"}) {
      unsetenv(v);
    }
  }
};

TEST_F(LaunchEnv, AutoWithoutAnythingIsOneProcess) {
  const LaunchInfo i = resolve_launch("auto");
  EXPECT_EQ(i.mode, LaunchMode::kEnv);
  EXPECT_EQ(i.rank, 0);
  EXPECT_EQ(i.world_size, 1);
}

TEST_F(LaunchEnv, OpenMpiVariablesMeanMpirun) {
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  setenv("LF_RANK", "1", 1);  // ignored: MPI decides
  EXPECT_EQ(resolve_launch("auto").mode, LaunchMode::kMpirun);
  EXPECT_EQ(resolve_launch("env").mode, LaunchMode::kEnv);  // an explicit flag wins
}

TEST_F(LaunchEnv, RankVariablesInOrderOfPrecedence) {
  setenv("RANK", "5", 1);
  EXPECT_EQ(resolve_launch("auto").rank, 5);
  EXPECT_EQ(resolve_launch("auto").rank_source, "RANK");
  setenv("JOB_COMPLETION_INDEX", "3", 1);  // Indexed Job beats torchrun's name
  EXPECT_EQ(resolve_launch("auto").rank, 3);
  setenv("LF_RANK", "2", 1);  // lorafleet's own beats both
  setenv("LF_WORLD_SIZE", "4", 1);
  setenv("LOCAL_RANK", "1", 1);
  const LaunchInfo i = resolve_launch("env");
  EXPECT_EQ(i.rank, 2);
  EXPECT_EQ(i.world_size, 4);
  EXPECT_EQ(i.local_rank, 1);
}

TEST_F(LaunchEnv, ErrorsNameTheFlagOrVariable) {
  try {
    resolve_launch("env");
    ADD_FAILURE() << "no rank variable was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("LF_RANK"), std::string::npos) << e.what();
  }
  setenv("LF_RANK", "one", 1);
  try {
    resolve_launch("auto");
    ADD_FAILURE() << "a non-integer rank was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "environment variable LF_RANK: expected an integer >= 0, got 'one'");
  }
  EXPECT_THROW(resolve_launch("slurm"), std::invalid_argument);
}

TEST_F(LaunchEnv, LocalRankFromMpirunElseTheEnvironmentElseUnset) {
  EXPECT_EQ(resolve_launch("auto").local_rank, -1);  // the worker then uses its rank
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
  setenv("LOCAL_RANK", "1", 1);
  EXPECT_EQ(resolve_launch("auto").mode, LaunchMode::kMpirun);
  EXPECT_EQ(resolve_launch("auto").local_rank, 3);  // mpirun's own wins
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(resolve_launch("mpirun").local_rank, 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "x", 1);
  EXPECT_THROW(resolve_launch("auto"), std::invalid_argument);
}

TEST(TrainingDevice, CpuOnRequestCudaOnlyWhenVisible) {
  EXPECT_EQ(choose_training_device("job.yaml", "cpu", 0), at::Device(at::kCPU));
  const bool cuda = torch::cuda::is_available();
  EXPECT_EQ(cuda_device_index(5) >= 0, cuda);
  EXPECT_EQ(choose_training_device("job.yaml", "auto", 0).type(), cuda ? at::kCUDA : at::kCPU);
  if (cuda) {
    EXPECT_EQ(choose_training_device("job.yaml", "cuda", 1).index(),
              1 % torch::cuda::device_count());
  } else {
    try {
      unsetenv("CUDA_VISIBLE_DEVICES");
      choose_training_device("job.yaml", "cuda", 0);
      ADD_FAILURE() << "cuda was accepted without a CUDA device";
    } catch (const ConfigError& e) {  // exit 3: bad input, not retried
      EXPECT_EQ(std::string(e.what()),
                "job.yaml: key 'worker.device': cuda, but no CUDA device is visible; use auto "
                "or cpu");
    }
  }
}

TEST(LocalAddress, IsTheSourceAddressOfTheRoute) {
  EXPECT_EQ(local_address_towards("127.0.0.1:9"), "127.0.0.1");
  EXPECT_EQ(local_address_towards("no-port"), "");
}

}  // namespace
}  // namespace lf
