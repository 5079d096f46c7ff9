// The coordinator's view of one training job: the parsed config, the scanned dataset and, once
// world_size is known, the schedule (steps per epoch, epochs, total steps) and the epoch plans.
// Plans are a pure function of (dataset, seed, world_size, epoch), so they are built lazily and
// cached; every rank is served the same plan.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "common/checkpoint/train_position.h"
#include "common/config/job_config.h"
#include "common/data/dataset.h"
#include "common/data/epoch_plan.h"

namespace lf {

// The schedule of a job for one world_size. All counts are optimizer steps. Epochs can differ
// in length (reg_selection random/rotate pick reg images from other buckets each epoch).
struct JobSchedule {
  int world_size = 0;
  int gradient_accumulation_steps = 1;    // global batches per optimizer step
  std::vector<std::int64_t> epoch_batches;  // global batches of each epoch's plan
  // Optimizer steps of each epoch: ceil(epoch_batches / gradient_accumulation_steps).
  std::vector<std::int64_t> epoch_steps;
  int steps_per_epoch = 0;        // epoch_steps[0], for logs and metrics
  int num_epochs = 0;             // max_train_epochs, or epochs until max_train_steps is covered
  std::int64_t max_train_steps = 0;  // sum of epoch_steps when epochs are given
  // Regularization images in none of the job's epoch plans (reg_selection decides; the last
  // epoch may be cut short by max_train_steps, so this is a lower bound on unused images).
  int reg_images_never_used = 0;
};

// The dataset scan options of a config (its datasets and the dataset section's scan keys).
ScanOptions scan_options_from(const JobConfig& config);

class CoordinatorJob {
 public:
  // Scans the dataset (decodes every image once; can take seconds for large sets), logs its
  // warnings and a summary. With check_model_files, first checks that the base checkpoint is a
  // safetensors file and the tokenizer vocabulary exists, and after the scan creates output_dir
  // (`inspect` does neither). Throws DatasetError / std::runtime_error naming the folder, file or option.
  explicit CoordinatorJob(JobConfig config, bool check_model_files = true);

  const JobConfig& config() const { return config_; }
  const Dataset& dataset() const { return dataset_; }
  std::uint64_t shared_seed() const { return config_.training.seed; }

  // Computes the schedule for world_size (builds plan 0, and every epoch's plan when reg
  // selection changes epoch lengths) with training.gradient_accumulation_steps, or
  // `gradient_accumulation_steps` when > 0, and drops cached plans of any other world_size.
  // Throws std::invalid_argument when world_size < 1, when an epoch would hold no step or more
  // than kMaxSamplesPerEpoch samples, or the step budget is not positive; the job is unchanged
  // then. Undoes set_resume. Thread-safe.
  JobSchedule set_world_size(int world_size, int gradient_accumulation_steps = 0);
  // Replans the rest of the job, under the current world size, for a group resuming at
  // `resume` (a checkpoint's position: global_step, epoch, step_in_epoch global batches of it
  // consumed, in the plan_lineage segments). The resumed epoch is served as the checkpoint's
  // plan continued on this world size (its batches keep the consumed prefix, so epoch_batches
  // counts the whole epoch); later epochs are planned as usual. max_train_epochs given:
  // max_train_steps = resume.global_step + the resumed epoch's remaining steps + the later epochs'
  // steps (so the LR schedule's total follows the new world size; with no world-size change it
  // equals the fresh schedule's). max_train_steps given: kept; num_epochs covers it. Throws
  // std::logic_error without a schedule, std::invalid_argument when the lineage does not add up to
  // step_in_epoch or consumes more batches than the plan holds; the job is unchanged then.
  // Thread-safe.
  JobSchedule set_resume(const TrainPosition& resume);
  // Forgets the world_size (e.g. the only registration that set it timed out). Thread-safe.
  void clear_world_size();
  // Whether set_world_size succeeded (and was not cleared). Thread-safe.
  bool has_schedule() const;
  // The current schedule; throws std::logic_error without one. Thread-safe.
  JobSchedule schedule() const;

  // The options build_epoch_plan is called with for world_size.
  PlanOptions plan_options(int world_size) const;

  // The plan of `epoch` (0-based) under the current schedule, from the cache or built now
  // (concurrent callers for the same epoch wait for one build). Throws std::out_of_range
  // when epoch is outside [0, num_epochs), std::logic_error without a schedule. Thread-safe.
  std::shared_ptr<const EpochPlan> epoch_plan(int epoch) const;

  // The plan of `epoch` as build_epoch_plan gives it for `world_size` (no resume continuation,
  // not cached): what a checkpoint written by another group size trained on. Throws
  // std::invalid_argument as build_epoch_plan.
  EpochPlan full_epoch_plan(int epoch, int world_size) const;

  // Plans kept in the cache; the oldest epochs are evicted beyond this (rebuilt on demand).
  static constexpr std::size_t kPlanCacheSize = 8;
  // Largest epoch (samples, reg included) set_world_size accepts: a plan costs ~60 bytes/sample.
  static constexpr std::int64_t kMaxSamplesPerEpoch = 50'000'000;

 private:
  // The base checkpoint is a safetensors file and the vocabulary exists.
  void check_job_files() const;
  // output.sample_prompts: read into config_.sample_prompts_text (the workers get it from the
  // assignment) and parsed, so that a bad prompt file fails before any worker starts. Throws
  // ConfigError naming the key and "<file>:<line>: <problem>".
  void read_sample_prompts();
  // A WARN when validation keys are set but the scan held no image out.
  void warn_validation_without_images() const;
  // The LR-schedule keys over the planned total (lr_schedule_keys.h): a ConfigError naming the
  // config and the key, e.g. a warmup of at least the total.
  void check_lr_schedule_over(std::int64_t total_steps) const;

  JobConfig config_;
  Dataset dataset_;
  mutable std::mutex mutex_;
  bool has_schedule_ = false;
  JobSchedule schedule_;
  mutable std::map<int, std::shared_ptr<const EpochPlan>> plan_cache_;
  // set_resume: the epoch served continued and the lineage of the plan it continues (whose last
  // segment is this world size); -1 when no resume applies.
  bool resumed_ = false;
  int resumed_epoch_ = -1;
  std::vector<PlanSegment> resumed_lineage_;
  JobSchedule fresh_schedule_;  // set_world_size's, which set_resume starts from
};

}  // namespace lf
