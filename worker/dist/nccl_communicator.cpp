// NCCL collectives (see header). Without LF_HAVE_NCCL the constructor throws a clear error.
#include "worker/dist/nccl_communicator.h"

#include <stdexcept>
#include <string>

#ifdef LF_HAVE_NCCL
#include <c10/cuda/CUDAStream.h>
#include <mpi.h>
#include <nccl.h>
#endif

namespace lf {

#ifdef LF_HAVE_NCCL
namespace {
void check_nccl(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) {
    throw std::runtime_error(std::string("nccl: ") + what + " failed: " + ncclGetErrorString(rc));
  }
}
ncclDataType_t nccl_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kByte: return ncclUint8;
    case at::kLong: return ncclInt64;
    default: throw std::runtime_error("nccl: unsupported tensor dtype");
  }
}
void check_tensor(const at::Tensor& t) {
  if (!t.is_cuda() || !t.is_contiguous()) {
    throw std::runtime_error("nccl: collectives need contiguous CUDA tensors");
  }
}
}  // namespace

struct NcclCommunicator::Impl {
  ncclComm_t comm = nullptr;
};

NcclCommunicator::NcclCommunicator(int device) : impl_(std::make_unique<Impl>()) {
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  ncclUniqueId id;
  if (rank_ == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
  check_nccl(ncclCommInitRank(&impl_->comm, world_size_, id, rank_), "ncclCommInitRank");
}

NcclCommunicator::~NcclCommunicator() {
  if (impl_ && impl_->comm) ncclCommDestroy(impl_->comm);
}

void NcclCommunicator::allreduce_sum(at::Tensor& tensor) {
  check_tensor(tensor);
  auto stream = c10::cuda::getCurrentCUDAStream(tensor.device().index());
  check_nccl(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(),
                           nccl_type(tensor), ncclSum, impl_->comm, stream.stream()),
             "ncclAllReduce");
}

void NcclCommunicator::broadcast(at::Tensor& tensor, int root) {
  check_tensor(tensor);
  auto stream = c10::cuda::getCurrentCUDAStream(tensor.device().index());
  check_nccl(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(),
                           nccl_type(tensor), root, impl_->comm, stream.stream()),
             "ncclBroadcast");
}

void NcclCommunicator::barrier() { MPI_Barrier(MPI_COMM_WORLD); }

bool nccl_compiled_in() { return true; }

#else  // !LF_HAVE_NCCL

struct NcclCommunicator::Impl {};

NcclCommunicator::NcclCommunicator(int) {
  throw std::runtime_error(
      "nccl: this build of lorafleet has no NCCL support (configure with NCCL and CUDA found); "
      "use worker.device: cpu");
}
NcclCommunicator::~NcclCommunicator() = default;
void NcclCommunicator::allreduce_sum(at::Tensor&) {}
void NcclCommunicator::broadcast(at::Tensor&, int) {}
void NcclCommunicator::barrier() {}
bool nccl_compiled_in() { return false; }

#endif

}  // namespace lf
