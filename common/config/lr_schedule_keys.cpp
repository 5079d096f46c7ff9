// Checks of the LR-schedule keys and kohya's lr_scheduler_args (see header).
#include "common/config/lr_schedule_keys.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "common/config/job_config.h"
#include "common/config/optimizer_keys.h"
#include "common/config/python_literal.h"

namespace lf {
namespace {

std::string num(double d) {
  std::ostringstream os;
  os << d;
  return os.str();
}

// diffusers get_piecewise_constant_schedule's step_rules: "m1:s1,...,m_last".
std::optional<std::string> read_step_rules(const std::string& text, LRSchedulerArgs& out) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) parts.push_back(trim_blanks(part));
  const std::string form =
      "step_rules as \"multiple:step,...,last_multiple\", e.g. "
      "\"1:100,0.5:500,0.1\"";
  if (parts.empty()) return form;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    const auto colon = parts[i].find(':');
    const std::optional<double> m = parse_number(parts[i].substr(0, colon));
    const std::string steps =
        colon == std::string::npos ? "" : trim_blanks(parts[i].substr(colon + 1));
    // Python's int(): digits only ("10.0" is refused, as diffusers' int() refuses it).
    if (!m || steps.empty() || steps.find_first_not_of("0123456789") != std::string::npos) {
      return form + ", got '" + parts[i] + "'";
    }
    out.step_rules.emplace_back(std::stoll(steps), *m);
  }
  const std::optional<double> last = parse_number(parts.back());
  if (!last) return form + ", got '" + parts.back() + "' as the last multiple";
  out.final_multiple = *last;
  return std::nullopt;
}

// The arguments each schedule takes through lr_scheduler_args (kohya passes the others itself).
const std::map<std::string, std::vector<std::string>>& accepted_args() {
  static const std::map<std::string, std::vector<std::string>> args = {
      {"cosine", {"num_cycles"}},
      {"polynomial", {"lr_end"}},
      {"cosine_with_min_lr", {"min_lr"}},
      {"warmup_stable_decay", {"warmup_type", "decay_type"}},
      {"piecewise_constant", {"step_rules"}}};
  return args;
}

// transformers' own names of the arguments kohya fills from its named keys.
const std::map<std::string, std::string>& named_by_kohya() {
  static const std::map<std::string, std::string> names = {
      {"num_warmup_steps", "lr_warmup_steps"},       {"num_training_steps", "max_train_steps"},
      {"num_cycles", "lr_scheduler_num_cycles"},     {"power", "lr_scheduler_power"},
      {"timescale", "lr_scheduler_timescale"},       {"min_lr_rate", "lr_scheduler_min_lr_ratio"},
      {"min_lr_ratio", "lr_scheduler_min_lr_ratio"}, {"num_decay_steps", "lr_decay_steps"},
      {"num_stable_steps", "lr_decay_steps"}};
  return names;
}

std::optional<std::string> read_arg(const std::string& scheduler, const std::string& key,
                                    const std::string& value, LRSchedulerArgs& out) {
  const auto it = accepted_args().find(scheduler);
  const bool accepted = it != accepted_args().end() &&
                        std::find(it->second.begin(), it->second.end(), key) != it->second.end();
  const auto named = named_by_kohya().find(key);
  if (!accepted && named != named_by_kohya().end()) {
    return "'" + key + "' is set by training." + named->second + " (as kohya passes it)";
  }
  if (!accepted) {
    std::string list;
    if (it != accepted_args().end()) {
      for (const auto& a : it->second) list += (list.empty() ? "" : ", ") + a;
    }
    return "'" + key + "' is not an argument of the " + scheduler + " schedule (" +
           (list.empty() ? "it takes none here" : "it takes: " + list) + ")";
  }
  if (key == "num_cycles") {
    const std::optional<double> d = parse_number(value);
    if (!d || *d <= 0) return "expected num_cycles=<a number > 0>, got '" + value + "'";
    out.cosine_num_cycles = *d;
    return std::nullopt;
  }
  if (key == "lr_end" || key == "min_lr") {
    const std::optional<double> d = parse_number(value);
    if (!d || *d < 0) return "expected " + key + "=<a number >= 0>, got '" + value + "'";
    (key == "lr_end" ? out.lr_end : out.min_lr) = *d;
    return std::nullopt;
  }
  if (key == "step_rules") return read_step_rules(unquoted(value), out);
  const std::string type = unquoted(value);
  if (type != "linear" && type != "cosine" && type != "1-sqrt") {
    return "expected " + key + " one of: linear, cosine, 1-sqrt, got '" + type + "'";
  }
  (key == "warmup_type" ? out.warmup_type : out.decay_type) = type;
  return std::nullopt;
}

}  // namespace

std::pair<LRSchedulerArgs, std::optional<LRScheduleKeyError>> read_lr_scheduler_args(
    const TrainingSection& t) {
  LRSchedulerArgs out;
  bool has_step_rules = false;
  for (const std::string& arg : t.lr_scheduler_args) {
    const auto eq = arg.find('=');
    if (eq == std::string::npos) {
      return {out,
              LRScheduleKeyError{"lr_scheduler_args", "expected \"key=value\", got '" + arg + "'"}};
    }
    const std::string key = trim_blanks(arg.substr(0, eq));
    if (auto problem = read_arg(t.lr_scheduler, key, arg.substr(eq + 1), out)) {
      return {out, LRScheduleKeyError{"lr_scheduler_args", *problem}};
    }
    has_step_rules = has_step_rules || key == "step_rules";
  }
  if (t.lr_scheduler == "piecewise_constant" && !has_step_rules) {
    return {out, LRScheduleKeyError{"lr_scheduler_args",
                                    "piecewise_constant needs step_rules=\"m1:s1,...,m_last\" "
                                    "(diffusers' get_piecewise_constant_schedule)"}};
  }
  return {out, std::nullopt};
}

std::optional<LRScheduleKeyError> check_lr_schedule(const TrainingSection& t,
                                                    std::int64_t total_steps) {
  const std::string& name = t.lr_scheduler;
  if (name == "adafactor" && canonical_optimizer_type(t.optimizer_type) != "AdaFactor") {
    return LRScheduleKeyError{
        "lr_scheduler",
        "'adafactor' reports the AdaFactor optimizer's own relative-step lr: it needs "
        "optimizer_type AdaFactor (as kohya asserts), got '" +
            t.optimizer_type + "'"};
  }
  auto [args, args_error] = read_lr_scheduler_args(t);
  if (args_error) return args_error;
  const std::int64_t warmup = t.lr_warmup_steps.resolve(total_steps);
  const std::string total = "the run's total of " + std::to_string(total_steps) + " steps";
  if (name == "constant" && warmup != 0) {
    return LRScheduleKeyError{"lr_warmup_steps",
                              "expected 0 with lr_scheduler constant (as kohya; use "
                              "constant_with_warmup for a warmup), got " +
                                  std::to_string(warmup)};
  }
  if (name != "constant" && name != "piecewise_constant" && warmup >= total_steps && warmup > 0) {
    return LRScheduleKeyError{"lr_warmup_steps", "expected fewer warmup steps than " + total +
                                                     ", got " + std::to_string(warmup) +
                                                     " (nothing would train at the full lr)"};
  }
  const std::int64_t decay = t.lr_decay_steps.resolve(total_steps);
  if (name == "warmup_stable_decay" && warmup + decay > total_steps) {
    return LRScheduleKeyError{"lr_decay_steps", "expected warmup + decay steps within " + total +
                                                    ", got " + std::to_string(warmup) + " + " +
                                                    std::to_string(decay)};
  }
  if (name == "cosine_with_min_lr" && !t.lr_scheduler_min_lr_ratio && !args.min_lr) {
    return LRScheduleKeyError{"lr_scheduler_min_lr_ratio",
                              "expected a floor for cosine_with_min_lr: lr_scheduler_min_lr_ratio, "
                              "or min_lr in lr_scheduler_args (transformers needs one), got none"};
  }
  if (name == "cosine_with_min_lr" && t.lr_scheduler_min_lr_ratio && args.min_lr) {
    return LRScheduleKeyError{"lr_scheduler_min_lr_ratio",
                              "expected either lr_scheduler_min_lr_ratio or min_lr in "
                              "lr_scheduler_args (transformers takes one), got both"};
  }
  if (name == "polynomial" && !(t.learning_rate > args.lr_end.value_or(1e-7))) {
    return LRScheduleKeyError{
        "learning_rate", "expected more than the polynomial schedule's lr_end (" +
                             num(args.lr_end.value_or(1e-7)) + ", as transformers requires), got " +
                             num(t.learning_rate)};
  }
  return std::nullopt;
}

}  // namespace lf
