// The fused gradient allreduce over a fake two-rank communicator: the "peer" contributes a
// known buffer, so the summed gradients and loss can be checked exactly.
#include <gtest/gtest.h>
#include <torch/torch.h>

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
    ASSERT_EQ(t.numel(), peer_.numel());
    t.add_(peer_);
  }
  void broadcast(at::Tensor& t, int root) override {
    if (root != 0) t.copy_(peer_.narrow(0, 0, t.numel()).to(t.scalar_type()));
  }
  void barrier() override {}
  std::string backend() const override { return "mpi"; }
  int allreduce_calls = 0;

 private:
  at::Tensor peer_;
};

TEST(ParameterSync, OneFusedAllreduceSumsGradsAndLoss) {
  auto a = torch::zeros({2, 3}, torch::requires_grad());
  auto b = torch::zeros({4}, torch::requires_grad());
  a.mutable_grad() = torch::full({2, 3}, 1.0f);
  // b has no grad on this rank (no samples reached it): the peer's values must come through.
  FakeCommunicator comm(torch::arange(11, torch::kFloat));  // 6 + 4 grads + 1 loss
  const double loss = allreduce_gradients(comm, {a, b}, /*local_loss_sum=*/2.5);
  EXPECT_EQ(comm.allreduce_calls, 1);
  EXPECT_DOUBLE_EQ(loss, 2.5 + 10.0);
  EXPECT_TRUE(torch::equal(a.grad(), torch::arange(6, torch::kFloat).view({2, 3}) + 1.0f));
  EXPECT_TRUE(torch::equal(b.grad(), torch::arange(6, 10, torch::kFloat)));
}

TEST(ParameterSync, StopVotesRideInTheSameAllreduce) {
  auto a = torch::zeros({2}, torch::requires_grad());
  a.mutable_grad() = torch::full({2}, 1.0f);
  // Peer: grads 0, 0; loss 4; its stop vote 1 (it saw SIGTERM).
  FakeCommunicator comm(torch::tensor({0.f, 0.f, 4.f, 1.f}));
  double votes = 0.0;  // this rank did not see the signal
  const double loss = allreduce_gradients(comm, {a}, /*local_loss_sum=*/1.0, &votes);
  EXPECT_EQ(comm.allreduce_calls, 1);  // no extra collective for the vote
  EXPECT_DOUBLE_EQ(loss, 5.0);
  EXPECT_DOUBLE_EQ(votes, 1.0);  // every rank learns that one rank wants to stop
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
