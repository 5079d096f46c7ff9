// Where a rank's training starts: refusing to write over another run's checkpoints, opening the
// checkpoint the coordinator chose for the group and checking it against the job before any
// model is loaded, and restoring the LoRA, optimizer and position from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config/job_config.h"
#include "worker/core/lora/lora_network.h"
#include "worker/core/train/optimizer.h"
#include "worker/io/checkpoint.h"
#include "worker/rpc/coordinator_client.h"

namespace lf {

// A checkpoint to continue from, checked against this job before any model is loaded.
struct ResumePoint {
  std::string dir;
  TrainState state;
};

// A fresh run must not write over another run's checkpoints: throws ConfigError (exit 3) naming
// the config file (config_name), output.output_dir and <out_dir>/checkpoints/step-*, and
// suggesting --resume, when one exists.
void refuse_existing_checkpoints(const std::string& config_name, const std::string& out_dir);

// The per-dataset batch sizes of this job, as the checkpoint records them.
std::vector<std::int64_t> batch_sizes_of(const JobConfig& config);

// Opens the checkpoint the coordinator chose for the group (it may have been written by another
// number of ranks: the coordinator replanned the rest of the job for this one). Throws
// std::runtime_error naming the checkpoint when its seed or position differ from the job's, and
// ConfigError (exit 3) when its optimizer_type, gradient accumulation or batch sizes do.
ResumePoint open_resume_point(const JobAssignment& job, const JobConfig& config);

// Restores LoRA weights and optimizer state from `point` and checks that the saved noise
// generator of `rank` is the one this version draws; returns the position to continue at.
// Throws std::runtime_error naming the checkpoint on a mismatch.
TrainState apply_resume_point(ResumePoint point, const JobAssignment& job, int rank,
                              LoRANetwork& lora, LoRAOptimizer& optimizer,
                              const std::vector<std::string>& param_names);

}  // namespace lf
