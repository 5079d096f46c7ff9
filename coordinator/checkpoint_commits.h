// CheckpointCommits: which checkpoint steps every rank of the running generation has reported
// durable, and the newest committed one. A step is committed once all world_size ranks reported
// it (and the service made that durable); in lockstep training an older pending step can never
// complete after a newer one committed, so it is dropped then. A plain class: no gRPC, no
// locking, no persistence (CoordinatorService records the reports and commits in its
// StateStore, and answers the ranks).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace lf {

class CheckpointCommits {
 public:
  // What one rank's report of `step` completed.
  enum class Report {
    kAlreadyCommitted,  // a retry after the commit: nothing changes
    kPending,           // recorded; other ranks have not reported the step yet
    kComplete,          // the last rank reported: call commit() once it is durable
  };
  // Rank `rank`'s part of checkpoint `step` is durable at `path` (rank 0's path names the
  // checkpoint).
  Report report(int rank, std::int64_t step, const std::string& path, int world_size);
  // Takes back `rank`'s report of `step` (recording the commit failed: the rank retries).
  void withdraw(int rank, std::int64_t step);
  // The path the checkpoint of a completed `step` goes by.
  std::string path_of(std::int64_t step) const;
  // `step` is committed (after report() said kComplete and it was made durable): it becomes the
  // newest when it is, and older pending steps are dropped.
  void commit(std::int64_t step);
  // A new generation starts: pending reports of the old one are dropped.
  void drop_pending();

  // Forgets everything (a finished job's record left for a fresh one).
  void clear() { *this = CheckpointCommits(); }
  // A restarted coordinator: what its durable state recorded.
  void restore_committed(std::int64_t step, const std::string& path);
  void restore_pending(std::int64_t step, int rank, const std::string& path);

  std::int64_t last_committed_step() const { return last_step_; }  // -1: none
  const std::string& last_committed_path() const { return last_path_; }

 private:
  std::map<std::int64_t, std::set<int>> pending_ranks_;  // step -> ranks that reported it
  std::map<std::int64_t, std::string> pending_paths_;    // step -> its path
  std::set<std::int64_t> committed_;
  std::int64_t last_step_ = -1;
  std::string last_path_;
};

}  // namespace lf
