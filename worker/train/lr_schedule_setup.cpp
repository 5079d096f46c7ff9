// kohya's schedule keys mapped onto the core's LRScheduleOptions (see header).
#include "worker/train/lr_schedule_setup.h"

#include "common/config/lr_schedule_keys.h"
#include "common/config/optimizer_keys.h"

namespace lf {

LRScheduleOptions lr_schedule_options(const TrainingSection& t, std::int64_t total_steps) {
  if (const auto e = check_lr_schedule(t, total_steps)) {
    throw ConfigError("training." + e->key + ": " + e->problem);
  }
  const LRSchedulerArgs args = read_lr_scheduler_args(t).first;
  LRScheduleOptions o;
  o.name = t.lr_scheduler;
  o.base_lr = 1.0;
  o.initial_lr = t.learning_rate;
  o.total_steps = total_steps;
  o.warmup_steps = t.lr_warmup_steps.resolve(total_steps);  // kohya: int(ratio * total)
  o.decay_steps = t.lr_decay_steps.resolve(total_steps);
  o.num_cycles = t.lr_scheduler_num_cycles;
  o.power = t.lr_scheduler_power;
  o.lr_end = args.lr_end.value_or(1e-7);
  o.cosine_num_cycles = args.cosine_num_cycles.value_or(0.5);
  o.timescale = t.lr_scheduler_timescale;
  // transformers: min_lr is a ratio of optimizer.defaults["lr"], kohya's learning_rate.
  o.min_lr_rate =
      args.min_lr ? *args.min_lr / t.learning_rate : t.lr_scheduler_min_lr_ratio.value_or(0.0);
  o.warmup_type = args.warmup_type;
  o.decay_type = args.decay_type;
  o.step_rules = args.step_rules;
  o.final_multiple = args.final_multiple;
  // kohya get_scheduler_fix: with AdaFactor's relative_step the optimizer makes its own lr and
  // the "adafactor" schedule only reports it; schedule-free runs under a dummy scheduler. Either
  // way the lr argument stays learning_rate.
  const OptimizerChoice optimizer = read_optimizer(t).first;
  if (t.lr_scheduler == "adafactor" || optimizer.relative_step || optimizer.schedule_free) {
    o.name = "constant";
    o.warmup_steps = 0;
  }
  return o;
}

}  // namespace lf
