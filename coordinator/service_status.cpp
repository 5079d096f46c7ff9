// CoordinatorService::fill_status: the service's state as lorafleet.v1.JobStatus, for
// `lorafleet-ctl status`, /api/v1/status and the status page. Kept apart from the handlers in
// service.cpp: it only reads.
#include <algorithm>

#include "coordinator/service.h"

namespace lf {

namespace pb = lorafleet::v1;

namespace {

const char* rank_state(bool registered, bool finished, bool ok, bool preempted, bool stopped,
                       bool cancelled, bool formed) {
  if (!registered) return "absent";
  if (!finished) return formed ? "training" : "registering";
  if (cancelled) return "cancelled";
  if (!ok) return "failed";
  if (preempted) return "preempted";
  return stopped ? "stopped" : "finished";
}

}  // namespace

void CoordinatorService::fill_status(pb::JobStatus* out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Clock::time_point now = Clock::now();
  const JobConfig& c = job_.config();
  out->set_job_name(c.source_name);
  out->set_world_size(members_.world_size());
  out->set_generation(members_.generation());
  if (job_.has_schedule()) {
    const JobSchedule s = job_.schedule();
    out->set_max_train_steps(s.max_train_steps);
    out->set_num_epochs(s.num_epochs);
  }
  const OperatorRequests requests = control_ != nullptr ? control_->requests() : OperatorRequests{};
  out->set_operator_request(requests.cancel ? "cancel" : requests.stop ? "stop" : "");
  out->set_sample_now_requests(requests.sample_now);

  bool any_stopped = false;
  bool any_cancelled = false;
  double samples_per_second = 0.0;
  const Membership::Rank* latest = nullptr;
  for (int r = 0; r < members_.world_size(); ++r) {
    const Membership::Rank& s = members_.rank(r);
    pb::RankStatus* rs = out->add_ranks();
    rs->set_rank(r);
    rs->set_hostname(s.hostname);
    rs->set_device(s.device);
    rs->set_pid(s.pid);
    rs->set_state(rank_state(s.registered, s.finished, s.ok, s.preempted, s.stopped, s.cancelled,
                             members_.running()));
    rs->set_last_seen_seconds_ago(
        s.registered ? std::chrono::duration<double>(now - s.last_seen).count() : -1.0);
    rs->set_global_step(s.global_step);
    rs->set_samples_per_second(s.finished ? 0.0 : s.samples_per_second);
    if (s.finished && !s.ok) rs->set_error(s.error);
    any_stopped = any_stopped || s.stopped;
    any_cancelled = any_cancelled || s.cancelled;
    if (!s.registered) continue;
    if (!s.finished) samples_per_second += s.samples_per_second;
    if (latest == nullptr || s.global_step > latest->global_step) latest = &s;
  }
  if (latest != nullptr) {
    out->set_global_step(latest->global_step);
    out->set_epoch(latest->epoch);
    out->set_loss(latest->loss);
    out->set_learning_rate(latest->learning_rate);
  }
  out->set_samples_per_second(samples_per_second);
  out->set_elapsed_seconds(std::chrono::duration<double>(now - started_at_).count());
  const bool training = members_.running() && !done_;
  const std::int64_t left = out->max_train_steps() - out->global_step();
  out->set_eta_seconds(training && latest != nullptr && latest->step_seconds > 0 && left >= 0
                           ? static_cast<double>(left) * latest->step_seconds
                           : -1.0);
  out->set_last_committed_step(commits_.last_committed_step());
  out->set_last_committed_checkpoint(commits_.last_committed_path());
  for (const auto& [cause, count] : members_.restarts_by_cause()) {
    if (count == 0) continue;
    pb::Restart* r = out->add_restarts();
    r->set_cause(cause);
    r->set_count(count);
  }
  for (const ProgressPoint& p : history_.points()) {
    pb::HistoryPoint* h = out->add_history();
    h->set_global_step(p.global_step);
    h->set_loss(p.loss);
    h->set_learning_rate(p.learning_rate);
  }

  for (const ProgressPoint& p : validation_history_.points()) {
    pb::ValidationPoint* v = out->add_validation_history();
    v->set_global_step(p.global_step);
    v->set_loss(p.loss);
  }
  out->set_validation_loss(validation_loss_);
  out->set_validation_step(validation_step_);

  if (finished_before_ && !done_) {
    // A restarted coordinator on a finished job (restore_finished): no rank has reported.
    out->set_world_size(finished_before_->world_size);
    out->set_max_train_steps(finished_before_->max_train_steps);
    out->set_global_step(finished_before_->global_step);
    out->set_state("done");
    out->set_end_reason(describe(*finished_before_));
  } else if (done_) {
    out->set_exit_code(exit_code_);
    out->set_end_reason(end_reason_);
    out->set_state(any_cancelled || requests.cancel ? "cancelled"
                   : exit_code_ != 0                ? "failed"
                   : any_stopped || requests.stop   ? "stopped"
                                                    : "done");
  } else if (requests.cancel || requests.stop) {
    out->set_state(requests.cancel ? "cancelling" : "stopping");
    out->set_end_reason(requests.reason);
  } else if (members_.running()) {
    out->set_state("running");
  } else {
    out->set_state(members_.generation() == 0 ? "registering" : "restarting");
    out->set_end_reason(members_.end_detail());
  }
}

}  // namespace lf
