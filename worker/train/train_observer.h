// What the training loop tells whoever watches it (rank 0's progress bar, each rank's /metrics),
// so that worker/train depends on no display or exporter. Every method is called on the
// training thread, after the step's collectives, identically on every rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lf {

// The lr of one trained part in a step, named as kohya's generate_step_logs names its groups
// ("unet", "textencoder").
struct PartLearningRate {
  std::string name;
  double lr = 0.0;         // the scheduled lr of the part
  double logged_lr = 0.0;  // LoRAOptimizer::logged_lr: d x lr for Prodigy / D-Adaptation
};

// One completed optimizer step as the loop reports it.
struct StepReport {
  std::int64_t global_step = 0;  // completed optimizer steps, this one included
  int epoch = 0;                 // 0-based epoch the step belongs to
  double loss = 0.0;             // global-batch mean loss of the step
  double learning_rate = 0.0;    // the reported group's lr (UNet's, else text encoders')
  int local_samples = 0;         // samples this rank trained in the step
  double step_seconds = 0.0;     // wall time of the whole step
  double allreduce_seconds = 0.0;
  double data_wait_seconds = 0.0;  // plan fetch + input assembly
  double grad_norm = 0.0;          // before clipping (0 when clipping is off)
  bool skipped = false;            // fp16 loss scaling skipped the update (Inf/NaN gradients)
  double loss_scale = 0.0;         // fp16 loss scale after the step (0 without fp16)
  double global_samples = 0.0;     // samples all ranks trained in the step
  std::vector<PartLearningRate> part_lrs;  // one per trained part, UNet first
};

// One sample image (output.sample_prompts), reported on rank 0 for every prompt once all ranks
// wrote theirs.
struct SampleImageReport {
  std::int64_t global_step = 0;
  int prompt_index = 0;  // kohya's enum: the prompt's position in the file
  std::string path;      // the PNG under <output_dir>/sample/
  std::string png;       // its bytes
  int width = 0;
  int height = 0;
};

// One validation loss (worker/train/validation.h), the same on every rank.
struct ValidationReport {
  std::int64_t global_step = 0;  // completed optimizer steps when it ran
  int epoch = 0;                 // epoch validation: the 1-based epoch just completed; 0: step
  double loss = 0.0;             // mean over the held-out images and the fixed timesteps
  std::int64_t images = 0;
  int timesteps = 0;
  double seconds = 0.0;
};

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  // Before the first step: the job's total optimizer steps and the steps already done (resume).
  virtual void on_start(std::int64_t total_steps, std::int64_t start_step) {
    (void)total_steps;
    (void)start_step;
  }
  virtual void on_step(const StepReport& report) { (void)report; }
  virtual void on_sample_image(const SampleImageReport& image) { (void)image; }
  virtual void on_validation(const ValidationReport& report) { (void)report; }
  // After the last step of this process. completed: the job trained to its end here (false for
  // a preemption, a --stop-at-step stop or a resume with nothing left to train).
  virtual void on_end(bool completed) { (void)completed; }
};

}  // namespace lf
