// Per-phase peak memory (see header).
#include "worker/train/phase_memory.h"

#include <sys/resource.h>

#include <cstdio>

#include "worker/core/device/cuda_info.h"

namespace lf {
namespace {
constexpr double kMiB = 1024.0 * 1024.0;
}  // namespace

PhaseMemory::PhaseMemory(at::Device device) : device_(device) {
  if (device_.is_cuda()) reset_cuda_peak_memory(device_.index());
}

double PhaseMemory::peak_mib() const {
  if (device_.is_cuda()) {
    return static_cast<double>(cuda_memory_stats(device_.index()).peak_allocated_bytes) / kMiB;
  }
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0 / kMiB;  // Linux reports KiB
}

void PhaseMemory::end_phase(const std::string& phase) {
  phases_.emplace_back(phase, peak_mib());
  if (device_.is_cuda()) reset_cuda_peak_memory(device_.index());
}

std::string PhaseMemory::summary() const {
  std::string s;
  for (const auto& [name, mib] : phases_) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%s%s %.0f MiB", s.empty() ? "" : ", ", name.c_str(), mib);
    s += buf;
  }
  if (s.empty()) return s;
  return s + (device_.is_cuda() ? " (" + device_.str() + " peak allocated)" : " (peak RSS)");
}

}  // namespace lf
