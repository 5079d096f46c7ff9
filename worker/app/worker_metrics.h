// Each worker's own /metrics: step time, allreduce time, data wait and samples per second, all
// labelled with the rank, so a dashboard can spot the slow rank. Metric names use the
// lorafleet_worker_ prefix and base units (seconds).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "worker/train/train_observer.h"

namespace lf {

namespace metrics {
class Registry;
class Exposer;
class Gauge;
class Counter;
class Histogram;
}  // namespace metrics

class WorkerMetrics {
 public:
  // bind_address "host:port" ("" = do not serve; the registry still records).
  // Throws std::runtime_error naming the address if it cannot bind.
  WorkerMetrics(int rank, const std::string& bind_address);
  ~WorkerMetrics();

  // One completed optimizer step (seconds are wall time).
  void observe_step(const StepReport& step);
  void observe_validation(const ValidationReport& report);
  int port() const;  // bound port, 0 if not serving
  std::string serialize() const;  // current exposition text

 private:
  std::shared_ptr<metrics::Registry> registry_;
  std::unique_ptr<metrics::Exposer> exposer_;
  metrics::Gauge* global_step_ = nullptr;
  metrics::Gauge* loss_ = nullptr;
  metrics::Gauge* samples_per_second_ = nullptr;
  metrics::Gauge* step_seconds_last_ = nullptr;
  metrics::Counter* samples_total_ = nullptr;
  metrics::Counter* steps_total_ = nullptr;
  metrics::Counter* skipped_steps_total_ = nullptr;
  metrics::Gauge* loss_scale_ = nullptr;
  metrics::Gauge* grad_norm_ = nullptr;
  metrics::Gauge* validation_loss_ = nullptr;
  metrics::Histogram* step_seconds_ = nullptr;
  metrics::Histogram* allreduce_seconds_ = nullptr;
  metrics::Histogram* data_wait_seconds_ = nullptr;
  double ema_samples_per_second_ = 0.0;
};

}  // namespace lf
