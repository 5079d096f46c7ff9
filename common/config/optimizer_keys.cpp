// kohya's optimizer_type and optimizer_args (see header).
#include "common/config/optimizer_keys.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "common/config/job_config.h"
#include "common/config/kohya_blocks.h"
#include "common/config/python_literal.h"

namespace lf {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

// Lower-case names (kohya's and the class paths kohya's generic branch imports) -> the type.
const std::map<std::string, std::string>& aliases() {
  static const std::map<std::string, std::string> a = {
      {"adamw", "AdamW"},
      {"torch.optim.adamw", "AdamW"},
      {"lion", "Lion"},
      {"lion_pytorch.lion", "Lion"},
      {"sgdnesterov", "SGDNesterov"},
      {"sgd", "SGD"},
      {"torch.optim.sgd", "SGD"},
      {"adafactor", "AdaFactor"},
      {"transformers.optimization.adafactor", "AdaFactor"},
      {"prodigy", "Prodigy"},
      {"prodigyopt.prodigy", "Prodigy"},
      {"dadaptadam", "DAdaptAdam"},
      {"dadaptation.dadaptadam", "DAdaptAdam"},
      {"adamwschedulefree", "AdamWScheduleFree"},
      {"schedulefree.adamwschedulefree", "AdamWScheduleFree"},
  };
  return a;
}

const OptimizerInfo* info(const std::string& type) {
  for (const auto& o : implemented_optimizers()) {
    if (o.type == type) return &o;
  }
  return nullptr;
}

std::string implemented_list() {
  std::string out;
  for (const auto& o : implemented_optimizers()) out += (out.empty() ? "" : ", ") + o.type;
  return out;
}

// One "key=value" of optimizer_args for `o`, into `args`; the problem, if any.
std::optional<std::string> read_arg(const OptimizerInfo& o, const std::string& arg,
                                    std::map<std::string, std::vector<double>>& args) {
  const auto kv = split_kohya_arg(arg);
  if (!kv) return "expected \"key=value\" (as kohya's optimizer_args), got '" + arg + "'";
  auto form =
      std::find_if(o.args.begin(), o.args.end(), [&](const auto& a) { return a.first == kv->key; });
  if (form == o.args.end()) {
    std::string list;
    for (const auto& a : o.args) list += (list.empty() ? "" : ", ") + a.first;
    return "'" + kv->key + "' is not an argument of " + o.type + " (" + o.reference +
           " takes here: " + list + ")";
  }
  const auto v = parse_py_literal(kv->value);
  using K = PyLiteral::Kind;
  const std::string& f = form->second;
  const bool ok = v && ((f == "pair" && v->kind == K::Numbers && v->numbers.size() == 2) ||
                        (f == "bool" && v->kind == K::Bool) ||
                        (f.rfind("number", 0) == 0 && v->kind == K::Number) ||
                        (f == "number or None" && v->kind == K::None));
  if (!ok) {
    return "expected " + kv->key + "=<" +
           (f == "pair"   ? "two numbers, e.g. 0.9,0.999"
            : f == "bool" ? "True or False"
                          : f) +
           "> for " + o.type + ", got '" + kv->value + "'";
  }
  if (v->kind == K::None) {
    args.erase(kv->key);  // None: the reference's default
  } else {
    args[kv->key] = v->numbers;
  }
  return std::nullopt;
}

}  // namespace

const std::vector<OptimizerInfo>& implemented_optimizers() {
  static const std::vector<OptimizerInfo> list = {
      {"AdamW",
       "torch.optim.AdamW",
       {{"betas", "pair"}, {"eps", "number"}, {"weight_decay", "number"}}},
      {"Lion", "lion_pytorch.Lion", {{"betas", "pair"}, {"weight_decay", "number"}}},
      {"SGDNesterov",
       "torch.optim.SGD(nesterov=True)",
       {{"momentum", "number"}, {"dampening", "number"}, {"weight_decay", "number"}}},
      {"SGD",
       "torch.optim.SGD",
       {{"momentum", "number"},
        {"dampening", "number"},
        {"weight_decay", "number"},
        {"nesterov", "bool"}}},
      {"AdaFactor",
       "transformers.optimization.Adafactor",
       {{"eps", "pair"},
        {"clip_threshold", "number"},
        {"decay_rate", "number"},
        {"beta1", "number or None"},
        {"weight_decay", "number"},
        {"scale_parameter", "bool"},
        {"relative_step", "bool"},
        {"warmup_init", "bool"}}},
      {"Prodigy",
       "prodigyopt.Prodigy",
       {{"betas", "pair"},
        {"beta3", "number or None"},
        {"eps", "number"},
        {"weight_decay", "number"},
        {"decouple", "bool"},
        {"use_bias_correction", "bool"},
        {"safeguard_warmup", "bool"},
        {"d0", "number"},
        {"d_coef", "number"},
        {"growth_rate", "number"},
        {"slice_p", "number"}}},
      {"DAdaptAdam",
       "dadaptation.DAdaptAdam",
       {{"betas", "pair"},
        {"eps", "number"},
        {"weight_decay", "number"},
        {"decouple", "bool"},
        {"use_bias_correction", "bool"},
        {"d0", "number"},
        {"growth_rate", "number"}}},
      {"AdamWScheduleFree",
       "schedulefree.AdamWScheduleFree",
       {{"betas", "pair"},
        {"eps", "number"},
        {"weight_decay", "number"},
        {"warmup_steps", "number"},
        {"r", "number"},
        {"weight_lr_power", "number"}}},
  };
  return list;
}

const std::map<std::string, std::string>& refused_optimizers() {
  static const std::string bnb =
      "bitsandbytes' 8-bit and paged optimizers are not implemented in lorafleet, and it never "
      "substitutes another optimizer silently. A LoRA's float32 optimizer state is small (two "
      "moments of 4 bytes per LoRA parameter: about 0.2 GB for a dim-128 SDXL LoRA), so ";
  static const std::string dadapt =
      "only DAdaptAdam of the D-Adaptation family is implemented (or Prodigy, its successor); "
      "choose one of those";
  static const std::map<std::string, std::string> r = {
      {"adamw8bit", bnb + "use optimizer_type AdamW"},
      {"pagedadamw", bnb + "use optimizer_type AdamW"},
      {"pagedadamw8bit", bnb + "use optimizer_type AdamW"},
      {"pagedadamw32bit", bnb + "use optimizer_type AdamW"},
      {"sgdnesterov8bit", bnb + "use optimizer_type SGDNesterov"},
      {"lion8bit", bnb + "use optimizer_type Lion"},
      {"pagedlion8bit", bnb + "use optimizer_type Lion"},
      {"dadaptation",
       "kohya's DAdaptation is dadaptation's experimental DAdaptAdamPreprint; " + dadapt},
      {"dadaptadampreprint", dadapt},
      {"dadaptadagrad", dadapt},
      {"dadaptadan", dadapt},
      {"dadaptadanip", dadapt},
      {"dadaptlion", dadapt},
      {"dadaptsgd", dadapt},
      {"radamschedulefree", "of schedulefree's optimizers only AdamWScheduleFree is implemented"},
      {"sgdschedulefree", "of schedulefree's optimizers only AdamWScheduleFree is implemented"},
  };
  return r;
}

std::optional<std::string> canonical_optimizer_type(const std::string& name) {
  auto it = aliases().find(lower(trim_blanks(name)));
  if (it == aliases().end()) return std::nullopt;
  return it->second;
}

std::pair<OptimizerChoice, std::optional<OptimizerKeyError>> read_optimizer(
    const TrainingSection& t) {
  OptimizerChoice out;
  const auto type = canonical_optimizer_type(t.optimizer_type);
  if (!type) {
    auto refused = refused_optimizers().find(lower(trim_blanks(t.optimizer_type)));
    const std::string why =
        refused != refused_optimizers().end()
            ? refused->second
            : "expected one of " + implemented_list() + " (kohya's names, case-insensitive)";
    return {out, OptimizerKeyError{"optimizer_type", "'" + t.optimizer_type + "': " + why}};
  }
  out.type = *type;
  if (out.type == "AdamW") {
    out.args = {{"betas", {t.adam_beta1, t.adam_beta2}},
                {"eps", {t.adam_epsilon}},
                {"weight_decay", {t.adam_weight_decay}}};
  }
  if (out.type == "AdaFactor") out.args["relative_step"] = {1.0};  // kohya's default
  const OptimizerInfo& o = *info(out.type);
  for (const std::string& arg : t.optimizer_args) {
    if (auto problem = read_arg(o, arg, out.args)) {
      return {out, OptimizerKeyError{"optimizer_args", *problem}};
    }
  }
  if (out.type == "AdaFactor") {
    // kohya: warmup_init needs relative_step, which it then turns on.
    const auto w = out.args.find("warmup_init");
    if (w != out.args.end() && w->second[0] != 0) out.args["relative_step"] = {1.0};
    out.relative_step = out.args["relative_step"][0] != 0;
  }
  out.schedule_free = out.type == "AdamWScheduleFree";
  return {out, std::nullopt};
}

std::optional<OptimizerKeyError> check_optimizer(const JobConfig& c,
                                                 std::vector<std::string>& warnings) {
  const auto [choice, error] = read_optimizer(c.training);
  if (error) return error;
  const auto& t = c.training;
  const auto& n = c.network;
  const auto warn = [&](const std::string& key, const std::string& text) {
    warnings.push_back(c.source_name + ": key 'training." + key + "': " + text);
  };
  if (choice.type == "Prodigy" || choice.type == "DAdaptAdam") {
    const double unet = n.unet_lr.value_or(t.learning_rate);
    const double te = n.text_encoder_lr.value_or(t.learning_rate);
    const bool both = n.trains_unet() && n.trains_text_encoder() && unet > 0 && te > 0;
    const bool loraplus =
        n.loraplus_lr_ratio || n.loraplus_unet_lr_ratio || n.loraplus_text_encoder_lr_ratio;
    // Block lr weights other than 0 (no modules) and 1 give groups of other lrs.
    bool block_lrs = false;
    for (bool sdxl : {false, true}) {
      try {
        for (double w : kohya_block_lr_weights(n, sdxl).weights) {
          block_lrs = block_lrs || (w != 0 && w != 1);
        }
      } catch (const std::invalid_argument&) {
        // A malformed weight list is reported by the network checks.
      }
    }
    if (block_lrs) {
      return OptimizerKeyError{"optimizer_type",
                               choice.type + " needs one lr for every trained part, or 0 (" +
                                   choice.type + " raises otherwise); got block lr weights "
                                   "(network.down_lr_weight / mid_lr_weight / up_lr_weight) "
                                   "other than 0 and 1"};
    }
    if ((both && unet != te) || loraplus) {
      std::ostringstream os;
      os << choice.type << " needs one lr for every trained part, or 0 (" << choice.type
         << " raises otherwise); got "
         << (loraplus ? std::string("LoRA+ ratios")
                      : "unet_lr " + std::to_string(unet) + " and text_encoder_lr " +
                            std::to_string(te));
      return OptimizerKeyError{"optimizer_type", os.str()};
    }
    if (t.learning_rate <= 0.1) {
      warn("learning_rate", "is low for " + choice.type +
                                ", which scales it by its own estimate d: 1.0 is the usual "
                                "setting (as kohya warns)");
    }
  }
  if (choice.relative_step && t.lr_scheduler != "adafactor") {
    warn("lr_scheduler", "'" + t.lr_scheduler +
                             "' is replaced by 'adafactor' (kohya: AdaFactor's relative_step "
                             "computes its own lr; set relative_step=False to schedule it)");
  }
  if (choice.schedule_free && (t.lr_scheduler != "constant" || t.lr_warmup_steps.steps > 0 ||
                               t.lr_warmup_steps.ratio.value_or(0) > 0)) {
    warn("lr_scheduler",
         "is not used with AdamWScheduleFree: the lr stays constant (as kohya; "
         "its warmup is optimizer_args warmup_steps)");
  }
  return std::nullopt;
}

}  // namespace lf
