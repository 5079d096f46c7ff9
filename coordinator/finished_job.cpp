#include "coordinator/finished_job.h"

namespace lf {

std::optional<FinishedJob> finished_job_of(const StoredJob& stored, std::int64_t max_train_steps) {
  if (!stored.done || stored.exit_code != 0 || stored.world_size <= 0) return std::nullopt;
  if (stored.last_committed_step < 0 || stored.last_committed_path.empty()) return std::nullopt;
  if (stored.last_committed_step < max_train_steps) return std::nullopt;  // stopped early
  FinishedJob f;
  f.global_step = stored.last_committed_step;
  f.checkpoint = stored.last_committed_path;
  f.reason = stored.done_reason;
  f.world_size = stored.world_size;
  f.max_train_steps = max_train_steps;
  return f;
}

std::string describe(const FinishedJob& f) {
  return "the job had already finished" + (f.reason.empty() ? "" : " (" + f.reason + ")") +
         "; final checkpoint " + f.checkpoint + " at global_step " + std::to_string(f.global_step);
}

}  // namespace lf
