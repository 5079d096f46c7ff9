// Communicator over Gloo for CPU tensors, for Kubernetes-native launches (no MPI): LibTorch's own
// c10d ProcessGroupGloo, rendezvoused through a key-value store that every rank reaches, in
// practice the coordinator's authenticated one (worker/rpc/coordinator_rendezvous.h), as
// torchrun's c10d rendezvous uses its agent's store; no rank listens for the rendezvous. Each
// rank's Gloo transport binds only to `local_address`, which it advertises to its peers through
// the store. Every collective is bounded by `timeout` (Gloo's own timeout): a dead peer or a
// dropped link makes it throw CollectiveError instead of hanging.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/rendezvous/key_value_rendezvous.h"
#include "worker/dist/communicator.h"

namespace lf {

struct GlooOptions {
  int rank = 0;
  int world_size = 1;
  // The generation's rendezvous store, shared by every rank of the group.
  std::shared_ptr<KeyValueRendezvous> store;
  // Address (or hostname) this rank's Gloo transport binds to and advertises; never empty.
  std::string local_address;
  std::chrono::milliseconds timeout{60000};  // cluster.collective_timeout
};

class GlooCommunicator : public Communicator {
 public:
  // Forms the group through options.store; blocks until all world_size ranks have joined or
  // `timeout` passed. Throws CollectiveError on failure (naming the local address),
  // GroupSupersededError / CoordinatorError as the store throws them.
  explicit GlooCommunicator(const GlooOptions& options);
  ~GlooCommunicator() override;
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  void allreduce_sum(at::Tensor& tensor) override;
  void broadcast(at::Tensor& tensor, int root) override;
  void barrier() override;
  std::string backend() const override { return "gloo"; }
  void set_timeout(std::chrono::milliseconds timeout) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int world_size_ = 1;
};

}  // namespace lf
