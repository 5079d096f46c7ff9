// Where training stands, as a checkpoint's train_state.safetensors records it in its header
// metadata ("lorafleet.state.<field>" strings), readable without LibTorch: shared by the workers,
// which write it (worker/io/checkpoint.h), and the coordinator, which plans a group's resume from
// it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/data/epoch_plan.h"

namespace lf {

// Where training stands, as train_state.safetensors records it in its header metadata
// ("lorafleet.state.<field>" strings). Readable without LibTorch.
struct TrainPosition {
  std::int64_t global_step = 0;       // optimizer steps completed
  int epoch = 0;                      // 0-based epoch of the next step
  std::int64_t step_in_epoch = 0;     // global batches of `epoch` already consumed
  std::int64_t samples_in_epoch = 0;  // samples of `epoch` already consumed (all ranks)
  std::uint64_t shared_seed = 0;
  int world_size = 1;
  std::int64_t session_id = 0;
  double training_started_at = 0.0;  // seconds since the Unix epoch
  // reg_selection "rotate": where `epoch`'s walk through each dataset's reg list starts
  // (EpochPlan::reg_cursor_begin). The plan derives it from the epoch; a resume checks that the
  // plan it is served continues exactly there. Empty in checkpoints without it.
  std::vector<std::int64_t> reg_cursor;
  // How global batches were grouped: a resume with other values would regroup the rest of the
  // epoch and change the schedule, so it is refused. 0 / empty in checkpoints without them.
  int gradient_accumulation_steps = 0;
  std::vector<std::int64_t> batch_sizes;  // per dataset, per rank
  // epoch_plan_digest of the plan the last step came from, and that plan's epoch: a resume
  // refuses a job whose plan of that epoch differs (other images, options, reg_selection...).
  // -1 / "" in checkpoints without them.
  int plan_epoch = -1;
  std::string plan_digest;
  // How plan_epoch's plan was served (epoch_plan.h build_continued_epoch_plan): (world_size,
  // batches) segments, the last one this group's. Mid-epoch the batches add up to
  // step_in_epoch. Checkpoints without it load as one segment {world_size, step_in_epoch}.
  std::vector<PlanSegment> plan_lineage;
  // fp16 dynamic loss scaling (LossScaler): the scale and its clean-step count after the last
  // step, and the steps skipped so far for Inf / NaN gradients (the LR schedule counts only the
  // steps that updated, as accelerate holds its scheduler back on a skipped step). 0 without
  // loss scaling, and in checkpoints written before it.
  double loss_scale = 0.0;
  std::int64_t loss_scale_growth_tracker = 0;
  std::int64_t skipped_steps = 0;
};

// The header metadata recording `position` (keys "lorafleet.state.*", including the version).
std::map<std::string, std::string> train_position_metadata(const TrainPosition& position);
// Inverse of train_position_metadata. `file` names the source in errors. Throws
// std::runtime_error naming the file and key when a key is missing, malformed, or the version
// is not supported.
TrainPosition parse_train_position(const std::map<std::string, std::string>& metadata,
                                   const std::string& file);
// Reads dir/train_state.safetensors's header only (memory-mapped; no tensor bytes are touched).
// Throws std::runtime_error naming the file when it is missing or malformed.
TrainPosition read_train_position(const std::string& dir);

}  // namespace lf
