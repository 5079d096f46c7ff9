// Communicator over NCCL for CUDA tensors. The unique id is created by rank 0 and broadcast
// over MPI (the launcher's bootstrap), as nccl-tests and Horovod do. Collectives run on the
// current PyTorch CUDA stream, so they are ordered with the backward pass without extra syncs.
// Compiled only when NCCL and CUDA are found (LF_HAVE_NCCL).
#pragma once

#include <memory>

#include "worker/dist/communicator.h"

namespace lf {

class NcclCommunicator : public Communicator {
 public:
  // Collective over MPI_COMM_WORLD; `device` is this rank's CUDA device index.
  // Throws std::runtime_error with the NCCL error string on failure.
  explicit NcclCommunicator(int device);
  ~NcclCommunicator() override;
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  void allreduce_sum(at::Tensor& tensor) override;
  void broadcast(at::Tensor& tensor, int root) override;
  void barrier() override;
  std::string backend() const override { return "nccl"; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int world_size_ = 1;
};

// True when this build has NCCL support compiled in.
bool nccl_compiled_in();

}  // namespace lf
