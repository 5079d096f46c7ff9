// Peak memory of each phase of a rank's run (model load, caches, training), for the log: on CUDA
// the caching allocator's peak allocated bytes within the phase, on the CPU the process's peak
// resident set so far (it cannot be reset).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <c10/core/Device.h>

namespace lf {

class PhaseMemory {
 public:
  // Starts the first phase now.
  explicit PhaseMemory(at::Device device);
  // Ends the running phase, named `phase`, recording its peak, and starts the next one.
  void end_phase(const std::string& phase);
  // "model load 812 MiB, caches 830 MiB (cuda:0 peak allocated)", or with "(peak RSS)" on the
  // CPU; "" before any phase ended.
  std::string summary() const;

 private:
  double peak_mib() const;
  at::Device device_;
  std::vector<std::pair<std::string, double>> phases_;
};

}  // namespace lf
