// GroupResume: where a newly formed group starts, decided once for all its ranks. It takes the
// ranks' --resume requests, resolves them to one committed checkpoint (or a fresh run), checks
// that checkpoint against the job (check_resume_compatible, and the epoch plan it was trained
// on), replans the rest of the job for the group's world size, and sets an abandoned branch's
// newer checkpoints aside. A plain class: no gRPC, no locking (CoordinatorService calls it under
// its mutex when registration completes).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/checkpoint/train_position.h"
#include "coordinator/job.h"

namespace lf {

// What one rank asked (RegisterRequest).
struct RankResumeRequest {
  std::string resume;     // --resume: "" (fresh), "auto" or a path
  int restart_count = 0;  // lorafleet-launch's restarts of this rank's group
};

class GroupResume {
 public:
  // `job` must outlive this.
  explicit GroupResume(CoordinatorJob& job);

  // Plans the start of a group of ranks.size() ranks (index = rank) and returns the checkpoint
  // it resumes, or nullopt for a fresh run; the job's schedule is set for it (set_world_size,
  // then set_resume). Every refusal throws ConfigError (restarting cannot help: exit 3) naming
  // the checkpoint, file or key: ranks asking different things; a path without a complete
  // checkpoint; a checkpoint whose seed, gradient_accumulation_steps, batch sizes or optimizer
  // differ from the job's; a job whose plan of the checkpoint's epoch differs from the one the
  // checkpoint trained on; a fresh run into an output_dir that holds checkpoints. The job's
  // schedule is left as it was on a refusal.
  //
  // An explicit path repeated by a supervisor's restart (restart_count > 0: lorafleet-launch
  // runs the command line it first ran) reads as "auto" when a committed checkpoint exists, so a
  // restart continues where the job stands. An explicit --resume of an older checkpoint moves
  // the abandoned branch's newer checkpoints to checkpoints/abandoned-<time>/
  // (common/checkpoint/abandoned_checkpoints.h), once the resume is planned.
  std::optional<CheckpointPosition> plan(const std::vector<RankResumeRequest>& ranks);

  // <output_dir>/checkpoints.
  std::string checkpoints_root() const;

 private:
  // The one request of the group, or a ConfigError naming which ranks asked what.
  std::string common_request(const std::vector<RankResumeRequest>& ranks) const;
  // A fresh run must not write over another run's checkpoints.
  void refuse_existing_checkpoints() const;
  // The job's plan of the checkpoint's plan_epoch, served along its lineage, must be the plan
  // the checkpoint trained on (its digest).
  void check_plan(const CheckpointPosition& checkpoint, int world_size) const;
  void set_aside_abandoned_branch(const CheckpointPosition& checkpoint) const;

  CoordinatorJob& job_;
};

}  // namespace lf
