// A step count that may be given as a ratio of the run's total optimizer steps, as kohya's
// --lr_warmup_steps / --lr_decay_steps (argparse type int_or_float): an integer >= 1 is steps, a
// number below 1 or a percentage ("10%") is a ratio, and the steps it stands for are
// int(ratio * total), rounded down as kohya get_scheduler_fix does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace lf {

struct StepsOrRatio {
  std::int64_t steps = 0;       // when ratio is unset
  std::optional<double> ratio;  // in [0, 1)

  // The steps over a run of `total_steps` optimizer steps.
  std::int64_t resolve(std::int64_t total_steps) const;
  // As YAML would write it: "100", "0.1".
  std::string text() const;
  bool operator==(const StepsOrRatio& other) const {
    return steps == other.steps && ratio == other.ratio;
  }
};

// Reads kohya's forms: "100" (steps), "0.1" or "10%" (ratio). std::nullopt for anything else: a
// negative value, a ratio of 100% or more, or a non-integer of at least 1 ("1.5", which kohya's
// int(value) refuses too).
std::optional<StepsOrRatio> parse_steps_or_ratio(const std::string& text);

}  // namespace lf
