// Resolution of a group's --resume request on the coordinator, without LibTorch: which
// checkpoint directory it names and the training position its train_state.safetensors records
// (read from the safetensors header's metadata only, never the optimizer tensors).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/data/epoch_plan.h"

namespace lf {

// The position fields of a checkpoint's train state (worker/io/checkpoint.h TrainState).
struct CheckpointPosition {
  std::string dir;                    // absolute checkpoint directory
  std::int64_t global_step = 0;       // optimizer steps completed
  int epoch = 0;                      // 0-based epoch of the next step
  std::int64_t batches_in_epoch = 0;  // global batches of `epoch` consumed
  std::int64_t samples_in_epoch = 0;  // samples of `epoch` consumed, all ranks
  int world_size = 1;                 // ranks that wrote it
  std::uint64_t shared_seed = 0;
  int plan_epoch = -1;      // epoch of the plan the last step came from; -1: unknown
  std::string plan_digest;  // epoch_plan_digest of that plan; "": unknown
  // How plan_epoch's plan was served: segments of (world_size, batches). Checkpoints written
  // before lineages existed get one segment of world_size (batches_in_epoch when mid-epoch).
  std::vector<PlanSegment> plan_lineage;
};

// Resolves what the workers' --resume said: "" -> nullopt (fresh run); "auto" -> the newest
// COMMITTED checkpoint under <output_dir>/checkpoints (torn ones skipped with a warning), or
// nullopt when there is none; any other value -> resolve_checkpoint (checkpoint_layout.h): a
// checkpoint directory itself (an error if torn), or the newest committed step-* checkpoint in
// that folder or its checkpoints/ subfolder. Throws std::runtime_error naming the path when a
// named path holds no complete checkpoint or its train state is missing or malformed.
std::optional<CheckpointPosition> resolve_resume_request(const std::string& request,
                                                         const std::string& output_dir);

// The position recorded in `dir`/train_state.safetensors. Throws std::runtime_error naming
// the file when it is missing, not a safetensors file, or lacks a position field.
CheckpointPosition read_checkpoint_position(const std::string& dir);

}  // namespace lf
