// One optimizer step of one rank, identical on every rank: for each of the step's global batches
// this rank's inputs, noise and timesteps from the (seed, rank, global_step, micro-batch)
// stream, the loss sum / the step's global sample count, backward; then one fused allreduce of
// [all LoRA grads | loss sum | stop and sample votes], grad-norm clipping and the optimizer step at
// lr(global_step). Mirrors kohya train_network.py's inner loop (accelerator.accumulate,
// backward, clip_grad_norm_, optimizer.step).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "common/data/epoch_plan.h"
#include "worker/dist/parameter_sync.h"
#include "worker/train/sample_log.h"
#include "worker/train/train_observer.h"
#include "worker/train/trainer.h"
#include "worker/train/training_session.h"

namespace lf {

struct StepResult {
  double loss = 0.0;           // mean loss over the step's samples on all ranks
  double lr = 0.0;             // the reported group's learning rate (TrainingSession::reported_lr)
  int local_samples = 0;       // samples this rank trained
  double global_samples = 0;   // samples of the step on all ranks
  StepVotes votes;             // ranks voting to stop / sample, summed in the allreduce
  double data_wait_seconds = 0.0;
  double allreduce_seconds = 0.0;
  double grad_norm = 0.0;      // before clipping (0 when max_grad_norm is 0 or the step skipped)
  // fp16 loss scaling: the step found Inf/NaN gradients and was skipped on every rank (on
  // nonfinite_ranks of them locally); loss_scale is the scale after the step.
  bool skipped = false;
  double nonfinite_ranks = 0.0;
  double loss_scale = 0.0;
  std::vector<PartLearningRate> part_lrs;  // "unet" / "textencoder", for TensorBoard's lr/* tags
};

// What the loop hands one step besides the batches.
struct StepHooks {
  // This rank's votes, polled once just before the allreduce (may be empty: no votes).
  std::function<StepVotes()> votes;
  std::optional<NonFiniteInjection> inject_nonfinite;  // test hook (trainer.h)
};

// Trains global batches [begin, end) of `plan` as one optimizer step at s.state.global_step
// (which it does not advance: the loop owns the position; it updates the loss-scaler fields of
// the state). With mixed precision the forward passes run under autocast in weight_dtype; with
// fp16 the loss is scaled and a step whose gradients hold Inf / NaN on any rank is skipped on
// every rank (LoRA and optimizer state untouched, the scale backs off, the skip is logged).
// Samples are appended to `sample_log` when it is enabled. Throws std::runtime_error when the
// global loss is not finite (naming the base checkpoint when no update happened yet), and
// whatever the inputs or the collective throw.
StepResult train_one_step(TrainingSession& s, const EpochPlan& plan, std::int64_t begin,
                          std::int64_t end, const StepHooks& hooks, SampleLog& sample_log);

}  // namespace lf
