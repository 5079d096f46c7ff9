// Gloo collectives through c10d, two ranks as two threads of this process on loopback: the
// rendezvous through a shared KeyValueStore seen as a c10d Store (as the coordinator's store is,
// over gRPC, in a real job), exact sums and broadcasts, and the bounded waits when a peer never
// shows up (cluster.collective_timeout, rendezvous).
#include "worker/dist/gloo_communicator.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "common/rendezvous/key_value_store.h"
#include "worker/dist/c10d_store.h"

namespace lf {
namespace {

using std::chrono::milliseconds;

GlooOptions options_for(int rank, std::shared_ptr<KeyValueStore> store, milliseconds timeout) {
  GlooOptions o;
  o.rank = rank;
  o.world_size = 2;
  o.store = std::move(store);
  o.local_address = "127.0.0.1";
  o.timeout = timeout;
  return o;
}

TEST(GlooCommunicator, AllreduceAndBroadcastAcrossTwoRanks) {
  auto store = std::make_shared<KeyValueStore>();
  auto run_rank = [&](int rank) {
    GlooCommunicator comm(options_for(rank, store, milliseconds(20000)));
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
  // The ranks met in the store (their addresses and Gloo's own keys), nowhere else.
  EXPECT_GE(store->size(), 2);
}

TEST(GlooCommunicator, CollectiveWithADeadPeerThrowsWithinTheTimeout) {
  auto store = std::make_shared<KeyValueStore>();
  std::promise<void> joined;
  std::promise<void> release;
  auto peer = std::async(std::launch::async, [&] {
    GlooCommunicator comm(options_for(1, store, milliseconds(20000)));
    joined.set_value();
    release.get_future().wait();  // joins the group, then never takes part in the allreduce
  });
  GlooCommunicator comm(options_for(0, store, milliseconds(1500)));
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

TEST(GlooCommunicator, APeerThatNeverRendezvousesIsATimeoutNamingTheAddress) {
  auto store = std::make_shared<KeyValueStore>();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    GlooCommunicator comm(options_for(0, store, milliseconds(1000)));
    ADD_FAILURE() << "the group formed without rank 1";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("bound to 127.0.0.1"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(15000));
}

// The c10d view of the store keeps c10d's semantics: get and wait throw DistStoreError after the
// store timeout, add counts, compareSet swaps.
TEST(C10dStore, KeepsC10dSemantics) {
  auto kv = std::make_shared<KeyValueStore>();
  auto store = make_c10d_store(kv, milliseconds(100));
  store->set("a", std::vector<uint8_t>{1, 2, 3});
  EXPECT_EQ(store->get("a"), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_THROW(store->get("missing"), c10::DistStoreError);
  EXPECT_THROW(store->wait({"a", "missing"}), c10::DistStoreError);
  EXPECT_EQ(store->add("n", 2), 2);
  EXPECT_EQ(store->clone()->add("n", 3), 5);  // a clone shares the store
  const std::vector<uint8_t> current{1, 2, 3}, desired{9};
  EXPECT_EQ(store->compareSet("a", current, desired), desired);
  EXPECT_TRUE(store->check({"a", "n"}));
  EXPECT_EQ(store->getNumKeys(), 2);
  EXPECT_TRUE(store->deleteKey("n"));
  EXPECT_EQ(kv->size(), 1);
}

}  // namespace
}  // namespace lf
