// Resolution of a group's --resume request on the coordinator, without LibTorch: which
// checkpoint directory it names and the training position its train_state.safetensors records
// (read from the safetensors header's metadata only, never the optimizer tensors).
#pragma once

#include <optional>
#include <string>

#include "common/checkpoint/train_position.h"

namespace lf {

// Resolves what the workers' --resume said: "" -> nullopt (fresh run); "auto" -> the newest
// COMMITTED checkpoint under <output_dir>/checkpoints (torn ones skipped with a warning), or
// nullopt when there is none; any other value -> resolve_checkpoint (checkpoint_layout.h): a
// checkpoint directory itself (an error if torn), or the newest committed step-* checkpoint in
// that folder or its checkpoints/ subfolder. Throws std::runtime_error naming the path when a
// named path holds no complete checkpoint or its train state is missing or malformed.
std::optional<CheckpointPosition> resolve_resume_request(const std::string& request,
                                                         const std::string& output_dir);

}  // namespace lf
