// NCCL collectives (see header). Without LF_HAVE_NCCL the constructors throw a clear error.
#include "worker/dist/nccl_communicator.h"

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#ifdef LF_HAVE_NCCL
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#endif

namespace lf {

#ifdef LF_HAVE_NCCL
namespace {
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
  int device = 0;
  bool aborted = false;
  std::chrono::milliseconds timeout{60000};

  [[noreturn]] void fail(const std::string& what, const std::string& why) {
    if (comm != nullptr && !aborted) {
      ncclCommAbort(comm);  // frees the communicator and unblocks its kernels
      aborted = true;
      comm = nullptr;
    }
    throw CollectiveError("nccl: " + what + " " + why);
  }

  // Polls until the communicator has no operation in progress (non-blocking mode) and, with a
  // stream, until the stream's work is done; aborts on an async error or at the timeout.
  void wait(const std::string& what, ncclResult_t rc, cudaStream_t stream) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto timed_out = [&] { return std::chrono::steady_clock::now() >= deadline; };
    while (true) {
      if (rc == ncclInProgress) {
        ncclResult_t state = ncclInProgress;
        ncclCommGetAsyncError(comm, &state);
        rc = state;
      }
      if (rc != ncclInProgress && rc != ncclSuccess) {
        fail(what, std::string("failed: ") + ncclGetErrorString(rc) +
                       (rc == ncclRemoteError ? " (a peer is gone)" : ""));
      }
      if (rc == ncclSuccess) {
        if (stream == nullptr) return;
        const cudaError_t q = cudaStreamQuery(stream);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady) {
          fail(what, std::string("failed on the CUDA stream: ") + cudaGetErrorString(q));
        }
        ncclResult_t state = ncclSuccess;
        ncclCommGetAsyncError(comm, &state);
        if (state != ncclSuccess && state != ncclInProgress) {
          fail(what, std::string("failed: ") + ncclGetErrorString(state));
        }
      }
      if (timed_out()) {
        fail(what, "did not complete within " + std::to_string(timeout.count() / 1000.0) +
                       " s (cluster.collective_timeout): a peer is gone or the network dropped; "
                       "communicator aborted");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
};

void NcclCommunicator::init(int device, const std::string& unique_id,
                            std::chrono::milliseconds init_timeout) {
  impl_->timeout = init_timeout;
  if (unique_id.size() != sizeof(ncclUniqueId)) {
    throw std::runtime_error("nccl: the relayed unique id has " + std::to_string(unique_id.size()) +
                             " bytes, expected " + std::to_string(sizeof(ncclUniqueId)));
  }
  ncclUniqueId id;
  std::memcpy(&id, unique_id.data(), sizeof(id));
  impl_->device = device;
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t rc = ncclCommInitRankConfig(&impl_->comm, world_size_, id, rank_, &config);
  impl_->wait("ncclCommInitRankConfig", rc, nullptr);
}

NcclCommunicator::NcclCommunicator(int device, std::chrono::milliseconds init_timeout)
    : impl_(std::make_unique<Impl>()) {
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  std::string id(sizeof(ncclUniqueId), '\0');
  if (rank_ == 0) id = new_unique_id();
  MPI_Bcast(id.data(), static_cast<int>(id.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
  init(device, id, init_timeout);
}

NcclCommunicator::NcclCommunicator(int device, int rank, int world_size,
                                   const std::string& unique_id,
                                   std::chrono::milliseconds init_timeout)
    : impl_(std::make_unique<Impl>()), rank_(rank), world_size_(world_size) {
  init(device, unique_id, init_timeout);
}

NcclCommunicator::~NcclCommunicator() {
  if (impl_ && impl_->comm && !impl_->aborted) ncclCommDestroy(impl_->comm);
}

std::string NcclCommunicator::new_unique_id() {
  ncclUniqueId id;
  const ncclResult_t rc = ncclGetUniqueId(&id);
  if (rc != ncclSuccess) {
    throw std::runtime_error(std::string("nccl: ncclGetUniqueId failed: ") +
                             ncclGetErrorString(rc));
  }
  return std::string(reinterpret_cast<const char*>(&id), sizeof(id));
}

void NcclCommunicator::set_timeout(std::chrono::milliseconds timeout) { impl_->timeout = timeout; }

void NcclCommunicator::allreduce_sum(at::Tensor& tensor) {
  check_tensor(tensor);
  if (impl_->aborted) throw CollectiveError("nccl: communicator was aborted");
  auto stream = c10::cuda::getCurrentCUDAStream(tensor.device().index());
  const ncclResult_t rc = ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(),
                                        nccl_type(tensor), ncclSum, impl_->comm, stream.stream());
  impl_->wait("allreduce", rc, stream.stream());
}

void NcclCommunicator::broadcast(at::Tensor& tensor, int root) {
  check_tensor(tensor);
  if (impl_->aborted) throw CollectiveError("nccl: communicator was aborted");
  auto stream = c10::cuda::getCurrentCUDAStream(tensor.device().index());
  const ncclResult_t rc = ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(),
                                        nccl_type(tensor), root, impl_->comm, stream.stream());
  impl_->wait("broadcast", rc, stream.stream());
}

void NcclCommunicator::barrier() {
  // A one-element allreduce on this rank's device: works with and without MPI.
  at::Tensor t =
      at::zeros({1}, at::TensorOptions()
                         .dtype(at::kFloat)
                         .device(at::kCUDA, static_cast<c10::DeviceIndex>(impl_->device)));
  allreduce_sum(t);
}

bool nccl_compiled_in() { return true; }

#else  // !LF_HAVE_NCCL

struct NcclCommunicator::Impl {};

namespace {
[[noreturn]] void no_nccl() {
  throw std::runtime_error(
      "nccl: this build of lorafleet has no NCCL support (configure with NCCL and CUDA found); "
      "use worker.device: cpu");
}
}  // namespace

NcclCommunicator::NcclCommunicator(int, std::chrono::milliseconds) { no_nccl(); }
NcclCommunicator::NcclCommunicator(int, int, int, const std::string&, std::chrono::milliseconds) {
  no_nccl();
}
NcclCommunicator::~NcclCommunicator() = default;
std::string NcclCommunicator::new_unique_id() { no_nccl(); }
void NcclCommunicator::set_timeout(std::chrono::milliseconds) {}
void NcclCommunicator::allreduce_sum(at::Tensor&) {}
void NcclCommunicator::broadcast(at::Tensor&, int) {}
void NcclCommunicator::barrier() {}
bool nccl_compiled_in() { return false; }

#endif

}  // namespace lf
