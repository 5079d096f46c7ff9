// Where a rank's training starts when its group resumes: the checkpoint the coordinator chose
// for the group and already checked against the job (coordinator/group_resume.h), opened before
// any model is loaded, and the LoRA, optimizer and position restored from it. The worker neither
// re-resolves nor re-checks the checkpoint; it only makes sure the train state on disk is still
// the one the coordinator planned from.
#pragma once

#include <string>
#include <vector>

#include "worker/core/lora/lora_network.h"
#include "worker/core/train/optimizer.h"
#include "worker/io/checkpoint.h"
#include "worker/rpc/coordinator_client.h"

namespace lf {

// A checkpoint to continue from, read before any model is loaded.
struct ResumePoint {
  std::string dir;
  TrainState state;
};

// Reads the train state of `assigned` (the coordinator's resume point). Throws
// std::runtime_error naming the checkpoint when its position differs from the assigned one
// (the directory was replaced after the coordinator read it: a restart plans again).
ResumePoint open_resume_point(const CheckpointPosition& assigned);

// Restores LoRA weights and optimizer state from `point` and checks that the saved noise
// generator of `rank` is the one this version draws; returns the position to continue at.
// Throws std::runtime_error naming the checkpoint on a mismatch.
TrainState apply_resume_point(ResumePoint point, const JobAssignment& job, int rank,
                              LoRANetwork& lora, LoRAOptimizer& optimizer,
                              const std::vector<std::string>& param_names);

}  // namespace lf
