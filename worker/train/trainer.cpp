// Training loop (see header). Order of one step, identical on every rank:
//   plan of the epoch (at its start, then a barrier: every rank has it) → train_one_step
//   (inputs, noise, loss, backward, one fused allreduce, clip, optimizer step) → position
//   advanced → sync check, reports → preemption commit or the save cadence.
#include "worker/train/trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "common/checkpoint/checkpoint_layout.h"
#include "common/util/elapsed.h"
#include "common/util/log.h"
#include "worker/dist/parameter_sync.h"
#include "worker/train/checkpoint_writer.h"
#include "worker/train/sample_images.h"
#include "worker/train/sample_log.h"
#include "worker/train/train_one_step.h"
#include "worker/train/training_session.h"
#include "worker/train/validation.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

// The coordinator's plan of the session's current epoch, checked against the position: a
// resumed epoch must continue the reg walk exactly where the checkpoint left it. Starts this
// group's segment of the plan's lineage: a new epoch starts a new lineage; a group of another
// size than the checkpoint's continues the plan it was served (the coordinator continued it on
// this world size) in a segment of its own.
EpochPlan start_epoch(TrainingSession& s) {
  TrainState& state = s.state;
  if (state.epoch >= s.job.num_epochs) {
    throw std::runtime_error("plan exhausted at epoch " + std::to_string(state.epoch) +
                             " before max_train_steps " + std::to_string(s.job.max_train_steps));
  }
  EpochPlan plan = s.coordinator.get_epoch_plan(state.epoch);
  if (!state.reg_cursor.empty() && state.reg_cursor != plan.reg_cursor_begin) {
    throw std::runtime_error(
        "the plan of epoch " + std::to_string(state.epoch + 1) +
        " starts its regularization images elsewhere than the checkpoint recorded; the "
        "dataset or dataset.reg_selection changed since the checkpoint was written");
  }
  state.reg_cursor = plan.reg_cursor_begin;
  if (state.step_in_epoch == 0) state.plan_lineage.clear();
  if (state.plan_lineage.empty() || state.plan_lineage.back().world_size != s.world_size) {
    state.plan_lineage.push_back({s.world_size, 0});
  }
  if (s.rank == 0) {
    const auto num_batches = static_cast<std::int64_t>(plan.batches.size());
    const std::int64_t accum = s.config.training.gradient_accumulation_steps;
    LF_INFO("epoch " << state.epoch + 1 << "/" << s.job.num_epochs << ": " << num_batches
                     << " batches, " << (num_batches + accum - 1) / accum << " optimizer steps, "
                     << plan.num_samples() << " samples (" << plan.reg_indices.size()
                     << " regularization from " << plan.reg_images_used << " reg images, "
                     << plan.reg_images_unused << " not used this epoch)");
  }
  return plan;
}

// Every rank holds its plan of the epoch before any trains on it. A plan can take as long as
// the coordinator is away (a restart: the fetch retries for up to 10 minutes); the ranks that got
// theirs wait here, bounded by cluster.rendezvous_timeout_seconds, instead of in the first
// step's allreduce, whose collective_timeout would end the group. Found by the chaos run: a
// coordinator killed while the ranks fetched a plan (some had it, one did not) cost a restart.
void wait_for_every_plan(TrainingSession& s) {
  if (s.world_size == 1) return;
  s.comm.set_timeout(std::chrono::seconds(s.config.cluster.rendezvous_timeout_seconds));
  s.comm.barrier();
  s.comm.set_timeout(std::chrono::seconds(s.config.cluster.collective_timeout));
}

// Moves the position past global batches [begin, end) of `plan`, trained as one step; at the
// end of the epoch the position is the start of the next one.
void advance_position(TrainState& state, const EpochPlan& plan, std::int64_t begin,
                      std::int64_t end, double global_samples) {
  state.global_step += 1;
  state.plan_lineage.back().batches += end - begin;
  state.step_in_epoch = end;
  state.samples_in_epoch += static_cast<std::int64_t>(global_samples);
  if (state.step_in_epoch == static_cast<std::int64_t>(plan.batches.size())) {
    state.epoch += 1;
    state.step_in_epoch = 0;
    state.samples_in_epoch = 0;
    state.reg_cursor = plan.reg_cursor_end;
  }
}

// Tells the observer and (asynchronously) the coordinator about the step just completed.
// `up` keeps the latest validation loss between calls (the coordinator gets it with every
// report).
void report_step(TrainingSession& s, TrainObserver& observer, const StepResult& r, int epoch,
                 double step_seconds, std::int64_t local_samples_total, ProgressUpdate& up) {
  StepReport report;
  report.global_step = s.state.global_step;
  report.epoch = epoch;
  report.loss = r.loss;
  report.learning_rate = r.lr;
  report.local_samples = r.local_samples;
  report.step_seconds = step_seconds;
  report.allreduce_seconds = r.allreduce_seconds;
  report.data_wait_seconds = r.data_wait_seconds;
  report.grad_norm = r.grad_norm;
  report.skipped = r.skipped;
  report.loss_scale = r.loss_scale;
  report.global_samples = r.global_samples;
  report.part_lrs = r.part_lrs;
  observer.on_step(report);
  up.rank = s.rank;
  up.global_step = s.state.global_step;
  up.epoch = epoch;  // 0-based, as the coordinator's lorafleet_epoch
  up.loss = r.loss;
  up.learning_rate = r.lr;
  up.samples = local_samples_total;
  up.step_seconds = step_seconds;
  up.allreduce_seconds = r.allreduce_seconds;
  up.data_wait_seconds = r.data_wait_seconds;
  up.samples_per_second = step_seconds > 0 ? r.local_samples / step_seconds : 0.0;
  s.coordinator.report_progress_async(up);
}

// kohya's periodic saves after a step that is not the last: at the end of every Nth epoch
// (save_every_n_epochs / save_n_epoch_ratio), else every save_every_n_steps steps. One
// checkpoint per step: an epoch save that falls on a step save is named by its epoch.
void save_periodically(TrainingSession& s, CheckpointWriter& checkpoints, const EpochPlan& plan,
                       int step_epoch) {
  const TrainState& state = s.state;
  const int period = epoch_save_period(s.config.training, s.job.num_epochs);
  const bool epoch_ended = state.epoch > step_epoch;
  if (epoch_ended && period > 0 && state.epoch % period == 0) {
    checkpoints.write(state, SaveReason::kEpoch, plan);
    return;
  }
  const int save_every = s.config.training.save_every_n_steps;
  if (save_every > 0 && state.global_step % save_every == 0) {
    checkpoints.write(state, SaveReason::kStep, plan);
  }
}

// kohya's sample images after a step: every sample_every_n_steps steps, or at the end of every
// sample_every_n_epochs-th epoch (the step ended epoch `step_epoch`, 0-based).
// `now`: an operator's sample-now request reached this step (every rank agrees).
void sample_after_step(TrainingSession& s, SampleImages& samples, TrainObserver& observer,
                       int step_epoch, bool now) {
  const std::int64_t step = s.state.global_step;
  if (samples.due_after_step(step) || now) samples.generate(s, step, std::nullopt, &observer);
  if (s.state.epoch > step_epoch && samples.due_after_epoch(s.state.epoch)) {
    samples.generate(s, step, s.state.epoch, &observer);
  }
}

// kohya's validation after a step: every validate_every_n_steps steps, and at the end of every
// (validate_every_n_epochs-th) epoch; run once when both are due, reported as both. The
// coordinator gets it with `progress`, resent now (the next report may be the job's end).
void validate_after_step(TrainingSession& s, const Validation& v, TrainObserver& observer,
                         int step_epoch, ProgressUpdate& progress) {
  const bool step_due = v.due_after_step(s.state.global_step);
  const bool epoch_due = s.state.epoch > step_epoch && v.due_after_epoch(step_epoch + 1);
  if (!step_due && !epoch_due) return;
  const ValidationResult r = v.run(s);
  if (s.rank == 0) {
    LF_INFO("validation loss " << r.loss << " after global_step " << s.state.global_step << " ("
                               << r.images << " held-out images x " << r.timesteps << " timesteps, "
                               << r.seconds << " s)");
  }
  ValidationReport report{s.state.global_step, 0, r.loss, r.images, r.timesteps, r.seconds};
  if (step_due) observer.on_validation(report);
  report.epoch = step_epoch + 1;
  if (epoch_due) observer.on_validation(report);
  progress.validation_loss = r.loss;
  progress.validation_step = s.state.global_step;
  s.coordinator.report_progress_async(progress);
}

}  // namespace

TrainResult run_training(const JobConfig& config, const JobAssignment& job, Communicator& comm,
                         CoordinatorClient& coordinator, const TrainerOptions& options) {
  TrainingSession s(config, job, comm, coordinator, options.device);
  TrainState& state = s.state;
  TrainObserver no_observer;
  TrainObserver& observer = options.observer ? *options.observer : no_observer;
  const fs::path out_dir(config.output.output_dir);
  if (s.rank == 0) fs::create_directories(out_dir / "checkpoints");
  CheckpointWriter checkpoints{
      config,       job,           s.dataset,
      comm,         coordinator,   *s.lora,
      *s.optimizer, s.param_names, family_name(s.base.models.preset.family),
      false};
  SampleLog sample_log(options.sample_log, s.rank);
  SampleImages samples(config);
  const Validation validation(config, s);
  if (s.rank == 0 && validation.enabled()) {
    LF_INFO("validation: " << s.dataset.num_validation_images << " held-out images, at most "
                           << (config.training.max_validation_steps > 0
                                   ? std::to_string(config.training.max_validation_steps)
                                   : std::string("all"))
                           << " batches at 4 fixed timesteps, every "
                           << (config.training.validate_every_n_steps > 0
                                   ? std::to_string(config.training.validate_every_n_steps) +
                                         " steps and every "
                                   : std::string())
                           << (config.training.validate_every_n_epochs > 0
                                   ? std::to_string(config.training.validate_every_n_epochs)
                                   : std::string("1"))
                           << " epoch(s)");
  }
  ProgressUpdate progress;  // the latest report, with the latest validation loss
  TrainResult result;
  std::int64_t local_samples_total = 0;
  EpochPlan plan;
  const std::int64_t stop_at =
      options.stop_at_step > 0 ? std::min<std::int64_t>(options.stop_at_step, job.max_train_steps)
                               : job.max_train_steps;
  const std::int64_t accum = config.training.gradient_accumulation_steps;
  // Operator sample-now requests handled so far; every rank counts the same, from the votes.
  std::int64_t sample_now_handled = job.sample_now_id;
  StepHooks hooks;
  hooks.inject_nonfinite = options.inject_nonfinite;
  hooks.votes = [&] {
    const OperatorAsk ask = coordinator.operator_ask();
    StepVotes v;
    v.preempt = options.stop_requested && options.stop_requested() ? 1.0 : 0.0;
    const bool interrupted = options.interrupt_requested && options.interrupt_requested();
    v.operator_stop = ask.stop || interrupted ? 1.0 : 0.0;
    v.sample_now = ask.sample_now_id > sample_now_handled ? 1.0 : 0.0;
    return v;
  };
  observer.on_start(job.max_train_steps, state.global_step);
  // kohya calls sample_images with epoch 0 before training: the images are named e000000.
  if (samples.due_at_start(state.global_step)) samples.generate(s, 0, 0, &observer);
  if (samples.missing_at_resume(s, state.global_step)) {
    samples.generate(s, state.global_step, std::nullopt, &observer);
  }
  // Setup collectives waited as long as rendezvous allows (ranks load and cache at their own
  // pace); from here on every collective is one training step's.
  comm.set_timeout(std::chrono::seconds(config.cluster.collective_timeout));
  const auto loop_start = SteadyClock::now();
  while (state.global_step < stop_at && !result.preempted && !result.stopped) {
    const auto plan_t0 = SteadyClock::now();
    plan = start_epoch(s);
    wait_for_every_plan(s);
    double plan_wait = seconds_since(plan_t0);  // charged to the first step of the epoch
    const auto num_batches = static_cast<std::int64_t>(plan.batches.size());
    for (std::int64_t b = state.step_in_epoch; b < num_batches && state.global_step < stop_at;) {
      // A newer generation formed without this rank (its peer was restarted): stop, exit 75.
      coordinator.throw_if_superseded();
      const auto step_t0 = SteadyClock::now();
      const std::int64_t end = std::min(num_batches, b + accum);
      StepResult r = train_one_step(s, plan, b, end, hooks, sample_log);
      r.data_wait_seconds += plan_wait;
      plan_wait = 0.0;
      const int step_epoch = state.epoch;
      advance_position(state, plan, b, end, r.global_samples);
      local_samples_total += r.local_samples;
      result.steps_run += 1;
      b = end;
      if (options.verify_sync_every > 0 && state.global_step % options.verify_sync_every == 0) {
        const std::string digest = verify_parameters_in_sync(comm, s.params);
        LF_INFO("sync check global_step " << state.global_step << " loss " << r.loss
                                          << " lora_sha256 " << digest);
      }
      report_step(s, observer, r, step_epoch, seconds_since(step_t0), local_samples_total,
                  progress);
      const bool last = state.global_step >= stop_at;
      if (r.votes.sample_now > 0) ++sample_now_handled;
      const bool operator_stop = r.votes.operator_stop > 0;
      if ((operator_stop || r.votes.preempt > 0) && !last) {
        // Every rank saw the same vote sums in this step's allreduce. An operator's stop wins
        // over a preemption: the job ends (exit 0) instead of awaiting a restart.
        if (s.rank == 0) {
          LF_WARN("stopping after global_step "
                  << state.global_step << " ("
                  << (operator_stop ? "operator stop on " : "SIGTERM on ")
                  << (operator_stop ? r.votes.operator_stop : r.votes.preempt)
                  << " rank(s)): committing a checkpoint");
        }
        // Sample-now requests that reached this step are served before an operator's stop (a
        // preemption's grace is kept for the checkpoint).
        if (operator_stop && r.votes.sample_now > 0) {
          samples.generate(s, state.global_step, std::nullopt, &observer);
        }
        const auto written = checkpoints.write(state, SaveReason::kStep, plan);
        result.preempted = !operator_stop;
        result.stopped = operator_stop;
        result.checkpoint_dir = written.checkpoint_dir;
        result.lora_path = written.lora_path;
        break;
      }
      sample_after_step(s, samples, observer, step_epoch, r.votes.sample_now > 0);
      validate_after_step(s, validation, observer, step_epoch, progress);
      if (!last) save_periodically(s, checkpoints, plan, step_epoch);
    }
  }
  result.seconds = seconds_since(loop_start);
  result.global_step = state.global_step;
  s.memory.end_phase("training");
  if (s.rank == 0) LF_INFO("peak memory: " << s.memory.summary());
  if (result.preempted || result.stopped) {
    observer.on_end(/*finished=*/false);
    return result;
  }
  if (result.steps_run == 0) {
    // Resumed at (or past) the end: the resumed checkpoint is the result. Its own LoRA is named,
    // not <output_name>.safetensors, which may come from another run in the same output_dir.
    if (s.rank == 0) {
      LF_INFO("nothing to train: the checkpoint resumed from, "
              << s.resume_dir << ", is at global_step " << state.global_step
              << ", which already reaches " << stop_at << "; outputs left as they are");
    }
    result.checkpoint_dir = s.resume_dir;
    if (!s.resume_dir.empty()) {
      result.lora_path = (fs::path(s.resume_dir) / kCheckpointLoraFile).string();
    }
    observer.on_end(/*finished=*/false);
    return result;
  }
  const auto written = checkpoints.write(
      state, state.global_step >= job.max_train_steps ? SaveReason::kFinal : SaveReason::kStep,
      plan);
  result.checkpoint_dir = written.checkpoint_dir;
  result.lora_path = written.lora_path;
  observer.on_end(/*finished=*/true);
  return result;
}

}  // namespace lf
