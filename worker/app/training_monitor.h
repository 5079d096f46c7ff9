// What a worker shows of its training: rank 0's progress bar on stdout and TensorBoard event
// files (tensorboard_logger.h), and every rank's own /metrics (worker_metrics.h), fed through
// the training loop's observer interface. At the end of
// a run that trained to its end it leaves the final metrics snapshot next to the outputs and
// keeps /metrics up for the linger time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "worker/app/progress_bar.h"
#include "worker/app/tensorboard_logger.h"
#include "worker/app/worker_metrics.h"
#include "worker/train/train_observer.h"

namespace lf {

struct TrainingMonitorOptions {
  int rank = 0;
  bool progress_tty = false;       // rank 0 draws a bar (true) or plain lines (false)
  std::string metrics_bind;        // "host:port" of this rank's /metrics ("" = off)
  std::string output_dir;          // the job's output.output_dir (snapshot folder: metrics/)
  int metrics_linger_seconds = 0;  // keep serving /metrics this long after training
  TensorBoardOptions tensorboard;  // rank 0 logs when tensorboard.logging_dir is set
};

class TrainingMonitor : public TrainObserver {
 public:
  // Starts serving /metrics at options.metrics_bind. Throws std::runtime_error naming the
  // address when it cannot bind.
  explicit TrainingMonitor(const TrainingMonitorOptions& options);
  ~TrainingMonitor() override;

  void on_start(std::int64_t total_steps, std::int64_t start_step) override;
  void on_step(const StepReport& report) override;
  void on_sample_image(const SampleImageReport& image) override;
  void on_validation(const ValidationReport& report) override;
  // Finished runs write <output_dir>/metrics/worker_rank<r>.prom atomically (for runs that end
  // before anyone scraped), then linger.
  void on_end(bool finished) override;

  int metrics_port() const { return metrics_.port(); }
  // Rank 0's TensorBoard logger; null on other ranks and without output.logging_dir.
  TensorBoardLogger* tensorboard() { return tensorboard_.get(); }

 private:
  TrainingMonitorOptions options_;
  WorkerMetrics metrics_;
  std::unique_ptr<ProgressBar> bar_;  // rank 0 only, from on_start
  std::unique_ptr<TensorBoardLogger> tensorboard_;
};

}  // namespace lf
