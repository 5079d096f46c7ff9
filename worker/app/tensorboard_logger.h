// kohya's TensorBoard logging (train_network.py with --logging_dir / --log_with tensorboard, as
// accelerate's TensorBoardTracker writes it), on rank 0: the event files of a run go to
// <logging_dir>/<log_prefix><YYYYmmddHHMMSS>/<log_tracker_name or network_train>/. Per step:
//   loss/current, loss/average   kohya's step loss and its moving average (LossRecorder: the
//                                mean over the last epoch's worth of steps)
//   lr/<part>                    kohya's group names, "unet" and "textencoder"; Prodigy and
//                                D-Adaptation add lr/d*lr/<part>
//   grad_norm                    before clipping, when training.max_grad_norm > 0
//   loss_scale                   fp16 loss scaling's scale
//   perf/samples_per_second, perf/step_seconds
// the validation loss as kohya's loss/validation/step_average and step_divergence (the
// validation loss minus loss/average) after validate_every_n_steps, and epoch_average /
// epoch_divergence after an epoch (kohya writes those at step = epoch; here at the global step,
// so a resume's drop of later events covers them too),
// the sample images as sample_<prompt index> (kohya's wandb key), and, with log_config, the job
// config (secrets scrubbed) as text "config" at step 0.
// A resumed run appends to the run folder it started (recorded in <output_dir>/
// tensorboard_run; unless logging_dir or log_prefix changed), after dropping the events of
// steps past its checkpoint.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "worker/train/train_observer.h"

namespace lf {

class SummaryWriter;

struct TensorBoardOptions {
  std::string logging_dir;       // output.logging_dir ("" = off)
  std::string log_prefix;        // output.log_prefix
  std::string log_tracker_name;  // output.log_tracker_name ("" = network_train)
  std::string output_dir;        // output.output_dir: where the run folder is recorded
  std::string config_text;       // the job config as given; "" unless output.log_config
  std::string optimizer_type;    // training.optimizer_type (which optimizers log d*lr)
};

class TensorBoardLogger : public TrainObserver {
 public:
  explicit TensorBoardLogger(TensorBoardOptions options);
  ~TensorBoardLogger() override;

  // Opens (or, with start_step > 0, reopens) the run folder; throws std::runtime_error naming
  // the folder when it cannot be created or an earlier event file cannot be read.
  void on_start(std::int64_t total_steps, std::int64_t start_step) override;
  void on_step(const StepReport& report) override;
  // kohya's wandb key sample_<i>: the PNG at the step it was sampled after.
  void on_sample_image(const SampleImageReport& image) override;
  void on_validation(const ValidationReport& report) override;
  void on_end(bool completed) override;

  // The folder holding this run's event files ("" before on_start).
  const std::string& event_dir() const { return event_dir_; }

 private:
  std::string open_run_folder(std::int64_t start_step);

  TensorBoardOptions options_;
  std::unique_ptr<SummaryWriter> writer_;
  std::string event_dir_;
  // kohya's LossRecorder: the losses of the last epoch's worth of steps, by step in the epoch.
  std::vector<double> epoch_losses_;
  std::size_t step_in_epoch_ = 0;
  int epoch_ = -1;
  double average_ = 0.0;  // the last loss/average, for the validation divergence
};

}  // namespace lf
