// The validation loss, as kohya sd-scripts train_network.py computes it (validation_split,
// validation_seed, validate_every_n_steps, validate_every_n_epochs, max_validation_steps): the
// training loss of the held-out images (common/data/validation_split.h), with no gradient, at
// the fixed timesteps linspace(min_timestep, max_timestep, 6)[1:-1] (200, 400, 600, 800 by
// default) and fixed noise, so values compare across steps, runs and resumes.
//
// The held-out images form validation batches of the dataset's batch_size, grouped by (dataset,
// bucket), at most max_validation_steps of them; batch j runs on rank j mod world_size with the
// noise of (validation_seed, j, timestep), so a batch's loss is the same on any world size. The
// ranks sum their losses in one allreduce. Centre crop, no flip and the base caption (kohya's
// validation dataset has no augmentation draws of its own here); the LoRA at multiplier 1 and
// no dropout (kohya: network.eval()); schedule-free optimizers' eval weights around it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/config/job_config.h"
#include "common/data/epoch_plan.h"
#include "worker/train/training_session.h"

namespace lf {

struct ValidationResult {
  double loss = 0.0;        // mean over every (image, timestep) of the validation set
  std::int64_t images = 0;  // held-out images used
  int timesteps = 0;        // per image
  double seconds = 0.0;
};

class Validation {
 public:
  // Builds the validation batches from s.dataset's held-out images (none: enabled() is false).
  Validation(const JobConfig& config, const TrainingSession& s);

  bool enabled() const { return !batches_.empty(); }
  // kohya: validate_every_n_steps > 0 and global_step % n == 0.
  bool due_after_step(std::int64_t global_step) const;
  // kohya: after every epoch (validate_every_n_epochs unset, 0 here) or every Nth; `epoch`
  // 1-based, the epoch just completed.
  bool due_after_epoch(int epoch) const;

  // Collective: every rank calls it at the same step. Runs this rank's batches and returns the
  // global mean. Throws what the model or the collective throws.
  ValidationResult run(TrainingSession& s) const;

  // The timesteps (kohya: np.linspace(min_t, max_t, 6, dtype=int)[1:-1]).
  static std::vector<std::int64_t> timesteps(std::int64_t min_timestep, std::int64_t max_timestep);
  // The validation batches of `dataset`'s held-out images: (dataset, bucket) groups in
  // validation_images order, split into batches of the dataset's batch_size, the first
  // `max_batches` (0 = all).
  static std::vector<GlobalBatch> make_batches(const Dataset& dataset, int max_batches);

 private:
  const JobConfig& config_;
  std::vector<GlobalBatch> batches_;
  std::vector<std::int64_t> timesteps_;
};

}  // namespace lf
