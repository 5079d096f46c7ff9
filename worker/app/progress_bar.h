// Rank 0's progress display: a tqdm-style bar (step/total, it/s, loss, ETA) redrawn in place on
// a terminal, or one plain line every `plain_every` steps when stdout is not a TTY (logs, CI).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace lf {

class ProgressBar {
 public:
  // total: steps of the whole job; start: steps already done (resume). out: usually stdout.
  ProgressBar(std::int64_t total, std::int64_t start, std::FILE* out, bool is_tty,
              int plain_every = 10);
  // Call after each step with the completed global_step.
  void update(std::int64_t step, double loss, double lr);
  void finish();
  // Formats one line (exposed for tests); seconds are wall seconds since start.
  static std::string format(std::int64_t step, std::int64_t total, double its, double loss,
                            double eta_seconds, bool bar, int width);

 private:
  std::int64_t total_;
  std::int64_t start_;
  std::FILE* out_;
  bool is_tty_;
  int plain_every_;
  std::chrono::steady_clock::time_point t0_;
  std::int64_t last_step_ = 0;
};

}  // namespace lf
