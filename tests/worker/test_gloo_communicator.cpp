// Gloo collectives through c10d, two ranks as two threads of this process on loopback: the
// rendezvous through rank 0's store, exact sums and broadcasts, and the bounded wait when a peer
// never shows up (cluster.collective_timeout).
#include "worker/dist/gloo_communicator.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace lf {
namespace {

using std::chrono::milliseconds;

TEST(GlooCommunicator, AllreduceAndBroadcastAcrossTwoRanks) {
  GlooStoreServer server(2, 0, milliseconds(20000));
  ASSERT_GT(server.port(), 0);
  const std::string address = "127.0.0.1:" + std::to_string(server.port());
  auto run_rank = [&](int rank) {
    GlooOptions o;
    o.rank = rank;
    o.world_size = 2;
    o.store_address = address;
    o.local_address = "127.0.0.1";
    o.timeout = milliseconds(20000);
    GlooCommunicator comm(o, rank == 0 ? &server : nullptr);
    EXPECT_EQ(comm.backend(), "gloo");
    at::Tensor t = at::arange(5, at::kFloat) * (rank + 1);  // rank 0: 0..4, rank 1: 0..8
    comm.allreduce_sum(t);
    at::Tensor b = rank == 0 ? at::full({3}, 7.5f) : at::zeros({3});
    comm.broadcast(b, 0);
    comm.barrier();
    return std::make_pair(t, b);
  };
  auto f1 = std::async(std::launch::async, run_rank, 1);
  auto [t0, b0] = run_rank(0);
  auto [t1, b1] = f1.get();
  const at::Tensor expect = at::arange(5, at::kFloat) * 3;
  EXPECT_TRUE(at::equal(t0, expect)) << t0;
  EXPECT_TRUE(at::equal(t1, expect)) << t1;
  EXPECT_TRUE(at::equal(b1, at::full({3}, 7.5f))) << b1;
}

TEST(GlooCommunicator, CollectiveWithADeadPeerThrowsWithinTheTimeout) {
  GlooStoreServer server(2, 0, milliseconds(20000));
  const std::string address = "127.0.0.1:" + std::to_string(server.port());
  std::promise<void> joined;
  std::promise<void> release;
  auto peer = std::async(std::launch::async, [&] {
    GlooOptions o;
    o.rank = 1;
    o.world_size = 2;
    o.store_address = address;
    o.local_address = "127.0.0.1";
    o.timeout = milliseconds(20000);
    GlooCommunicator comm(o, nullptr);
    joined.set_value();
    release.get_future().wait();  // joins the group, then never takes part in the allreduce
  });
  GlooOptions o;
  o.rank = 0;
  o.world_size = 2;
  o.store_address = address;
  o.local_address = "127.0.0.1";
  o.timeout = milliseconds(1500);
  GlooCommunicator comm(o, &server);
  joined.get_future().wait();
  at::Tensor t = at::ones({4});
  const auto t0 = std::chrono::steady_clock::now();
  try {
    comm.allreduce_sum(t);
    ADD_FAILURE() << "allreduce returned without the peer";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("cluster.collective_timeout"), std::string::npos)
        << e.what();
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 1.0);
  EXPECT_LT(waited, 6.0);
  release.set_value();
  peer.get();
}

}  // namespace
}  // namespace lf
