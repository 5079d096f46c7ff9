// Checkpoint directories: <output_dir>/checkpoints/step-<global_step, 8 digits>/ holding
//   lora.safetensors         the kohya-format LoRA at that step
//   train_state.safetensors  optimizer state tensors + position metadata (TrainState)
//   rng/rank-<r>.safetensors each rank's RNG state
// A checkpoint is staged in a hidden temp directory and renamed into place only when complete,
// so a directory named step-* is always whole; resume skips anything else.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lf {

// Where training stands: enough to continue exactly (same bytes) from here.
struct TrainState {
  std::int64_t global_step = 0;     // optimizer steps completed
  int epoch = 0;                    // 0-based epoch of the next step
  std::int64_t step_in_epoch = 0;   // global batches of `epoch` already consumed
  std::int64_t samples_in_epoch = 0;  // samples of `epoch` already consumed (all ranks)
  std::uint64_t shared_seed = 0;
  int world_size = 1;
  std::int64_t session_id = 0;
  double training_started_at = 0.0;
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
  std::map<std::string, at::Tensor> optimizer;  // LoRAOptimizer::state_dict()
};

std::string checkpoint_dir_name(std::int64_t global_step);  // "step-00000050"

// Resolves --resume: a checkpoint directory itself, or a folder holding step-* checkpoints
// (the newest complete one is taken; torn temp directories are skipped with a warning).
// Throws std::runtime_error naming the path if no complete checkpoint is found.
std::string resolve_checkpoint(const std::string& path);

void save_train_state(const std::string& dir, const TrainState& state);
// Throws std::runtime_error naming the file on a missing or malformed state.
TrainState load_train_state(const std::string& dir);

// Per-rank RNG state file inside a (staging) checkpoint directory.
void save_rng_state(const std::string& dir, int rank, const at::Tensor& state);
// nullopt when the checkpoint has no state for this rank (e.g. resumed on more ranks).
std::optional<at::Tensor> load_rng_state(const std::string& dir, int rank);

// The hidden staging directory root/.step-XXXXXXXX.tmp of `global_step` (every rank writes its
// files there; resolve_checkpoint skips such torn directories).
std::string staging_dir_path(const std::string& root, std::int64_t global_step);

// Staging helpers (run by rank 0 only): make an empty staging dir for `global_step` under
// `root`, and publish it atomically as root/step-XXXXXXXX (an existing one is replaced).
std::string prepare_staging_dir(const std::string& root, std::int64_t global_step);
std::string publish_staging_dir(const std::string& staging, const std::string& root,
                                std::int64_t global_step);
// Removes all but the newest `keep` complete checkpoints (keep <= 0: keep all).
void prune_checkpoints(const std::string& root, int keep);

}  // namespace lf
