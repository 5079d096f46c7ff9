// The LR lambdas of transformers and diffusers optimization.py, evaluated in double (see header).
#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace lf {
namespace {

[[noreturn]] void invalid(const std::string& what) {
  throw std::invalid_argument("lr_at_step: " + what);
}

// transformers' linear warmup, shared by every schedule with one: s / max(1, W).
double warmup(double s, double w) { return s / std::max(1.0, w); }

// (s - W) / max(1, N - W): how far the decay after the warmup is.
double progress(double s, double w, double n) { return (s - w) / std::max(1.0, n - w); }

// 0.5 (1 + cos(pi * 2 * waves * p)): transformers' cosine with `waves` cosine waves.
double cosine(double waves, double p) { return 0.5 * (1.0 + std::cos(M_PI * waves * 2.0 * p)); }

// transformers get_polynomial_decay_schedule_with_warmup, divided by lr_init as its lambda is.
double polynomial(const LRScheduleOptions& o, double s, double w, double n) {
  if (!(o.initial_lr > o.lr_end)) {
    invalid("polynomial: lr_end (" + std::to_string(o.lr_end) +
            ") must be smaller than the initial lr (" + std::to_string(o.initial_lr) + ")");
  }
  if (s > n) return o.lr_end / o.initial_lr;
  if (!(n > w)) invalid("polynomial: total_steps must exceed warmup_steps");
  const double remaining = 1.0 - (s - w) / (n - w);
  return ((o.initial_lr - o.lr_end) * std::pow(remaining, o.power) + o.lr_end) / o.initial_lr;
}

// transformers get_inverse_sqrt_schedule: 1 / sqrt((s + timescale - W) / timescale).
double inverse_sqrt(const LRScheduleOptions& o, double s, double w) {
  const double timescale =
      o.timescale > 0 ? static_cast<double>(o.timescale) : (o.warmup_steps > 0 ? w : 10000.0);
  return 1.0 / std::sqrt((s + timescale - w) / timescale);
}

// One phase shape of transformers' WSD schedule at progress p in [0, 1).
double wsd_shape(const std::string& type, double p, bool warming_up, double waves) {
  if (type == "linear") return warming_up ? p : 1.0 - p;
  if (type == "cosine") {
    return warming_up ? 0.5 * (1.0 - std::cos(M_PI * p)) : cosine(waves, p);
  }
  if (type == "1-sqrt") return warming_up ? 1.0 - std::sqrt(1.0 - p) : 1.0 - std::sqrt(p);
  invalid("warmup_stable_decay: unknown warmup/decay type \"" + type +
          "\" (valid: linear, cosine, 1-sqrt)");
}

// transformers get_wsd_schedule with num_stable_steps = N - W - D, as kohya passes it.
double warmup_stable_decay(const LRScheduleOptions& o, int64_t step) {
  const int64_t w = o.warmup_steps;
  const int64_t d = o.decay_steps;
  const int64_t stable = o.total_steps - w - d;
  if (d < 0 || stable < 0) {
    invalid("warmup_stable_decay: warmup_steps + decay_steps (" + std::to_string(w + d) +
            ") exceed total_steps (" + std::to_string(o.total_steps) + ")");
  }
  const double r = o.min_lr_rate;
  const double waves = o.num_cycles / 2.0;
  const double s = static_cast<double>(step);
  if (step < w) {
    const double f = wsd_shape(o.warmup_type, s / std::max<double>(1, w), true, waves);
    return std::max(0.0, f * (1.0 - r) + r);
  }
  if (step < w + stable) return 1.0;
  if (step < w + stable + d) {
    const double p = static_cast<double>(step - w - stable) / std::max<double>(1, d);
    return std::max(0.0, wsd_shape(o.decay_type, p, false, waves) * (1.0 - r) + r);
  }
  return r;
}

// diffusers get_piecewise_constant_schedule: the first rule whose step lies beyond `step`.
double piecewise_constant(const LRScheduleOptions& o, int64_t step) {
  std::map<int64_t, double> rules;  // diffusers' rules_dict: a later rule for a step replaces
  for (const auto& [until, multiple] : o.step_rules) rules[until] = multiple;
  for (const auto& [until, multiple] : rules) {
    if (step < until) return multiple;
  }
  return o.final_multiple;
}

// lambda(s) of the schedules with transformers' warmup in front.
double factor_after_warmup(const LRScheduleOptions& o, int64_t step) {
  const double s = static_cast<double>(step);
  const double w = static_cast<double>(o.warmup_steps);
  const double n = static_cast<double>(o.total_steps);
  if (step < o.warmup_steps) return warmup(s, w);
  const std::string& name = o.name;
  if (name == "constant_with_warmup") return 1.0;
  if (name == "linear") return std::max(0.0, (n - s) / std::max(1.0, n - w));
  if (name == "cosine") return std::max(0.0, cosine(o.cosine_num_cycles, progress(s, w, n)));
  if (name == "cosine_with_restarts") {
    const double p = progress(s, w, n);
    if (p >= 1.0) return 0.0;
    return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * std::fmod(o.num_cycles * p, 1.0))));
  }
  if (name == "polynomial") return polynomial(o, s, w, n);
  if (name == "inverse_sqrt") return inverse_sqrt(o, s, w);
  // cosine_with_min_lr
  const double f = cosine(o.num_cycles / 2.0, progress(s, w, n));
  return std::max(0.0, f * (1.0 - o.min_lr_rate) + o.min_lr_rate);
}

}  // namespace

const std::vector<std::string>& lr_schedule_names() {
  static const std::vector<std::string> names = {"constant",
                                                 "constant_with_warmup",
                                                 "linear",
                                                 "cosine",
                                                 "cosine_with_restarts",
                                                 "polynomial",
                                                 "inverse_sqrt",
                                                 "cosine_with_min_lr",
                                                 "warmup_stable_decay",
                                                 "piecewise_constant"};
  return names;
}

double lr_at_step(const LRScheduleOptions& o, int64_t step) {
  // base_lr 0 is valid, as in torch.optim (it freezes the weights up to weight decay).
  if (step < 0 || o.warmup_steps < 0 || o.total_steps < 0 || !(o.base_lr >= 0)) {
    invalid("step, warmup_steps, total_steps and base_lr must be >= 0");
  }
  const auto& names = lr_schedule_names();
  if (std::find(names.begin(), names.end(), o.name) == names.end()) {
    std::string valid;
    for (const auto& n : names) valid += (valid.empty() ? "" : ", ") + n;
    invalid("unknown schedule \"" + o.name + "\" (valid: " + valid + ")");
  }
  if (o.num_cycles < 1) invalid("num_cycles must be >= 1");
  if (o.name == "constant") {
    if (o.warmup_steps != 0) {
      invalid("the \"constant\" schedule takes no warmup; use \"constant_with_warmup\"");
    }
    return o.base_lr;
  }
  if (o.name == "piecewise_constant") return o.base_lr * piecewise_constant(o, step);
  if (o.name == "warmup_stable_decay") return o.base_lr * warmup_stable_decay(o, step);
  return o.base_lr * factor_after_warmup(o, step);
}

}  // namespace lf
