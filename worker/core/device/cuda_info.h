// What lorafleet asks of a CUDA device outside LibTorch's public C++ API: its compute
// capability, the caching allocator's counters (peak memory per phase, the benchmarks) and its
// memory cap. Compiled with CUDA support when LibTorch has c10_cuda (LF_WITH_CUDA); without it
// every query answers "no CUDA" (-1 / zeros) and the setters do nothing. With CUDA each call
// initialises LibTorch's CUDA state first (as torch.cuda's _lazy_init), so any may come before
// the first CUDA tensor; a device_index < 0 (at::Device("cuda") without an index) means the
// current device.
#pragma once

#include <cstdint>

namespace lf {

struct CudaMemoryStats {
  std::int64_t allocated_bytes = 0;       // held by tensors now
  std::int64_t peak_allocated_bytes = 0;  // since the last reset_cuda_peak_memory
  std::int64_t reserved_bytes = 0;        // held by the caching allocator
};

// True when this build can talk to CUDA (LibTorch with c10_cuda).
bool cuda_support_compiled();

// The device's compute capability as major * 10 + minor (H200: 90), or -1 without CUDA.
int cuda_compute_capability(int device_index);

// The caching allocator's counters of `device_index` (zeros without CUDA).
CudaMemoryStats cuda_memory_stats(int device_index);
void reset_cuda_peak_memory(int device_index);

// The device's total memory in bytes (0 without CUDA).
std::int64_t cuda_total_memory(int device_index);

// Caps what the caching allocator may take on `device_index` to fraction x its total memory
// (torch.cuda.set_per_process_memory_fraction); an allocation beyond it fails as out of memory.
void set_cuda_memory_fraction(double fraction, int device_index);

}  // namespace lf
