// The LR-schedule keys of the training section (lr_scheduler, lr_warmup_steps, lr_decay_steps,
// lr_scheduler_num_cycles / _power / _timescale / _min_lr_ratio, lr_scheduler_args) checked as
// kohya sd-scripts' get_scheduler_fix and the transformers / diffusers schedule functions it
// calls would check them, and kohya's "key=value" lr_scheduler_args read into typed values. The
// worker builds the schedule from the same reading (worker/train/lr_schedule_setup.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lf {

struct TrainingSection;

// lr_scheduler_args, as kohya parses them (key=value, the value a Python literal: a number, or
// a quoted or bare string), for the keys the schedule accepts beyond kohya's named arguments.
struct LRSchedulerArgs {
  std::optional<double> lr_end;        // polynomial: the lr reached at the end (transformers: 1e-7)
  std::optional<double> min_lr;        // cosine_with_min_lr: the floor as an absolute lr
  // cosine: transformers' num_cycles (its cosine waves; 0.5 = one half-cosine), which kohya
  // leaves to lr_scheduler_args for this schedule.
  std::optional<double> cosine_num_cycles;
  std::string warmup_type = "linear";  // warmup_stable_decay: linear | cosine | 1-sqrt
  std::string decay_type = "cosine";   // warmup_stable_decay: linear | cosine | 1-sqrt
  // piecewise_constant: diffusers' step_rules "m1:s1,m2:s2,...,m_last": multiple m_i while the
  // step is below s_i, m_last after the last one.
  std::vector<std::pair<std::int64_t, double>> step_rules;
  double final_multiple = 1.0;
};

// A problem with one key: "training.<key>" and what is wrong, for a ConfigError.
struct LRScheduleKeyError {
  std::string key;
  std::string problem;
};

// Reads t.lr_scheduler_args for t.lr_scheduler; std::nullopt error when they are valid.
std::pair<LRSchedulerArgs, std::optional<LRScheduleKeyError>> read_lr_scheduler_args(
    const TrainingSection& t);

// Every check of the schedule keys over a run of `total_steps` optimizer steps: adafactor
// without optimizer_type AdaFactor, a warmup on "constant" (kohya
// refuses it), a warmup of at least the total steps, warmup + decay beyond the total
// (warmup_stable_decay), cosine_with_min_lr without a floor, a polynomial lr_end not below
// learning_rate, and lr_scheduler_args. The first problem found, or std::nullopt.
std::optional<LRScheduleKeyError> check_lr_schedule(const TrainingSection& t,
                                                    std::int64_t total_steps);

}  // namespace lf
