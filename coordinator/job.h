// The coordinator's view of one training job: the parsed config, the scanned dataset and, once
// world_size is known, the schedule (steps per epoch, epochs, total steps) and the epoch plans.
// Plans are a pure function of (dataset, seed, world_size, batch size, epoch), so they are
// built lazily and cached; every rank is served the same plan.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "common/config/job_config.h"
#include "common/data/dataset.h"
#include "common/data/epoch_plan.h"

namespace lf {

// The schedule of a job for one world_size. All counts are optimizer steps.
struct JobSchedule {
  int world_size = 0;
  int steps_per_epoch = 0;        // global batches in plan(epoch 0)
  int num_epochs = 0;             // max_train_epochs, or ceil(max_train_steps / steps_per_epoch)
  std::int64_t max_train_steps = 0;  // num_epochs * steps_per_epoch when epochs are given
};

// The dataset scan options of a config (its dataset section).
ScanOptions scan_options_from(const DatasetSection& dataset);

class CoordinatorJob {
 public:
  // Scans the dataset (decodes every image once; can take seconds for large sets), logs its
  // warnings and a summary. Throws DatasetError / std::invalid_argument (bad bucket options)
  // naming the folder, file or option.
  explicit CoordinatorJob(JobConfig config);

  const JobConfig& config() const { return config_; }
  const Dataset& dataset() const { return dataset_; }
  std::uint64_t shared_seed() const { return config_.training.seed; }

  // Computes the schedule for world_size (builds plan 0) and drops cached plans of any other
  // world_size. Throws std::invalid_argument when world_size < 1, or when an epoch would hold
  // no step or the step budget is not positive; the job is unchanged then. Thread-safe.
  JobSchedule set_world_size(int world_size);
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

  // Plans kept in the cache; the oldest epochs are evicted beyond this (rebuilt on demand).
  static constexpr std::size_t kPlanCacheSize = 8;

 private:
  JobConfig config_;
  Dataset dataset_;
  mutable std::mutex mutex_;
  bool has_schedule_ = false;
  JobSchedule schedule_;
  mutable std::map<int, std::shared_ptr<const EpochPlan>> plan_cache_;
};

}  // namespace lf
