// CoordinatorService on a restarted coordinator: the job restored from its StateStore (the
// running or ended generation, restart counters, the committed checkpoint), or a finished job
// reported as finished. Kept apart from the handlers in service.cpp: it runs once, from the
// constructor.
#include <limits>
#include <stdexcept>

#include "common/util/log.h"
#include "coordinator/service.h"
#include "proto/proto_convert.h"

namespace lf {

void CoordinatorService::restore(const StoredJob& stored) {
  const std::string& path = store_->path();
  if (stored.world_size > 0) {
    if (members_.world_size_fixed() && stored.world_size != members_.world_size()) {
      // Resized between coordinator runs: the old generation cannot continue; the new group
      // forms at the new size and resumes the last committed checkpoint (epoch plan lineage).
      LF_WARN("coordinator state " << path << ": the job ran with world_size " << stored.world_size
                                   << ", now " << members_.world_size() << ": generation "
                                   << stored.generation
                                   << " is not restored; the group re-forms at the new size");
    }
    if (!members_.world_size_fixed()) {
      const JobSchedule s = job_.set_world_size(stored.world_size);
      members_.set_world_size(stored.world_size);
      metrics_.set_job(s.world_size, s.max_train_steps, s.num_epochs);
    }
    // Plans are a pure function of (dataset, seed, world_size, epoch): the newest one issued
    // must come out the same, or the workers would go on training on other data.
    const StoredPlan* newest = nullptr;
    for (const StoredPlan& p : stored.plans) {
      if (p.world_size != members_.world_size()) continue;
      if (newest == nullptr || p.epoch > newest->epoch) newest = &p;
      plans_recorded_.insert(p.epoch);
    }
    if (newest != nullptr && epoch_plan_digest(*job_.epoch_plan(newest->epoch)) != newest->digest) {
      throw std::runtime_error("coordinator state " + path + ": the plan of epoch " +
                               std::to_string(newest->epoch) +
                               " differs from the one issued before the restart (has the dataset "
                               "changed?); remove the file to start the job afresh");
    }
  }
  members_.restore_counters(stored.generation, stored.restarts);
  commits_.restore_committed(stored.last_committed_step, stored.last_committed_path);
  if (stored.last_committed_step >= 0) metrics_.checkpoint_committed(stored.last_committed_step);
  for (const auto& [cause, n] : stored.restarts) metrics_.add_restarts(cause, n);
  metrics_.set_generation(stored.generation);
  const Clock::time_point now = Clock::now();
  if (stored.state == GenerationState::kRunning && members_.world_size() > 0 &&
      static_cast<int>(stored.ranks.size()) == members_.world_size()) {
    restore_running_generation(stored, now);
  } else if (stored.state == GenerationState::kEnded ||
             (stored.state == GenerationState::kRunning && stored.generation > 0)) {
    members_.restore_ended(
        stored.end_cause.empty() ? "rank_restarted" : stored.end_cause,
        stored.end_detail.empty() ? "the coordinator restarted" : stored.end_detail, now);
  }
  LF_INFO("restored job state from " << path << ": generation " << stored.generation
                                     << ", world_size " << members_.world_size()
                                     << ", last committed step " << commits_.last_committed_step());
}

void CoordinatorService::restore_running_generation(const StoredJob& stored,
                                                    Clock::time_point now) {
  const std::string& path = store_->path();
  if (!assignment_.ParseFromString(stored.assignment)) {
    throw std::runtime_error("coordinator state " + path +
                             ": the stored assignment of generation " +
                             std::to_string(stored.generation) + " does not parse");
  }
  if (assignment_.has_resume_point()) {
    // The generation resumed a checkpoint: its schedule continues that checkpoint's plan.
    const CheckpointPosition p = checkpoint_position_from_proto(
        assignment_.resume_point(), "coordinator state " + path + " (resume point)");
    const JobSchedule resumed = job_.set_resume(p);
    metrics_.set_job(resumed.world_size, resumed.max_train_steps, resumed.num_epochs);
  }
  for (const StoredRank& r : stored.ranks) {
    if (r.rank < 0 || r.rank >= members_.world_size()) continue;
    Membership::Rank& s = members_.rank(r.rank);
    s.registered = true;
    s.hostname = r.hostname;
    s.pid = r.pid;
    s.device = r.device;
    s.metrics_port = r.metrics_port;
    s.finished = r.finished;
    s.ok = r.ok;
    s.preempted = r.preempted;
    if (auto it = stored.progress.find(r.rank); it != stored.progress.end()) {
      s.global_step = it->second.global_step;
      s.samples = it->second.samples;
    }
  }
  for (const auto& [step, by_rank] : stored.pending_checkpoints) {
    for (const auto& [rank, p] : by_rank) commits_.restore_pending(step, rank, p);
  }
  members_.restore_running(now);  // leases restart: the workers had no one to talk to
  // Keys set before the restart are gone: a group still forming its Gloo mesh times out and
  // re-forms (exit 75); a formed one never asks again.
  open_rendezvous_store();
}

bool CoordinatorService::restore_finished(const StoredJob& stored) {
  if (members_.world_size_fixed() && stored.world_size != members_.world_size()) return false;
  const JobSchedule s = job_.set_world_size(stored.world_size);
  if (!members_.world_size_fixed()) job_.clear_world_size();
  finished_before_ = finished_job_of(stored, s.max_train_steps);
  if (!finished_before_) return false;
  metrics_.set_job(s.world_size, s.max_train_steps, s.num_epochs);
  commits_.restore_committed(finished_before_->global_step, finished_before_->checkpoint);
  metrics_.checkpoint_committed(finished_before_->global_step);
  const double unknown = std::numeric_limits<double>::quiet_NaN();  // loss, lr: not stored
  metrics_.set_progress(finished_before_->global_step, 0, unknown, unknown, 0.0);
  members_.set_rendezvous_deadline(Clock::now() + options_.rendezvous_timeout);
  LF_INFO("coordinator state " << store_->path() << ": " << describe(*finished_before_)
                               << "; exiting 0 unless a group registers within "
                               << seconds_text(options_.rendezvous_timeout)
                               << " (cluster.rendezvous_timeout_seconds), e.g. to --resume "
                                  "an older checkpoint");
  return true;
}

void CoordinatorService::leave_finished_record() {
  LF_INFO("a group registers on the finished job: starting a fresh job record in "
          << store_->path() << " (the checkpoints stay for --resume)");
  finished_before_.reset();
  commits_.clear();
  members_.set_rendezvous_deadline(std::nullopt);
  persist("a fresh job record", [](StateStore& st) { st.start_fresh_record(); });
}

}  // namespace lf
