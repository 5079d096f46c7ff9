// The data-parallel training loop of one rank. Every step is one global batch of the
// coordinator's epoch plan; this rank trains on its slice, gradients are averaged with one fused
// allreduce (sum of per-rank gradients of loss_sum / global_batch_size, so the result is the
// exact global-batch mean even when the last batch of a bucket leaves some ranks short), and
// every rank applies the same AdamW step, so LoRA weights stay identical on all ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/config/job_config.h"
#include "worker/dist/communicator.h"
#include "worker/rpc/coordinator_client.h"

namespace lf {

struct TrainerOptions {
  int verify_sync_every = 0;   // > 0: every N steps, check all ranks hold identical LoRA weights
  bool progress_tty = false;   // rank 0 draws a bar (true) or plain lines (false)
  std::string metrics_bind;    // "host:port" of this rank's /metrics ("" = off)
  // > 0: stop once global_step reaches this (checkpoint, then exit cleanly); the job's
  // schedule (max_train_steps, LR) is unchanged, so a later --resume continues exactly.
  std::int64_t stop_at_step = 0;
  int metrics_linger_seconds = 0;  // keep serving /metrics this long after training
  // Polled once per step (SIGTERM seen, see worker/app/preemption.h). Its vote rides in the
  // gradient allreduce; once any rank votes, every rank commits a checkpoint after that same
  // step and returns with TrainResult::preempted. Unset: never.
  std::function<bool()> stop_requested;
  // --sample-log: "" = off; else every rank appends its trained samples to
  // <sample_log>.rank<r>.jsonl (worker/train/sample_log.h).
  std::string sample_log;
};

struct TrainResult {
  std::int64_t global_step = 0;
  std::string lora_path;        // final LoRA file
  std::string checkpoint_dir;   // last checkpoint written
  double seconds = 0.0;         // wall time of the training loop
  std::int64_t steps_run = 0;   // steps run by this process (excludes resumed ones)
  bool preempted = false;       // stopped early on a stop vote, after committing checkpoint_dir
};

// True when LibTorch sees a CUDA device.
bool torch_cuda_available();
// This rank's CUDA device: OMPI_COMM_WORLD_LOCAL_RANK (else LF_LOCAL_RANK, LOCAL_RANK, else
// rank) modulo the device count,
// one GPU per local rank as torchrun's LOCAL_RANK convention.
int cuda_device_for_rank(int rank);

// Runs the job to max_train_steps, from the checkpoint the coordinator chose for the group
// (job.resume) or fresh. The LR of each step is lr_at_step(global_step) with the total
// job.max_train_steps, which the coordinator recomputes on a resume. Throws std::runtime_error
// (naming the file/key) on bad input, CoordinatorError when the coordinator fails, and whatever
// a collective throws.
TrainResult run_training(const JobConfig& config, const JobAssignment& job, Communicator& comm,
                         CoordinatorClient& coordinator, const TrainerOptions& options);

}  // namespace lf
