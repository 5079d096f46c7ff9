// Host <-> device copies of streamed weights (see header). Only this translation unit of the
// offload code includes CUDA headers; it is built with LF_WITH_CUDA when LibTorch has c10_cuda.
#include "offload/transfer_engine.h"

#include <deque>
#include <stdexcept>

#include <ATen/ATen.h>

#if defined(LF_WITH_CUDA)
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace lf {
namespace {

class SynchronousEngine : public TransferEngine {
 public:
  explicit SynchronousEngine(at::Device device) : device_(device) {}
  at::Tensor host_copy(const at::Tensor& weight) override {
    return weight.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
  }
  std::shared_ptr<void> start(const std::vector<at::Tensor>& host,
                              std::vector<at::Tensor>* device_copies) override {
    device_copies->clear();
    for (const at::Tensor& h : host) device_copies->push_back(h.to(device_, false, true));
    return nullptr;
  }
  void wait(const std::shared_ptr<void>&, const std::vector<at::Tensor>&) override {}
  void released() override {}
  void wait_for_released(std::size_t) override {}
  void release_cached_memory() override {}

 private:
  at::Device device_;
};

#if defined(LF_WITH_CUDA)
class CudaEngine : public TransferEngine {
 public:
  explicit CudaEngine(at::Device device)
      : device_(device), side_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false,
                                                             device.index())) {}
  at::Tensor host_copy(const at::Tensor& weight) override {
    return weight.to(at::kCPU).pin_memory();
  }
  std::shared_ptr<void> start(const std::vector<at::Tensor>& host,
                              std::vector<at::Tensor>* device_copies) override {
    auto done = std::make_shared<at::cuda::CUDAEvent>();
    c10::cuda::CUDAStreamGuard on_side(side_);
    device_copies->clear();
    for (const at::Tensor& h : host) {
      device_copies->push_back(h.to(device_, /*non_blocking=*/true));
    }
    done->record(side_);
    return done;
  }
  void wait(const std::shared_ptr<void>& ticket,
            const std::vector<at::Tensor>& device_copies) override {
    const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device_.index());
    if (ticket) static_cast<at::cuda::CUDAEvent*>(ticket.get())->block(compute);
    for (const at::Tensor& d : device_copies) {
      c10::cuda::CUDACachingAllocator::recordStream(d.storage().data_ptr(), compute);
    }
  }
  void released() override {
    auto done = std::make_unique<at::cuda::CUDAEvent>();
    done->record(c10::cuda::getCurrentCUDAStream(device_.index()));
    released_.push_back(std::move(done));
  }
  void wait_for_released(std::size_t n) override {
    while (!released_.empty() && released_.front()->query()) released_.pop_front();
    while (released_.size() > n) {
      released_.front()->synchronize();
      released_.pop_front();
    }
  }
  void release_cached_memory() override { c10::cuda::CUDACachingAllocator::emptyCache(); }

 private:
  at::Device device_;
  c10::cuda::CUDAStream side_;
  std::deque<std::unique_ptr<at::cuda::CUDAEvent>> released_;  // oldest first
};
#endif

}  // namespace

std::unique_ptr<TransferEngine> make_transfer_engine(at::Device device) {
  if (!device.is_cuda()) return std::make_unique<SynchronousEngine>(device);
#if defined(LF_WITH_CUDA)
  return std::make_unique<CudaEngine>(device);
#else
  throw std::runtime_error("weight streaming to " + device.str() +
                           ": this build of lorafleet has no CUDA support");
#endif
}

}  // namespace lf
