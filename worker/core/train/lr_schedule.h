// Learning-rate schedules as functions of the optimizer step: every schedule kohya sd-scripts'
// get_scheduler_fix builds from --lr_scheduler (but adafactor, which follows the Adafactor
// optimizer). Mirrors transformers optimization.py (constant, constant_with_warmup, linear,
// cosine, cosine_with_restarts, polynomial, inverse_sqrt, cosine_with_min_lr,
// warmup_stable_decay) and diffusers optimization.py (piecewise_constant), with the arguments
// kohya passes: num_cycles for cosine_with_restarts, num_cycles / 2 cosine waves for
// cosine_with_min_lr and warmup_stable_decay, and the polynomial's lr_init = the optimizer's lr.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lf {

struct LRScheduleOptions {
  std::string name = "constant";  // kohya --lr_scheduler
  double base_lr = 1e-4;          // what the factor multiplies (1.0 returns the factor itself)
  int64_t warmup_steps = 0;       // W, in optimizer steps
  int64_t total_steps = 0;        // N, total optimizer steps of the run
  // The optimizer's lr (kohya --learning_rate), which transformers' polynomial decay reads as
  // lr_init (optimizer.defaults["lr"]) and a min_lr is a ratio of.
  double initial_lr = 1e-4;
  int64_t decay_steps = 0;   // D: warmup_stable_decay's decay phase (kohya --lr_decay_steps)
  int num_cycles = 1;        // kohya --lr_scheduler_num_cycles, >= 1
  double cosine_num_cycles = 0.5;  // cosine: transformers' num_cycles (kohya lr_scheduler_args)
  double power = 1.0;        // polynomial (kohya --lr_scheduler_power)
  double lr_end = 1e-7;      // polynomial: the lr reached at N (absolute; transformers' default)
  int64_t timescale = 0;     // inverse_sqrt; 0: W, or 10000 when W is 0 (transformers)
  double min_lr_rate = 0.0;  // cosine_with_min_lr / warmup_stable_decay floor, a ratio of lr
  std::string warmup_type = "linear";  // warmup_stable_decay: linear | cosine | 1-sqrt
  std::string decay_type = "cosine";   // warmup_stable_decay: linear | cosine | 1-sqrt
  // piecewise_constant (diffusers step_rules "m1:s1,m2:s2,...,m_last"): the multiple m_i while
  // step < s_i (rules sorted by s_i; of rules for one step the last given wins, as in
  // diffusers' dict), then final_multiple.
  std::vector<std::pair<int64_t, double>> step_rules;
  double final_multiple = 1.0;
};

// The LR used for the optimizer step that follows `step` completed steps (s = step >= 0), i.e.
// base_lr * lambda(s) of the mirrored LambdaLR. With W > 0 the warmup starts at lambda(0) = 0
// (transformers' s / max(1, W)), so the first update runs at lr 0, as in kohya. Throws
// std::invalid_argument for an unknown name, "constant" with warmup_steps != 0 (kohya refuses
// it), a polynomial whose lr_end is not below initial_lr, a warmup_stable_decay whose warmup
// and decay exceed the total, an unknown warmup/decay type, and negative steps or lrs.
double lr_at_step(const LRScheduleOptions& options, int64_t step);

// The schedules lr_at_step knows, in kohya's documentation order.
const std::vector<std::string>& lr_schedule_names();

}  // namespace lf
