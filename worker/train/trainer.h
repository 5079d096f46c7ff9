// The data-parallel training loop of one rank. Every step is one global batch of the
// coordinator's epoch plan (or gradient_accumulation_steps of them); this rank trains on its
// slice, gradients are averaged with one fused allreduce (sum of per-rank gradients of
// loss_sum / global_batch_size, so the result is the exact global-batch mean even when the last
// batch of a bucket leaves some ranks short), and every rank applies the same optimizer step, so
// LoRA weights stay identical on all ranks. Setup lives in training_session.h, one optimizer
// step in train_one_step.h; this loop owns epochs, the position, preemption and the checkpoint
// cadence.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <c10/core/Device.h>

#include "common/config/job_config.h"
#include "worker/dist/communicator.h"
#include "worker/rpc/coordinator_client.h"
#include "worker/train/train_observer.h"

namespace lf {

// Test hook: an Inf is written into `rank`'s first LoRA gradient in the step that completes
// `global_step` (before the allreduce), to check fp16 loss scaling's skip on every rank.
struct NonFiniteInjection {
  int rank = 0;
  std::int64_t global_step = 0;
};

struct TrainerOptions {
  at::Device device = at::Device(at::kCPU);  // chosen once by the launch environment
  int verify_sync_every = 0;  // > 0: every N steps, check all ranks hold identical LoRA weights
  // > 0: stop once global_step reaches this (checkpoint, then exit cleanly); the job's
  // schedule (max_train_steps, LR) is unchanged, so a later --resume continues exactly.
  std::int64_t stop_at_step = 0;
  // Polled once per step (SIGTERM seen, see worker/app/preemption.h). Its vote rides in the
  // gradient allreduce; once any rank votes, every rank commits a checkpoint after that same
  // step and returns with TrainResult::preempted. Unset: never.
  std::function<bool()> stop_requested;
  // Polled once per step (SIGINT, Ctrl-C, seen): an operator's stop, as `lorafleet-ctl stop`
  // (which the loop reads from the coordinator's heartbeat answers). Its vote rides in the same
  // allreduce; once any rank votes, every rank commits a checkpoint after that step and returns
  // with TrainResult::stopped. Unset: never.
  std::function<bool()> interrupt_requested;
  // --sample-log: "" = off; else every rank appends its trained samples to
  // <sample_log>.rank<r>.jsonl (worker/train/sample_log.h).
  std::string sample_log;
  TrainObserver* observer = nullptr;  // progress bar, metrics (not owned; null = none)
  std::optional<NonFiniteInjection> inject_nonfinite;  // LF_TEST_INJECT_INF_GRAD (tests only)
};

struct TrainResult {
  std::int64_t global_step = 0;
  std::string lora_path;        // final LoRA file
  std::string checkpoint_dir;   // last checkpoint written
  double seconds = 0.0;         // wall time of the training loop
  std::int64_t steps_run = 0;   // steps run by this process (excludes resumed ones)
  bool preempted = false;       // stopped early on a SIGTERM vote, after committing checkpoint_dir
  bool stopped = false;         // stopped early on an operator's stop, after committing it
};

// Runs the job to max_train_steps, from the checkpoint the coordinator chose for the group
// (job.resume) or fresh. An operator's sample-now request (coordinator.operator_ask()) samples
// the images after the step whose allreduce first carried it, once per request. The LR of each step
// is lr_at_step(global_step) with the total job.max_train_steps, which the coordinator recomputes
// on a resume. Throws std::runtime_error (naming the file/key) on bad input, CoordinatorError when
// the coordinator fails, and whatever a collective throws.
TrainResult run_training(const JobConfig& config, const JobAssignment& job, Communicator& comm,
                         CoordinatorClient& coordinator, const TrainerOptions& options);

}  // namespace lf
