// CoordinatorService: what the ranks report once training (progress and heartbeats, durable
// checkpoints, their end) and what operators ask (stop, cancel). Kept apart from the
// registration and the job's lifecycle in service.cpp.
#include <algorithm>

#include "common/util/exit_codes.h"
#include "common/util/log.h"
#include "coordinator/service.h"

namespace lf {
namespace pb = lorafleet::v1;

grpc::Status CoordinatorService::ReportProgress(grpc::ServerContext* context,
                                                const pb::ProgressReport* request,
                                                pb::ProgressAck* response) {
  if (grpc::Status st = auth_.check(*context, "ReportProgress"); !st.ok()) return st;
  metrics_.count_rpc("ReportProgress");
  std::lock_guard<std::mutex> lock(mutex_);
  const int rank = request->rank();
  // A report without a generation (an older client) belongs to the newest one.
  const std::uint64_t g =
      request->generation() != 0 ? request->generation() : members_.generation();
  if (auto refused = members_.check_generation(g, rank, "ReportProgress")) {
    // Answered, not refused: the heartbeat of a superseded group learns it must stop.
    response->set_stop(true);
    response->set_stop_reason(refused->message);
    return grpc::Status::OK;
  }
  if (grpc::Status st = status_of(members_.check_running_rank(rank, "ReportProgress")); !st.ok())
    return st;
  Membership::Rank& s = members_.rank(rank);
  const Clock::time_point now = Clock::now();
  metrics_.add_samples(request->samples() - s.samples);
  s.last_seen = now;
  s.stall_warned = false;
  s.global_step = request->global_step();
  s.epoch = request->epoch();
  s.loss = request->loss();
  s.learning_rate = request->learning_rate();
  s.samples = std::max(s.samples, request->samples());
  s.samples_per_second = request->samples_per_second();
  s.step_seconds = request->timings().step_seconds();
  // Rank 0's reports only: every rank reports the same global loss, and a slower rank's report
  // of an earlier step would read as a re-run and drop the later points.
  if (rank == 0 && s.global_step > 0) {
    history_.add({s.global_step, request->loss(), request->learning_rate()});
  }
  if (request->validation_step() > 0 && request->validation_step() != validation_step_) {
    validation_step_ = request->validation_step();
    validation_loss_ = request->validation_loss();
    validation_history_.add({validation_step_, validation_loss_, 0.0});
    metrics_.set_validation_loss(validation_loss_);
  }
  progress_dirty_ = true;
  metrics_.set_rank_progress(
      rank, s.global_step, s.samples_per_second, request->timings().step_seconds(),
      request->timings().allreduce_seconds(), request->timings().data_wait_seconds());
  update_progress_metrics();
  // The membership gauges (every rank's last-seen age) are the ticker's to refresh: doing it
  // here made every step cost O(world_size^2) over all ranks' reports.
  if (done_ || shutting_down_) {
    response->set_stop(true);
    response->set_stop_reason(done_ && !shutting_down_ ? "the job has ended"
                                                       : "the coordinator is shutting down");
  }
  fill_operator_requests(response);
  return grpc::Status::OK;
}

void CoordinatorService::fill_operator_requests(pb::ProgressAck* ack) const {
  if (control_ == nullptr) return;
  const OperatorRequests r = control_->requests();
  ack->set_operator_stop(r.stop);
  ack->set_operator_cancel(r.cancel);
  ack->set_sample_now_id(r.sample_now);
  ack->set_operator_reason(r.reason);
}

void CoordinatorService::finish_cancelled(const std::string& how) {
  const std::string reason = control_ != nullptr ? control_->requests().reason : "cancel";
  const std::int64_t last = commits_.last_committed_step();
  const std::string checkpoint = last >= 0 ? "the checkpoint of global_step " +
                                                 std::to_string(last) + " stays the resume point"
                                           : "no checkpoint was committed";
  finish_job(kExitCancelled, "cancelled (" + reason + "; " + how + "); " + checkpoint);
}

void CoordinatorService::on_cancel_requested() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_) return;
  if (!members_.running()) finish_cancelled("no generation was training");
}

void CoordinatorService::on_stop_requested() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_ || members_.generation() > 0 || members_.running()) return;
  finish_job(0, "stopped before any rank trained (" +
                    (control_ != nullptr ? control_->requests().reason : std::string("stop")) +
                    "): nothing to checkpoint");
}

grpc::Status CoordinatorService::CommitCheckpoint(grpc::ServerContext* context,
                                                  const pb::CheckpointReport* request,
                                                  pb::CheckpointAck* response) {
  if (grpc::Status st = auth_.check(*context, "CommitCheckpoint"); !st.ok()) return st;
  metrics_.count_rpc("CommitCheckpoint");
  std::lock_guard<std::mutex> lock(mutex_);
  const int rank = request->rank();
  const std::int64_t step = request->global_step();
  if (grpc::Status st =
          status_of(members_.check_generation(request->generation(), rank, "CommitCheckpoint"));
      !st.ok()) {
    return st;
  }
  if (grpc::Status st = status_of(members_.check_running_rank(rank, "CommitCheckpoint"));
      !st.ok()) {
    return st;
  }
  if (step < 0) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "CommitCheckpoint from rank " + std::to_string(rank) +
                ": global_step must be >= 0, got " + std::to_string(step)};
  }
  members_.rank(rank).last_seen = Clock::now();
  switch (commits_.report(rank, step, request->path(), members_.world_size())) {
    case CheckpointCommits::Report::kAlreadyCommitted:
      response->set_committed(true);  // a retry after the commit
      return grpc::Status::OK;
    case CheckpointCommits::Report::kPending:
      LF_DEBUG("checkpoint step " << step << ": rank " << rank << " durable");
      persist("a checkpoint report",
              [&](StateStore& st) { st.record_checkpoint_report(step, rank, request->path()); });
      response->set_committed(false);
      return grpc::Status::OK;
    case CheckpointCommits::Report::kComplete: break;
  }
  const std::string path = commits_.path_of(step);
  // Durable before acknowledged: a restarted coordinator must know every commit it confirmed.
  if (store_ != nullptr) {
    try {
      store_->record_commit(step, path);
    } catch (const std::exception& e) {
      commits_.withdraw(rank, step);
      LF_ERROR("cannot record the commit of checkpoint step " << step << ": " << e.what());
      return {grpc::StatusCode::UNAVAILABLE,
              std::string("cannot record the checkpoint commit: ") + e.what()};
    }
  }
  LF_INFO("checkpoint step " << step << " committed: " << path);
  commits_.commit(step);
  metrics_.checkpoint_committed(commits_.last_committed_step());
  response->set_committed(true);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Finish(grpc::ServerContext* context,
                                        const pb::FinishRequest* request, pb::FinishAck*) {
  if (grpc::Status st = auth_.check(*context, "Finish"); !st.ok()) return st;
  metrics_.count_rpc("Finish");
  std::lock_guard<std::mutex> lock(mutex_);
  const int rank = request->rank();
  const std::uint64_t g = request->generation();
  if (g != 0 && g == members_.generation() && !members_.running() && !done_) {
    // The rest of a generation that already ended (its other ranks stopping): nothing changes.
    LF_INFO("rank " << rank << " of ended generation " << g << " finished ("
                    << (request->preempted() ? "preempted"
                        : request->ok()      ? "ok"
                                             : "failed")
                    << ")");
    return grpc::Status::OK;
  }
  if (!members_.running() && !done_ && !request->ok() && request->permanent() &&
      !members_.check_rank(rank, "Finish")) {
    // Bad input before the group formed (a rank's exit 3 while the others wait in Register):
    // the group can never form with it, so the job ends now instead of at the rendezvous
    // timeout.
    finish_job(kExitBadInput,
               "rank " + std::to_string(rank) +
                   " stopped on bad input before its group formed (exit 3; a restart would "
                   "fail the same way): " +
                   request->error());
    return grpc::Status::OK;
  }
  if (grpc::Status st = status_of(members_.check_generation(g, rank, "Finish")); !st.ok())
    return st;
  if (grpc::Status st = status_of(members_.check_running_rank(rank, "Finish")); !st.ok()) return st;
  const Clock::time_point now = Clock::now();
  Membership::Rank& s = members_.rank(rank);
  s.last_seen = now;
  if (s.finished) return grpc::Status::OK;  // a retried Finish
  rank_finished(rank, *request, now);
  update_membership_metrics(now);
  return grpc::Status::OK;
}

void CoordinatorService::rank_finished(int rank, const pb::FinishRequest& request,
                                       Clock::time_point now) {
  Membership::Rank& s = members_.rank(rank);
  s.finished = true;
  s.ok = request.ok();
  s.preempted = request.preempted();
  s.stopped = request.stopped();
  s.cancelled = request.cancelled();
  s.error = request.error();
  s.global_step = std::max(s.global_step, request.global_step());
  persist("a rank's finish",
          [&](StateStore& st) { st.record_rank_finished(rank, s.ok, s.preempted); });
  update_progress_metrics();
  const std::string who = "rank " + std::to_string(rank) + " (host " + s.hostname + ")";
  if (s.cancelled) {
    LF_WARN("rank " << rank << " exits on the operator's cancel at global_step " << s.global_step);
    finish_cancelled("rank " + std::to_string(rank) + " exited at global_step " +
                     std::to_string(s.global_step));
  } else if (!s.ok && request.permanent()) {
    // Bad input (the worker exits 3): a restarted group would fail the same way, so the job
    // ends now, recorded as done like a group that never re-forms: the fixed config (another
    // job id) then starts without removing the state, and the checkpoints stay for --resume.
    finish_job(
        kExitBadInput,
        who + " stopped on bad input (exit 3; a restart would fail the same way): " + s.error);
  } else if (!s.ok) {
    // A failing worker may not know its step (it reports 0): use the last one it reported.
    LF_ERROR(who << " failed at global_step " << s.global_step << ": " << s.error);
    end_generation("worker_failed",
                   who + " failed at global_step " + std::to_string(s.global_step) + ": " + s.error,
                   now);
  } else if (s.preempted) {
    LF_WARN("rank " << rank << " was preempted at global_step " << s.global_step);
    end_generation("preemption",
                   "rank " + std::to_string(rank) + " was preempted at global_step " +
                       std::to_string(s.global_step),
                   now);
  } else {
    LF_INFO("rank " << rank << " finished at global_step " << request.global_step());
    if (!members_.all_finished()) return;
    if (s.stopped) {
      finish_job(0, "stopped at global_step " + std::to_string(s.global_step) + " (" +
                        (control_ != nullptr ? control_->requests().reason : "SIGINT") +
                        "): checkpoint committed, LoRA written; --resume continues from it");
    } else {
      finish_job(0, "all " + std::to_string(members_.world_size()) + " ranks of generation " +
                        std::to_string(members_.generation()) + " finished");
    }
  }
}

}  // namespace lf
