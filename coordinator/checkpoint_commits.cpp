// Counting checkpoint reports to commits (see header).
#include "coordinator/checkpoint_commits.h"

#include <algorithm>

namespace lf {

CheckpointCommits::Report CheckpointCommits::report(int rank, std::int64_t step,
                                                    const std::string& path, int world_size) {
  if (committed_.count(step) > 0) return Report::kAlreadyCommitted;
  std::set<int>& reported = pending_ranks_[step];
  reported.insert(rank);
  std::string& p = pending_paths_[step];
  if (p.empty() || rank == 0) p = path;  // rank 0's file names the checkpoint
  return static_cast<int>(reported.size()) < world_size ? Report::kPending : Report::kComplete;
}

void CheckpointCommits::withdraw(int rank, std::int64_t step) {
  const auto it = pending_ranks_.find(step);
  if (it != pending_ranks_.end()) it->second.erase(rank);
}

std::string CheckpointCommits::path_of(std::int64_t step) const {
  const auto it = pending_paths_.find(step);
  return it == pending_paths_.end() ? std::string() : it->second;
}

void CheckpointCommits::commit(std::int64_t step) {
  const std::string path = path_of(step);
  committed_.insert(step);
  if (step >= last_step_) {
    last_step_ = step;
    last_path_ = path;
  }
  pending_ranks_.erase(pending_ranks_.begin(), pending_ranks_.upper_bound(step));
  pending_paths_.erase(pending_paths_.begin(), pending_paths_.upper_bound(step));
}

void CheckpointCommits::drop_pending() {
  pending_ranks_.clear();
  pending_paths_.clear();
}

void CheckpointCommits::restore_committed(std::int64_t step, const std::string& path) {
  if (step < 0) return;
  committed_.insert(step);
  last_step_ = step;
  last_path_ = path;
}

void CheckpointCommits::restore_pending(std::int64_t step, int rank, const std::string& path) {
  pending_ranks_[step].insert(rank);
  std::string& p = pending_paths_[step];
  if (p.empty() || rank == 0) p = path;
}

}  // namespace lf
