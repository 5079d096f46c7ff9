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
    : options_(options), metrics_(options.rank, options.metrics_bind) {
  if (options.rank == 0 && !options.tensorboard.logging_dir.empty()) {
    tensorboard_ = std::make_unique<TensorBoardLogger>(options.tensorboard);
  }
}

TrainingMonitor::~TrainingMonitor() = default;

void TrainingMonitor::on_start(std::int64_t total_steps, std::int64_t start_step) {
  if (options_.rank == 0) {
    bar_ = std::make_unique<ProgressBar>(total_steps, start_step, stdout, options_.progress_tty);
  }
  if (tensorboard_) tensorboard_->on_start(total_steps, start_step);
}

void TrainingMonitor::on_step(const StepReport& r) {
  metrics_.observe_step(r);
  if (bar_) bar_->update(r.global_step, r.loss, r.learning_rate);
  if (tensorboard_) tensorboard_->on_step(r);
}

void TrainingMonitor::on_sample_image(const SampleImageReport& image) {
  if (tensorboard_) tensorboard_->on_sample_image(image);
}

void TrainingMonitor::on_validation(const ValidationReport& report) {
  metrics_.observe_validation(report);
  if (tensorboard_) tensorboard_->on_validation(report);
}

void TrainingMonitor::on_end(bool finished) {
  if (bar_) bar_->finish();
  if (tensorboard_) tensorboard_->on_end(finished);
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
