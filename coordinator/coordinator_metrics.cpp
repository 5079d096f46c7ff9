// CoordinatorMetrics: registers every lorafleet_* family once and keeps references to its
// series; setters only store values. Names follow the Prometheus naming rules (base units,
// counters end in _total) so `promtool check metrics` accepts the exposition.
#include "coordinator/coordinator_metrics.h"

#include <cstring>
#include <string>

#include <limits>

namespace lf {

const std::vector<std::string> CoordinatorMetrics::kRestartCauses = {
    "preemption", "worker_failed", "worker_lost", "rank_restarted"};
const std::vector<std::string> CoordinatorMetrics::kRpcMethods = {
    "Register", "GetDataset", "GetEpochPlan", "ReportProgress", "CommitCheckpoint", "Finish"};

static metrics::Gauge* gauge(metrics::Registry& r, const std::string& name,
                             const std::string& help) {
  return &metrics::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

static metrics::Family<metrics::Gauge>* gauge_family(metrics::Registry& r, const std::string& name,
                                                     const std::string& help) {
  return &metrics::BuildGauge().Name(name).Help(help).Register(r);
}

CoordinatorMetrics::CoordinatorMetrics() : registry_(std::make_shared<metrics::Registry>()) {
  metrics::Registry& r = *registry_;
  global_step_ =
      gauge(r, "lorafleet_global_step", "Optimizer steps completed (highest rank report).");
  epoch_ = gauge(r, "lorafleet_epoch", "Current epoch, 0-based.");
  loss_ = gauge(r, "lorafleet_loss", "Global mean loss of the latest reported step.");
  learning_rate_ =
      gauge(r, "lorafleet_learning_rate", "Learning rate of the latest reported step.");
  validation_loss_ = gauge(r, "lorafleet_validation_loss",
                           "Latest validation loss: held-out images (validation_split) at fixed "
                           "timesteps and noise; NaN before the first (and without a split).");
  validation_loss_->Set(std::numeric_limits<double>::quiet_NaN());
  samples_per_second_ = gauge(r, "lorafleet_samples_per_second",
                              "Training throughput: sum over ranks of their latest samples/s.");
  workers_alive_ = gauge(r, "lorafleet_workers_alive",
                         "Registered ranks that have not finished and were seen within 30 s.");
  workers_registered_ = gauge(r, "lorafleet_workers_registered", "Ranks registered.");
  workers_finished_ = gauge(r, "lorafleet_workers_finished", "Ranks that reported Finish.");
  world_size_ = gauge(r, "lorafleet_world_size", "Number of ranks of the job (0 until known).");
  job_max_train_steps_ = gauge(r, "lorafleet_job_max_train_steps",
                               "Total optimizer steps of the job (0 until world_size is known).");
  job_num_epochs_ = gauge(r, "lorafleet_job_num_epochs", "Epochs of the job.");
  last_committed_step_ = gauge(r, "lorafleet_checkpoint_last_committed_step",
                               "global_step of the newest checkpoint all ranks committed.");
  checkpoints_committed_ = &metrics::BuildCounter()
                                .Name("lorafleet_checkpoints_committed_total")
                                .Help("Checkpoints committed by all ranks.")
                                .Register(r)
                                .Add({});
  samples_total_ = &metrics::BuildCounter()
                        .Name("lorafleet_samples_total")
                        .Help("Training samples processed by all ranks.")
                        .Register(r)
                        .Add({});
  worker_global_step_ =
      gauge_family(r, "lorafleet_rank_global_step", "Latest global_step reported by a rank.");
  worker_samples_per_second_ = gauge_family(r, "lorafleet_rank_samples_per_second",
                                            "Latest samples/s reported by a rank.");
  worker_step_seconds_ = gauge_family(r, "lorafleet_rank_last_step_seconds",
                                      "Duration of a rank's latest step in seconds.");
  worker_allreduce_seconds_ = gauge_family(r, "lorafleet_rank_last_allreduce_seconds",
                                           "Gradient allreduce time of a rank's latest step.");
  worker_data_wait_seconds_ = gauge_family(r, "lorafleet_rank_last_data_wait_seconds",
                                           "Time a rank's latest step waited for data.");
  worker_last_seen_age_ = gauge_family(r, "lorafleet_rank_last_seen_age_seconds",
                                       "Seconds since the coordinator last heard from a rank.");
  generation_ = gauge(r, "lorafleet_generation",
                      "Membership generation of the group now running (0 before the first).");
  auto& restarts = metrics::BuildCounter()
                       .Name("lorafleet_restarts_total")
                       .Help(
                           "Group restarts (a new generation formed after an earlier one), by "
                           "the cause that ended the previous generation.")
                       .Register(r);
  for (const std::string& cause : kRestartCauses)
    restarts_.push_back(&restarts.Add({{"cause", cause}}));
  auto& rpcs = metrics::BuildCounter()
                   .Name("lorafleet_coordinator_rpcs_total")
                   .Help("RPCs handled by the coordinator, by method.")
                   .Register(r);
  for (const std::string& m : kRpcMethods) rpcs_.push_back(&rpcs.Add({{"method", m}}));
}

std::string CoordinatorMetrics::serialize() const { return registry_->Serialize(); }

CoordinatorMetrics::RankSeries& CoordinatorMetrics::rank_series(int rank) {
  while (static_cast<int>(ranks_.size()) <= rank) {
    const std::map<std::string, std::string> labels = {
        {"rank", std::to_string(ranks_.size())}};
    auto s = std::make_unique<RankSeries>();
    s->global_step = &worker_global_step_->Add(labels);
    s->samples_per_second = &worker_samples_per_second_->Add(labels);
    s->step_seconds = &worker_step_seconds_->Add(labels);
    s->allreduce_seconds = &worker_allreduce_seconds_->Add(labels);
    s->data_wait_seconds = &worker_data_wait_seconds_->Add(labels);
    s->last_seen_age = &worker_last_seen_age_->Add(labels);
    ranks_.push_back(std::move(s));
  }
  return *ranks_[rank];
}

void CoordinatorMetrics::set_job(int world_size, std::int64_t max_train_steps, int num_epochs) {
  std::lock_guard<std::mutex> lock(mutex_);
  world_size_->Set(world_size);
  job_max_train_steps_->Set(static_cast<double>(max_train_steps));
  job_num_epochs_->Set(num_epochs);
}

void CoordinatorMetrics::set_workers(int registered, int alive, int finished) {
  std::lock_guard<std::mutex> lock(mutex_);
  workers_registered_->Set(registered);
  workers_alive_->Set(alive);
  workers_finished_->Set(finished);
}

void CoordinatorMetrics::set_progress(std::int64_t global_step, int epoch, double loss,
                                      double learning_rate, double samples_per_second) {
  std::lock_guard<std::mutex> lock(mutex_);
  global_step_->Set(static_cast<double>(global_step));
  epoch_->Set(epoch);
  loss_->Set(loss);
  learning_rate_->Set(learning_rate);
  samples_per_second_->Set(samples_per_second);
}

void CoordinatorMetrics::set_validation_loss(double loss) {
  std::lock_guard<std::mutex> lock(mutex_);
  validation_loss_->Set(loss);
}

void CoordinatorMetrics::set_rank_progress(int rank, std::int64_t global_step,
                                           double samples_per_second, double step_seconds,
                                           double allreduce_seconds, double data_wait_seconds) {
  if (rank < 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  RankSeries& s = rank_series(rank);
  s.global_step->Set(static_cast<double>(global_step));
  s.samples_per_second->Set(samples_per_second);
  s.step_seconds->Set(step_seconds);
  s.allreduce_seconds->Set(allreduce_seconds);
  s.data_wait_seconds->Set(data_wait_seconds);
}

void CoordinatorMetrics::set_rank_last_seen_age(int rank, double seconds) {
  if (rank < 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  rank_series(rank).last_seen_age->Set(seconds);
}

void CoordinatorMetrics::add_samples(std::int64_t delta) {
  if (delta <= 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  samples_total_->Increment(static_cast<double>(delta));
}

void CoordinatorMetrics::checkpoint_committed(std::int64_t global_step) {
  std::lock_guard<std::mutex> lock(mutex_);
  checkpoints_committed_->Increment();
  last_committed_step_->Set(static_cast<double>(global_step));
}

}  // namespace lf

namespace lf {

void CoordinatorMetrics::set_generation(std::uint64_t generation) {
  generation_->Set(static_cast<double>(generation));
}

static std::size_t cause_index(const std::string& cause) {
  const auto& causes = CoordinatorMetrics::kRestartCauses;
  for (std::size_t i = 0; i < causes.size(); ++i) {
    if (causes[i] == cause) return i;
  }
  return causes.size() - 1;  // "rank_restarted"
}

void CoordinatorMetrics::add_restarts(const std::string& cause, std::int64_t n) {
  if (n > 0) restarts_[cause_index(cause)]->Increment(static_cast<double>(n));
}

double CoordinatorMetrics::restarts(const std::string& cause) const {
  return restarts_[cause_index(cause)]->Value();
}

void CoordinatorMetrics::count_rpc(const char* method) {
  for (std::size_t i = 0; i < kRpcMethods.size(); ++i) {
    if (std::strcmp(kRpcMethods[i].c_str(), method) == 0) {
      rpcs_[i]->Increment();
      return;
    }
  }
}

}  // namespace lf
