// The coordinator's Prometheus metrics (lorafleet_* names, text format 0.0.4): job progress as
// reported by the workers, membership, and checkpoint commits. Series are created once at
// construction (per-rank series on first use), so updates are cheap.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/metrics/registry.h"

namespace lf {

class CoordinatorMetrics {
 public:
  CoordinatorMetrics();

  // The registry to hand to an Exposer (which keeps a weak reference).
  std::shared_ptr<metrics::Registry> registry() const { return registry_; }
  // The /metrics text of the current values.
  std::string serialize() const;

  // world_size and the job's step budget (lorafleet_world_size, lorafleet_job_max_train_steps,
  // lorafleet_job_num_epochs).
  void set_job(int world_size, std::int64_t max_train_steps, int num_epochs);
  // Membership: ranks registered / alive (registered, not finished, recently seen) / finished.
  void set_workers(int registered, int alive, int finished);
  // Job-level progress (lorafleet_global_step, _epoch, _loss, _learning_rate) and the sum over
  // ranks of their latest samples/s.
  void set_progress(std::int64_t global_step, int epoch, double loss, double learning_rate,
                    double samples_per_second);
  // lorafleet_validation_loss: the latest validation loss (held-out images, fixed timesteps and
  // noise).
  void set_validation_loss(double loss);
  // Per-rank latest values (lorafleet_worker_*{rank="r"}), seconds for the timings.
  void set_rank_progress(int rank, std::int64_t global_step, double samples_per_second,
                         double step_seconds, double allreduce_seconds, double data_wait_seconds);
  // Seconds since rank's last message (lorafleet_worker_last_seen_age_seconds{rank}).
  void set_rank_last_seen_age(int rank, double seconds);
  // Adds to lorafleet_samples_total (samples processed by all ranks); ignores delta <= 0.
  void add_samples(std::int64_t delta);
  // lorafleet_checkpoints_committed_total += 1 and lorafleet_checkpoint_last_committed_step.
  void checkpoint_committed(std::int64_t global_step);
  // lorafleet_generation: the membership generation now running (0 before the first).
  void set_generation(std::uint64_t generation);
  // lorafleet_restarts_total{cause} += n. cause is one of kRestartCauses; others are counted as
  // "rank_restarted" so the label set stays bounded.
  void add_restarts(const std::string& cause, std::int64_t n = 1);
  double restarts(const std::string& cause) const;
  // lorafleet_coordinator_rpcs_total{method} += 1; method is an RPC name of the service
  // (unknown names are ignored). Lock-free: called on every RPC.
  void count_rpc(const char* method);

  // The restart causes, as labels.
  static const std::vector<std::string> kRestartCauses;
  // The service's RPC names, as labels.
  static const std::vector<std::string> kRpcMethods;

  // All methods are thread-safe.

 private:
  struct RankSeries {  // the per-rank series, created on a rank's first report
    metrics::Gauge* global_step = nullptr;
    metrics::Gauge* samples_per_second = nullptr;
    metrics::Gauge* step_seconds = nullptr;
    metrics::Gauge* allreduce_seconds = nullptr;
    metrics::Gauge* data_wait_seconds = nullptr;
    metrics::Gauge* last_seen_age = nullptr;
  };
  RankSeries& rank_series(int rank);  // requires mutex_

  std::shared_ptr<metrics::Registry> registry_;
  mutable std::mutex mutex_;
  metrics::Gauge* global_step_;
  metrics::Gauge* epoch_;
  metrics::Gauge* loss_;
  metrics::Gauge* learning_rate_;
  metrics::Gauge* validation_loss_;
  metrics::Gauge* samples_per_second_;
  metrics::Gauge* workers_alive_;
  metrics::Gauge* workers_registered_;
  metrics::Gauge* workers_finished_;
  metrics::Gauge* world_size_;
  metrics::Gauge* job_max_train_steps_;
  metrics::Gauge* job_num_epochs_;
  metrics::Gauge* last_committed_step_;
  metrics::Counter* checkpoints_committed_;
  metrics::Counter* samples_total_;
  metrics::Family<metrics::Gauge>* worker_global_step_;
  metrics::Family<metrics::Gauge>* worker_samples_per_second_;
  metrics::Family<metrics::Gauge>* worker_step_seconds_;
  metrics::Family<metrics::Gauge>* worker_allreduce_seconds_;
  metrics::Family<metrics::Gauge>* worker_data_wait_seconds_;
  metrics::Family<metrics::Gauge>* worker_last_seen_age_;
  std::vector<std::unique_ptr<RankSeries>> ranks_;  // index = rank
  metrics::Gauge* generation_;
  std::vector<metrics::Counter*> restarts_;  // parallel to kRestartCauses
  std::vector<metrics::Counter*> rpcs_;      // parallel to kRpcMethods
};

}  // namespace lf
