// The fused gradient allreduce over a fake two-rank communicator: the "peer" contributes a
// known buffer, so the summed gradients and loss can be checked exactly.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "worker/dist/parameter_sync.h"

namespace lf {
namespace {

// Rank 0 of a simulated world of 2: allreduce adds `peer`; broadcast from root 1 copies `peer`.
class FakeCommunicator : public Communicator {
 public:
  explicit FakeCommunicator(at::Tensor peer) : peer_(std::move(peer)) {}
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  void allreduce_sum(at::Tensor& t) override {
    ++allreduce_calls;
    wire_dtype = t.scalar_type();
    ASSERT_EQ(t.numel(), peer_.numel());
    t.add_(peer_);
  }
  void broadcast(at::Tensor& t, int root) override {
    if (root != 0) t.copy_(peer_.narrow(0, 0, t.numel()).to(t.scalar_type()));
  }
  void barrier() override {}
  std::string backend() const override { return "mpi"; }
  int allreduce_calls = 0;
  at::ScalarType wire_dtype = at::kFloat;

 private:
  at::Tensor peer_;
};

TEST(ParameterSync, OneFusedAllreduceSumsGradsAndLoss) {
  auto a = torch::zeros({2, 3}, torch::requires_grad());
  auto b = torch::zeros({4}, torch::requires_grad());
  a.mutable_grad() = torch::full({2, 3}, 1.0f);
  // b has no grad on this rank (no samples reached it): the peer's values must come through.
  FakeCommunicator comm(torch::arange(11, torch::kFloat));  // 6 + 4 grads + 1 loss
  StepSums sums;
  sums.loss_sum = 2.5;
  EXPECT_TRUE(allreduce_gradients(comm, {a, b}, sums));
  EXPECT_EQ(comm.allreduce_calls, 1);
  EXPECT_DOUBLE_EQ(sums.loss_sum, 2.5 + 10.0);
  EXPECT_TRUE(torch::equal(a.grad(), torch::arange(6, torch::kFloat).view({2, 3}) + 1.0f));
  EXPECT_TRUE(torch::equal(b.grad(), torch::arange(6, 10, torch::kFloat)));
}

TEST(ParameterSync, StopVotesRideInTheSameAllreduce) {
  auto a = torch::zeros({2}, torch::requires_grad());
  a.mutable_grad() = torch::full({2}, 1.0f);
  // Peer: grads 0, 0; loss 4; its votes: SIGTERM 1, operator stop 0, sample-now 1.
  FakeCommunicator comm(torch::tensor({0.f, 0.f, 4.f, 1.f, 0.f, 1.f}));
  StepSums sums;
  sums.loss_sum = 1.0;
  sums.votes = StepVotes{0.0, 1.0, 0.0};  // this rank saw an operator's stop only
  allreduce_gradients(comm, {a}, sums);
  EXPECT_EQ(comm.allreduce_calls, 1);  // no extra collective for the votes
  EXPECT_DOUBLE_EQ(sums.loss_sum, 5.0);
  // Every rank learns how many ranks voted for each.
  EXPECT_DOUBLE_EQ(sums.votes->preempt, 1.0);
  EXPECT_DOUBLE_EQ(sums.votes->operator_stop, 1.0);
  EXPECT_DOUBLE_EQ(sums.votes->sample_now, 1.0);
}

TEST(ParameterSync, FoundInfOnAnyRankRidesInTheAllreduceAndLeavesScaledGrads) {
  auto a = torch::zeros({2}, torch::requires_grad());
  a.mutable_grad() = torch::tensor({512.f, 1024.f});  // scaled by 256 on this rank
  // Peer: grads 256, 0; loss 3; no votes; its gradients held an Inf (flag 1).
  FakeCommunicator comm(torch::tensor({256.f, 0.f, 3.f, 0.f, 0.f, 0.f, 1.f}));
  StepSums sums;
  sums.loss_sum = 1.0;
  sums.votes = StepVotes{};
  sums.check_finite = true;
  EXPECT_FALSE(allreduce_gradients(comm, {a}, sums, /*unscale=*/1.0 / 256));
  EXPECT_EQ(comm.allreduce_calls, 1);  // the flag adds no collective
  EXPECT_DOUBLE_EQ(sums.nonfinite_ranks, 1.0);
  // Not unscaled: the step is skipped, whatever the gradients hold.
  EXPECT_TRUE(torch::equal(a.grad(), torch::tensor({768.f, 1024.f})));

  // A clean step: the reduced gradients come back unscaled, exactly (a power of two).
  FakeCommunicator clean(torch::tensor({256.f, 0.f, 3.f, 0.f, 0.f, 0.f, 0.f}));
  a.mutable_grad() = torch::tensor({512.f, 1024.f});
  EXPECT_TRUE(allreduce_gradients(clean, {a}, sums, 1.0 / 256));
  EXPECT_DOUBLE_EQ(sums.nonfinite_ranks, 0.0);
  EXPECT_TRUE(torch::equal(a.grad(), torch::tensor({3.f, 4.f})));
  // An Inf in the reduced gradients themselves is found too (an overflow of the sum).
  FakeCommunicator overflow(torch::tensor({INFINITY, 0.f, 3.f, 0.f, 0.f, 0.f, 0.f}));
  EXPECT_FALSE(allreduce_gradients(overflow, {a}, sums, 1.0 / 256));
  // This rank's own Inf sets its flag: the peer adds 0 and the sum says 1.
  FakeCommunicator quiet(torch::tensor({0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f}));
  a.mutable_grad() = torch::tensor({NAN, 1.f});
  EXPECT_FALSE(allreduce_gradients(quiet, {a}, sums, 1.0 / 256));
  EXPECT_DOUBLE_EQ(sums.nonfinite_ranks, 1.0);
}

TEST(ParameterSync, HalfGradientsAreSummedInFloat32) {
  auto a = torch::zeros({2}, torch::dtype(torch::kBFloat16).requires_grad(true));
  a.mutable_grad() = torch::tensor({1.0f, 256.0f}).to(torch::kBFloat16);
  // 256 + 1 is not a bf16 value: the float32 sum rounds once, to 256 (round to even).
  FakeCommunicator comm(torch::tensor({1.f, 1.f, 0.f}));
  StepSums sums;
  allreduce_gradients(comm, {a}, sums);
  EXPECT_EQ(comm.wire_dtype, at::kFloat);
  EXPECT_EQ(a.grad().scalar_type(), at::kBFloat16);
  EXPECT_TRUE(torch::equal(a.grad(), torch::tensor({2.f, 256.f}).to(torch::kBFloat16)));
}

TEST(ParameterSync, BroadcastCopiesRootValuesIntoEveryParameter) {
  auto a = torch::zeros({2}, torch::requires_grad());
  auto b = torch::zeros({3}, torch::requires_grad());
  FakeCommunicator comm(torch::tensor({7.f, 8.f, 9.f, 10.f, 11.f}));
  broadcast_parameters(comm, {a, b}, /*root=*/1);
  EXPECT_TRUE(torch::equal(a, torch::tensor({7.f, 8.f})));
  EXPECT_TRUE(torch::equal(b, torch::tensor({9.f, 10.f, 11.f})));
}

}  // namespace
}  // namespace lf
