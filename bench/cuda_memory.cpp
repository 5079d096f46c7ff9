// CUDA peak-memory query for the benchmarks, kept in its own translation unit because only it
// includes c10/cuda headers (compiled with LF_BENCH_WITH_CUDA when the LibTorch has c10_cuda).
#include <cstdint>

#include "train_step_bench.h"

#if defined(LF_BENCH_WITH_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace lf {

int64_t cuda_peak_allocated_bytes(int device_index) {
#if defined(LF_BENCH_WITH_CUDA)
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(
      static_cast<c10::DeviceIndex>(device_index));
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
#else
  (void)device_index;
  return -1;
#endif
}

}  // namespace lf
