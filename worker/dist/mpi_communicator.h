// Communicator over MPI_COMM_WORLD for CPU tensors (float32, float64, uint8, int64).
// MPI must be initialised (see MpiRuntime) before construction.
#pragma once

#include "worker/dist/communicator.h"

namespace lf {

// RAII MPI_Init_thread / MPI_Finalize. Rank and world size come from the launcher (mpirun).
class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  // Ends every rank of the job (used when one rank fails and others may be blocked).
  [[noreturn]] static void abort(int exit_code);

 private:
  int rank_ = 0;
  int world_size_ = 1;
};

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator();
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  void allreduce_sum(at::Tensor& tensor) override;
  void broadcast(at::Tensor& tensor, int root) override;
  void barrier() override;
  std::string backend() const override { return "mpi"; }

 private:
  int rank_ = 0;
  int world_size_ = 1;
};

}  // namespace lf
