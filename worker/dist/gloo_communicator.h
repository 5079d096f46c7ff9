// Communicator over Gloo for CPU tensors, for Kubernetes-native launches (no MPI): LibTorch's own
// c10d ProcessGroupGloo, rendezvoused through a c10d TCPStore that rank 0 hosts and whose
// address the coordinator relays to every rank (as torchrun's MASTER_ADDR/MASTER_PORT, minus the
// extra service). Every collective is bounded by `timeout` (Gloo's own timeout): a dead peer or a
// dropped link makes it throw CollectiveError instead of hanging.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "worker/dist/communicator.h"

namespace lf {

// Rank 0's c10d TCPStore server, started before registration so its address can be relayed.
class GlooStoreServer {
 public:
  // Listens on all interfaces, on `port` (0: an ephemeral port). Throws CollectiveError naming
  // the port when it cannot listen.
  GlooStoreServer(int world_size, int port, std::chrono::milliseconds timeout);
  ~GlooStoreServer();
  int port() const;

 private:
  friend class GlooCommunicator;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct GlooOptions {
  int rank = 0;
  int world_size = 1;
  std::string store_address;  // "host:port" of rank 0's GlooStoreServer
  std::string local_address;  // address (or hostname) this rank's Gloo transport binds to
  std::chrono::milliseconds timeout{60000};  // cluster.collective_timeout
};

class GlooCommunicator : public Communicator {
 public:
  // Connects to the store (rank 0 passes its own server) and forms the group; blocks until all
  // world_size ranks have joined or `timeout` passed. Throws CollectiveError on failure, naming
  // the store address.
  GlooCommunicator(const GlooOptions& options, GlooStoreServer* server);
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
