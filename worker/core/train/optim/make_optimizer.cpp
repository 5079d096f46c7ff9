// kohya optimizer_type + optimizer_args -> a LoRAOptimizer (see header).
#include "train/optim/make_optimizer.h"

#include <set>
#include <stdexcept>

#include "train/optim/adafactor.h"
#include "train/optim/adamw.h"
#include "train/optim/dadapt_adam.h"
#include "train/optim/lion.h"
#include "train/optim/prodigy.h"
#include "train/optim/schedule_free_adamw.h"
#include "train/optim/sgd.h"

namespace lf {
namespace {

// Reads spec.args by name; finish() refuses what was not read.
class ArgReader {
 public:
  explicit ArgReader(const OptimizerSpec& spec) : spec_(spec) {}

  void number(const char* name, double& out) {
    if (const auto* v = get(name, 1)) out = (*v)[0];
  }
  void integer(const char* name, int64_t& out) {
    if (const auto* v = get(name, 1)) out = static_cast<int64_t>((*v)[0]);
  }
  void flag(const char* name, bool& out) {
    if (const auto* v = get(name, 1)) out = (*v)[0] != 0;
  }
  void optional(const char* name, std::optional<double>& out) {
    if (const auto* v = get(name, 1)) out = (*v)[0];
  }
  void pair(const char* name, double& first, double& second) {
    if (const auto* v = get(name, 2)) {
      first = (*v)[0];
      second = (*v)[1];
    }
  }
  void finish() const {
    for (const auto& [name, value] : spec_.args) {
      if (!read_.count(name)) {
        throw std::invalid_argument("optimizer_args: " + spec_.type + " takes no argument '" +
                                    name + "'");
      }
    }
  }

 private:
  const std::vector<double>* get(const std::string& name, std::size_t arity) {
    read_.insert(name);
    auto it = spec_.args.find(name);
    if (it == spec_.args.end()) return nullptr;
    if (it->second.size() != arity) {
      throw std::invalid_argument("optimizer_args: " + spec_.type + "'s " + name + " takes " +
                                  (arity == 1 ? "one value" : std::to_string(arity) + " values") +
                                  ", got " + std::to_string(it->second.size()));
    }
    return &it->second;
  }

  const OptimizerSpec& spec_;
  std::set<std::string> read_;
};

AdamWOptions adamw(ArgReader& a) {
  AdamWOptions o;
  a.pair("betas", o.beta1, o.beta2);
  a.number("eps", o.eps);
  a.number("weight_decay", o.weight_decay);
  return o;
}

LionOptions lion(ArgReader& a) {
  LionOptions o;
  a.pair("betas", o.beta1, o.beta2);
  a.number("weight_decay", o.weight_decay);
  return o;
}

SGDOptions sgd(ArgReader& a, bool kohya_nesterov) {
  SGDOptions o;
  if (kohya_nesterov) {
    o.momentum = 0.9;  // kohya: "SGD with Nesterov must be with momentum, set momentum to 0.9"
    o.nesterov = true;
  } else {
    a.flag("nesterov", o.nesterov);
  }
  a.number("momentum", o.momentum);
  a.number("dampening", o.dampening);
  a.number("weight_decay", o.weight_decay);
  return o;
}

AdafactorOptions adafactor(ArgReader& a) {
  AdafactorOptions o;
  a.pair("eps", o.eps1, o.eps2);
  a.number("clip_threshold", o.clip_threshold);
  a.number("decay_rate", o.decay_rate);
  a.optional("beta1", o.beta1);
  a.number("weight_decay", o.weight_decay);
  a.flag("scale_parameter", o.scale_parameter);
  a.flag("relative_step", o.relative_step);
  a.flag("warmup_init", o.warmup_init);
  // kohya: "warmup_init requires relative_step" -> it turns relative_step on.
  if (o.warmup_init) o.relative_step = true;
  return o;
}

ProdigyOptions prodigy(ArgReader& a) {
  ProdigyOptions o;
  a.pair("betas", o.beta1, o.beta2);
  a.optional("beta3", o.beta3);
  a.number("eps", o.eps);
  a.number("weight_decay", o.weight_decay);
  a.flag("decouple", o.decouple);
  a.flag("use_bias_correction", o.use_bias_correction);
  a.flag("safeguard_warmup", o.safeguard_warmup);
  a.number("d0", o.d0);
  a.number("d_coef", o.d_coef);
  a.number("growth_rate", o.growth_rate);
  a.integer("slice_p", o.slice_p);
  return o;
}

DAdaptAdamOptions dadapt_adam(ArgReader& a) {
  DAdaptAdamOptions o;
  a.pair("betas", o.beta1, o.beta2);
  a.number("eps", o.eps);
  a.number("weight_decay", o.weight_decay);
  a.flag("decouple", o.decouple);
  a.flag("use_bias_correction", o.use_bias_correction);
  a.number("d0", o.d0);
  a.number("growth_rate", o.growth_rate);
  return o;
}

ScheduleFreeAdamWOptions schedule_free(ArgReader& a) {
  ScheduleFreeAdamWOptions o;
  a.pair("betas", o.beta1, o.beta2);
  a.number("eps", o.eps);
  a.number("weight_decay", o.weight_decay);
  a.integer("warmup_steps", o.warmup_steps);
  a.number("r", o.r);
  a.number("weight_lr_power", o.weight_lr_power);
  return o;
}

// Refuses unread arguments, then builds the optimizer from the options read.
template <class Optimizer, class Options>
std::unique_ptr<LoRAOptimizer> build(const ArgReader& a, const Options& o,
                                     std::vector<torch::Tensor>& params,
                                     std::vector<double>& lr_multipliers) {
  a.finish();
  return std::make_unique<Optimizer>(std::move(params), o, std::move(lr_multipliers));
}

}  // namespace

const std::map<std::string, std::vector<std::string>>& optimizer_types() {
  static const std::map<std::string, std::vector<std::string>> types = {
      {"AdamW", {"betas", "eps", "weight_decay"}},
      {"Lion", {"betas", "weight_decay"}},
      {"SGDNesterov", {"momentum", "dampening", "weight_decay"}},
      {"SGD", {"momentum", "dampening", "weight_decay", "nesterov"}},
      {"AdaFactor",
       {"eps", "clip_threshold", "decay_rate", "beta1", "weight_decay", "scale_parameter",
        "relative_step", "warmup_init"}},
      {"Prodigy",
       {"betas", "beta3", "eps", "weight_decay", "decouple", "use_bias_correction",
        "safeguard_warmup", "d0", "d_coef", "growth_rate", "slice_p"}},
      {"DAdaptAdam",
       {"betas", "eps", "weight_decay", "decouple", "use_bias_correction", "d0", "growth_rate"}},
      {"AdamWScheduleFree",
       {"betas", "eps", "weight_decay", "warmup_steps", "r", "weight_lr_power"}},
  };
  return types;
}

std::unique_ptr<LoRAOptimizer> make_optimizer(const OptimizerSpec& spec,
                                              std::vector<torch::Tensor> params,
                                              std::vector<double> lr_multipliers) {
  ArgReader a(spec);
  auto& p = params;
  auto& m = lr_multipliers;
  const std::string& t = spec.type;
  if (t == "AdamW") return build<AdamWOptimizer>(a, adamw(a), p, m);
  if (t == "Lion") return build<LionOptimizer>(a, lion(a), p, m);
  if (t == "SGDNesterov" || t == "SGD") {
    const SGDOptions o = sgd(a, t == "SGDNesterov");
    a.finish();
    return std::make_unique<SGDOptimizer>(std::move(p), o, std::move(m), t);
  }
  if (t == "AdaFactor") return build<AdafactorOptimizer>(a, adafactor(a), p, m);
  if (t == "Prodigy") return build<ProdigyOptimizer>(a, prodigy(a), p, m);
  if (t == "DAdaptAdam") return build<DAdaptAdamOptimizer>(a, dadapt_adam(a), p, m);
  if (t == "AdamWScheduleFree") return build<ScheduleFreeAdamWOptimizer>(a, schedule_free(a), p, m);
  throw std::invalid_argument("optimizer_type: '" + t + "' is not implemented");
}

}  // namespace lf
