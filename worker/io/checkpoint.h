// The LibTorch side of checkpoints: the train state (optimizer tensors + position metadata) and
// the per-rank RNG files. Directory layout, staging, publishing with the COMMITTED marker,
// resolution of the newest complete checkpoint and pruning live in
// common/checkpoint/checkpoint_layout.h (torch-free, shared with the coordinator), included here
// so worker code keeps calling resolve_checkpoint, publish_staging_dir... through this header.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <optional>
#include <string>

#include "common/checkpoint/checkpoint_layout.h"
#include "common/checkpoint/train_position.h"

#include "common/data/epoch_plan.h"

namespace lf {

// Where training stands plus the optimizer state: enough to continue exactly (same bytes).
struct TrainState : TrainPosition {
  std::map<std::string, at::Tensor> optimizer;  // LoRAOptimizer::state_dict()
};

// Writes dir/train_state.safetensors atomically (temp, fsync, rename, fsync dir): the optimizer
// tensors, and the position as header metadata (train_position_metadata). Throws
// std::runtime_error naming the file and strerror on I/O errors (e.g. "No space left on device").
// Returns the file's size and SHA-256 as written (for publish_staging_dir's WrittenFiles).
FileDigest save_train_state(const std::string& dir, const TrainState& state);
// Throws std::runtime_error naming the file on a missing or malformed state.
TrainState load_train_state(const std::string& dir);

// Per-rank RNG state file dir/rng/rank-<rank>.safetensors inside a (staging) checkpoint
// directory, written atomically like save_train_state; returns its digest likewise.
FileDigest save_rng_state(const std::string& dir, int rank, const at::Tensor& state);
// "rng/rank-<rank>.safetensors": the RNG file's path relative to the checkpoint dir.
std::string rng_state_file(int rank);
// nullopt when the checkpoint has no state for this rank (e.g. resumed on more ranks).
std::optional<at::Tensor> load_rng_state(const std::string& dir, int rank);

}  // namespace lf
