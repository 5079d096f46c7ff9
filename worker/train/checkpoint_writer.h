// Writes one checkpoint collectively (see worker/io/checkpoint.h for the layout):
//   rank 0 prepares a staging dir → every rank saves its RNG state → rank 0 writes the LoRA and
//   the train state → barrier → rank 0 renames the dir into place, writes its COMMITTED marker
//   and the kohya-style LoRA copy next to it → barrier → every rank reports the step to the
//   coordinator.
// A failure on any rank (disk full...) throws naming the file, removes the staging dir
// best-effort and aborts the MPI job (worker_app), so nobody waits in a barrier forever; the
// previous checkpoint is never touched and stays the newest committed one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config/job_config.h"
#include "common/data/dataset.h"
#include "worker/core/lora/lora_network.h"
#include "worker/core/train/optimizer.h"
#include "worker/dist/communicator.h"
#include "worker/io/checkpoint.h"
#include "worker/rpc/coordinator_client.h"
#include "worker/train/lora_copies.h"

namespace lf {

struct CheckpointWriter {
  const JobConfig& config;
  const JobAssignment& job;
  const Dataset& dataset;
  Communicator& comm;
  CoordinatorClient& coordinator;
  LoRANetwork& lora;
  LoRAOptimizer& optimizer;
  std::vector<std::string> param_names;
  std::string family;  // family_name() of the base model: "sd1", "sd2" or "sdxl" (LoRA metadata)
  bool tag_cap_logged = false;  // the ss_tag_frequency cap is logged at the first save only

  struct Written {
    std::string checkpoint_dir;  // <output_dir>/checkpoints/step-XXXXXXXX
    std::string lora_path;       // <output_dir>/<output_name>[-stepXXXXXXXX].safetensors
  };

  // `state` is the position to resume from. `reason` names the LoRA copy as kohya does
  // (lora_copies.h: <output_name>-stepXXXXXXXX, -NNNNNN for the epoch just completed, or
  // <output_name> at the end) and removes the older copy kohya's save_last_n_epochs /
  // save_last_n_steps drop. `plan` (the current epoch's) feeds the ss_* metadata.
  Written write(const TrainState& state, SaveReason reason, const EpochPlan& plan);
};

}  // namespace lf
