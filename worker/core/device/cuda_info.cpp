// CUDA device queries through ATen / c10 (see header). Only this translation unit includes CUDA
// headers; it is built with LF_WITH_CUDA when LibTorch has c10_cuda.
#include "device/cuda_info.h"

#if defined(LF_WITH_CUDA)
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace lf {

#if defined(LF_WITH_CUDA)

namespace {
using c10::CachingAllocator::StatType;
constexpr auto kAggregate = static_cast<std::size_t>(StatType::AGGREGATE);

// The caching allocator exists only once CUDA is initialised: Python's torch.cuda calls
// _lazy_init() first, LibTorch's C++ API only on the first CUDA tensor; before it the
// allocator's calls throw "Invalid device argument". An index < 0 is the current device.
c10::DeviceIndex initialised_device(int device_index) {
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
  return device_index < 0 ? c10::cuda::current_device()
                          : static_cast<c10::DeviceIndex>(device_index);
}
}  // namespace

bool cuda_support_compiled() { return true; }

int cuda_compute_capability(int device_index) {
  if (at::cuda::device_count() <= device_index) return -1;
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(initialised_device(device_index));
  return p->major * 10 + p->minor;
}

CudaMemoryStats cuda_memory_stats(int device_index) {
  const auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(initialised_device(device_index));
  CudaMemoryStats out;
  out.allocated_bytes = s.allocated_bytes[kAggregate].current;
  out.peak_allocated_bytes = s.allocated_bytes[kAggregate].peak;
  out.reserved_bytes = s.reserved_bytes[kAggregate].current;
  return out;
}

void reset_cuda_peak_memory(int device_index) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(initialised_device(device_index));
}

std::int64_t cuda_total_memory(int device_index) {
  if (at::cuda::device_count() <= device_index) return 0;
  const c10::DeviceIndex index = initialised_device(device_index);
  return static_cast<std::int64_t>(at::cuda::getDeviceProperties(index)->totalGlobalMem);
}

void set_cuda_memory_fraction(double fraction, int device_index) {
  c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, initialised_device(device_index));
}

#else

bool cuda_support_compiled() { return false; }
int cuda_compute_capability(int) { return -1; }
CudaMemoryStats cuda_memory_stats(int) { return {}; }
void reset_cuda_peak_memory(int) {}
std::int64_t cuda_total_memory(int) { return 0; }
void set_cuda_memory_fraction(double, int) {}

#endif

}  // namespace lf
