// TimedCommunicator: a collective that returns in time passes through untouched; one that blocks
// past timeout + slack ends the process with kExitPeerLost (75) and says which collective, so a
// rank whose peer died can never hang (MPI calls cannot be cancelled from another thread).
#include "worker/dist/timed_communicator.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace lf {
namespace {

// Adds 1 to every element; blocks forever once `block` is set.
class SlowCommunicator : public Communicator {
 public:
  explicit SlowCommunicator(bool block) : block_(block) {}
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  void allreduce_sum(at::Tensor& t) override {
    while (block_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    t.add_(1);
  }
  void broadcast(at::Tensor&, int) override {}
  void barrier() override {}
  std::string backend() const override { return "fake"; }

 private:
  bool block_;
};

TEST(TimedCommunicator, PassesThroughCollectivesThatFinishInTime) {
  TimedCommunicator comm(std::make_unique<SlowCommunicator>(false), std::chrono::milliseconds(200),
                         std::chrono::milliseconds(100));
  at::Tensor t = at::zeros({3});
  for (int i = 0; i < 5; ++i) {
    comm.allreduce_sum(t);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // idle time does not count
  }
  EXPECT_TRUE(at::equal(t, at::full({3}, 5.0f)));
  EXPECT_EQ(comm.backend(), "fake");
}

TEST(TimedCommunicatorDeathTest, ABlockedCollectiveExitsWith75) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        TimedCommunicator comm(std::make_unique<SlowCommunicator>(true),
                               std::chrono::milliseconds(200), std::chrono::milliseconds(100));
        at::Tensor t = at::zeros({1});
        comm.allreduce_sum(t);
      },
      ::testing::ExitedWithCode(kExitPeerLost), "fake allreduce of rank 0 did not complete");
}

}  // namespace
}  // namespace lf
