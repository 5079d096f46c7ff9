// MPI collectives on CPU tensors. MPI_Allreduce with MPI_SUM over a fixed communicator and
// message size is deterministic for a given world size, which the byte-identical resume relies on.
#include "worker/dist/mpi_communicator.h"

#include <mpi.h>

#include <ATen/ATen.h>
#include <stdexcept>
#include <string>

namespace lf {
namespace {

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw std::runtime_error(std::string("mpi: ") + what + " failed: " + std::string(msg, len));
}

MPI_Datatype mpi_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kByte: return MPI_UINT8_T;
    case at::kLong: return MPI_INT64_T;
    default:
      throw std::runtime_error("mpi: unsupported tensor dtype " +
                               std::string(c10::toString(t.scalar_type())));
  }
}

void check_tensor(const at::Tensor& t, const char* op) {
  if (!t.is_cpu() || !t.is_contiguous()) {
    throw std::runtime_error(std::string("mpi: ") + op +
                             " needs a contiguous CPU tensor (use NCCL for CUDA tensors)");
  }
}

}  // namespace

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int provided = 0;
  check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  // Errors are returned (and turned into exceptions) instead of aborting inside MPI.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void MpiRuntime::abort(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

MpiCommunicator::MpiCommunicator() {
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
}

void MpiCommunicator::allreduce_sum(at::Tensor& tensor) {
  check_tensor(tensor, "allreduce");
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, tensor.data_ptr(), static_cast<int>(tensor.numel()),
                          mpi_type(tensor), MPI_SUM, MPI_COMM_WORLD),
            "MPI_Allreduce");
}

void MpiCommunicator::broadcast(at::Tensor& tensor, int root) {
  check_tensor(tensor, "broadcast");
  check_mpi(MPI_Bcast(tensor.data_ptr(), static_cast<int>(tensor.numel()), mpi_type(tensor), root,
                      MPI_COMM_WORLD),
            "MPI_Bcast");
}

void MpiCommunicator::barrier() { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

}  // namespace lf
