// Collective operations between the ranks of one training job. Implementations: MPI on CPU
// tensors (mpi_communicator), NCCL on CUDA tensors (nccl_communicator). All calls are
// collective and blocking: every rank must call them in the same order with tensors of the
// same shape and dtype. Not thread-safe: call from the training thread only.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <stdexcept>
#include <string>

namespace lf {

// A collective failed or did not complete within cluster.collective_timeout: a peer died or the
// network between ranks dropped. The group cannot continue; the worker exits with
// kExitPeerLost so its supervisor restarts the group from the last committed checkpoint.
class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // In-place elementwise sum over ranks of a contiguous float32 tensor. Throws CollectiveError
  // (or std::runtime_error for misuse) naming the backend and the error on failure.
  virtual void allreduce_sum(at::Tensor& tensor) = 0;
  // In-place copy of root's contiguous tensor to every rank.
  virtual void broadcast(at::Tensor& tensor, int root) = 0;
  virtual void barrier() = 0;
  virtual std::string backend() const = 0;  // "mpi" | "nccl" | "gloo"
  // The longest any later collective may take (backends with their own timeouts apply it;
  // TimedCommunicator enforces it for all). Setup collectives (initial broadcast, the barrier
  // after latent caching) run under the rendezvous timeout, training steps under
  // cluster.collective_timeout.
  virtual void set_timeout(std::chrono::milliseconds timeout) { (void)timeout; }
};

}  // namespace lf
