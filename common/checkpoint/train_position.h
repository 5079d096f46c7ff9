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

// Where training stands. Every field is recorded in the header (version 2: all required).
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
  // (EpochPlan::reg_cursor_begin); the trainer checks that the plan it is served starts there.
  std::vector<std::int64_t> reg_cursor;
  // The job facts a resume must share (ResumeExpectations): how global batches were grouped,
  // each dataset's per-rank batch size, and the optimizer whose state the checkpoint holds
  // (training.optimizer_type as read_optimizer names it, e.g. "AdamW", "Prodigy").
  int gradient_accumulation_steps = 1;
  std::vector<std::int64_t> batch_sizes;
  std::string optimizer_type;
  // epoch_plan_digest of the plan the last step came from, and that plan's epoch: a resume
  // refuses a job whose plan of that epoch differs (other images, options, reg_selection...).
  int plan_epoch = 0;
  std::string plan_digest;
  // How plan_epoch's plan was served (epoch_plan.h build_continued_epoch_plan): (world_size,
  // batches) segments, the last one this group's. Mid-epoch the batches add up to
  // step_in_epoch; empty at an epoch's start.
  std::vector<PlanSegment> plan_lineage;
  // fp16 dynamic loss scaling (LossScaler): the scale and its clean-step count after the last
  // step, and the steps skipped so far for Inf / NaN gradients (the LR schedule counts only the
  // steps that updated, as accelerate holds its scheduler back on a skipped step). 0 without
  // loss scaling.
  double loss_scale = 0.0;
  std::int64_t loss_scale_growth_tracker = 0;
  std::int64_t skipped_steps = 0;
};

// Whole-position equality: the two record the same header metadata (every field, so a field
// added later cannot be left out of the comparison).
bool operator==(const TrainPosition& a, const TrainPosition& b);
inline bool operator!=(const TrainPosition& a, const TrainPosition& b) { return !(a == b); }

// The header metadata recording `position` (keys "lorafleet.state.*", including the version).
std::map<std::string, std::string> train_position_metadata(const TrainPosition& position);
// Inverse of train_position_metadata. `file` names the source in errors. Throws
// std::runtime_error naming the file and key when a key is missing or malformed, or the version
// is not 2 (checkpoints of earlier, unreleased versions are not read).
TrainPosition parse_train_position(const std::map<std::string, std::string>& metadata,
                                   const std::string& file);
// Reads dir/train_state.safetensors's header only (memory-mapped; no tensor bytes are touched).
// Throws std::runtime_error naming the file when it is missing or malformed.
TrainPosition read_train_position(const std::string& dir);

// A committed checkpoint and the position its train state records.
struct CheckpointPosition : TrainPosition {
  std::string dir;  // absolute checkpoint directory
};
// read_train_position of `dir`, with the position checked for range (world_size >= 1, no
// negative step or epoch). Throws std::runtime_error naming the file.
CheckpointPosition read_checkpoint_position(const std::string& dir);

// What a job must share with a checkpoint to continue it: the seed, the grouping of batches and
// the optimizer (whose state the checkpoint holds). The workers record these facts in every
// position they write, and the coordinator checks them once for the whole group.
struct ResumeExpectations {
  std::uint64_t shared_seed = 0;
  int gradient_accumulation_steps = 1;
  std::vector<std::int64_t> batch_sizes;  // per dataset, per rank
  std::string optimizer_type;
};

struct JobConfig;
// The expectations of `config`: training.seed, training.gradient_accumulation_steps, each
// dataset's batch_size and training.optimizer_type as read_optimizer names it.
ResumeExpectations resume_expectations_of(const JobConfig& config);

// Throws ConfigError (common/config/job_config.h; exit 3, restarting cannot help) naming the
// checkpoint's train state, the job's key and both values, at the first fact that differs.
void check_resume_compatible(const CheckpointPosition& checkpoint, const ResumeExpectations& job);

}  // namespace lf
