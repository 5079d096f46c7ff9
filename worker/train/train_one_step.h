// One optimizer step of one rank, identical on every rank: for each of the step's global batches
// this rank's inputs, noise and timesteps from the (seed, rank, global_step, micro-batch)
// stream, the loss sum / the step's global sample count, backward; then one fused allreduce of
// [all LoRA grads | loss sum | stop vote], grad-norm clipping and the optimizer step at
// lr(global_step). Mirrors kohya train_network.py's inner loop (accelerator.accumulate,
// backward, clip_grad_norm_, optimizer.step).
#pragma once

#include <cstdint>
#include <functional>

#include "common/data/epoch_plan.h"
#include "worker/train/sample_log.h"
#include "worker/train/training_session.h"

namespace lf {

struct StepResult {
  double loss = 0.0;           // mean loss over the step's samples on all ranks
  double lr = 0.0;             // the reported group's learning rate (TrainingSession::reported_lr)
  int local_samples = 0;       // samples this rank trained
  double global_samples = 0;   // samples of the step on all ranks
  double stop_votes = 0.0;     // ranks that asked to stop (SIGTERM), summed in the allreduce
  double data_wait_seconds = 0.0;
  double allreduce_seconds = 0.0;
};

// Trains global batches [begin, end) of `plan` as one optimizer step at s.state.global_step
// (which it does not advance: the loop owns the position). stop_requested (may be empty) is
// polled once, just before the allreduce, for this rank's stop vote.
// Samples are appended to `sample_log` when it is enabled. Throws std::runtime_error when the
// global loss is not finite (naming the base checkpoint when no update happened yet), and
// whatever the inputs or the collective throw.
StepResult train_one_step(TrainingSession& s, const EpochPlan& plan, std::int64_t begin,
                          std::int64_t end, const std::function<bool()>& stop_requested,
                          SampleLog& sample_log);

}  // namespace lf
