// Communicator over NCCL for CUDA tensors. The communicator is non-blocking
// (ncclConfig_t.blocking = 0): every call is followed by a wait that polls
// ncclCommGetAsyncError and the CUDA stream until the operation is done or the timeout
// (cluster.collective_timeout) passes; then ncclCommAbort releases the GPU resources and the call
// throws CollectiveError, so a dead peer or a dropped link never leaves a rank hanging in a kernel
// (as PyTorch's NCCL watchdog does with TORCH_NCCL_ASYNC_ERROR_HANDLING). The unique id is rank
// 0's: broadcast over MPI under mpirun (as nccl-tests and Horovod), or relayed by the coordinator
// in Kubernetes-native launches. Compiled only when NCCL and CUDA are found (LF_HAVE_NCCL).
#pragma once

#include <memory>
#include <string>

#include "worker/dist/communicator.h"

namespace lf {

class NcclCommunicator : public Communicator {
 public:
  // Under mpirun: collective over MPI_COMM_WORLD; `device` is this rank's CUDA device index.
  // `init_timeout` bounds forming the communicator (the rendezvous timeout; ranks start at their
  // own pace); later calls use set_timeout's value.
  explicit NcclCommunicator(int device,
                            std::chrono::milliseconds init_timeout = std::chrono::seconds(300));
  // Without MPI: `unique_id` is rank 0's new_unique_id(), relayed to every rank.
  NcclCommunicator(int device, int rank, int world_size, const std::string& unique_id,
                   std::chrono::milliseconds init_timeout = std::chrono::seconds(300));
  ~NcclCommunicator() override;
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  void allreduce_sum(at::Tensor& tensor) override;
  void broadcast(at::Tensor& tensor, int root) override;
  void barrier() override;
  std::string backend() const override { return "nccl"; }
  void set_timeout(std::chrono::milliseconds timeout) override;

  // A fresh ncclUniqueId as bytes (rank 0, before registration). Throws without NCCL.
  static std::string new_unique_id();

 private:
  void init(int device, const std::string& unique_id, std::chrono::milliseconds init_timeout);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int world_size_ = 1;
};

// True when this build has NCCL support compiled in.
bool nccl_compiled_in();

}  // namespace lf
