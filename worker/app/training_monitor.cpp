// Progress bar and metrics of a worker (see header).
#include "worker/app/training_monitor.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "common/io/atomic_file.h"

namespace fs = std::filesystem;

namespace lf {

TrainingMonitor::TrainingMonitor(const TrainingMonitorOptions& options)
    : options_(options), metrics_(options.rank, options.metrics_bind) {}

TrainingMonitor::~TrainingMonitor() = default;

void TrainingMonitor::on_start(std::int64_t total_steps, std::int64_t start_step) {
  if (options_.rank == 0) {
    bar_ = std::make_unique<ProgressBar>(total_steps, start_step, stdout, options_.progress_tty);
  }
}

void TrainingMonitor::on_step(const StepReport& r) {
  metrics_.observe_step(r);
  if (bar_) bar_->update(r.global_step, r.loss, r.learning_rate);
}

void TrainingMonitor::on_end(bool finished) {
  if (bar_) bar_->finish();
  if (!finished) return;
  const fs::path dir = fs::path(options_.output_dir) / "metrics";
  fs::create_directories(dir);
  write_file_atomic((dir / ("worker_rank" + std::to_string(options_.rank) + ".prom")).string(),
                    metrics_.serialize());
  if (options_.metrics_linger_seconds > 0 && metrics_.port() > 0) {
    std::this_thread::sleep_for(std::chrono::seconds(options_.metrics_linger_seconds));
  }
}

}  // namespace lf
