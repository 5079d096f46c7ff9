// kohya's optimizer_type and optimizer_args (see header).
#include "common/config/optimizer_keys.h"

#include <algorithm>
#include <cctype>
#include <cmath>
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

std::string num(double d) {
  std::ostringstream os;
  os << d;
  return os.str();
}

// The values the references refuse in their constructors (or that would make NaN weights: a
// schedule-free beta1 of 0 divides by 0 when the evaluation weights are formed).
std::optional<std::string> check_ranges(const OptimizerChoice& o) {
  const auto value = [&](const char* name) -> const std::vector<double>* {
    auto it = o.args.find(name);
    return it == o.args.end() ? nullptr : &it->second;
  };
  const auto bad = [&](const std::string& what, const std::string& expected) {
    return "expected " + what + " " + expected + " for " + o.type + " (as its reference checks)";
  };
  if (const auto* b = value("betas")) {
    const double hi = o.type == "Lion" ? 1.0 : std::nextafter(1.0, 0.0);
    for (double x : *b) {
      if (!(x >= 0 && x <= hi))
        return bad("betas", "in [0, 1), got " + num((*b)[0]) + "," + num((*b)[1]));
    }
    if (o.schedule_free && (*b)[0] == 0) return bad("betas", "with beta1 > 0, got beta1 0");
  }
  if (const auto* b = value("beta1"); b && !((*b)[0] >= 0 && (*b)[0] < 1)) {
    return bad("beta1", "in [0, 1), got " + num((*b)[0]));
  }
  if (const auto* e = value("eps"); e && o.type != "AdaFactor") {
    if (!((*e)[0] > 0 || ((*e)[0] == 0 && o.type == "Prodigy"))) {
      return bad("eps",
                 std::string(o.type == "Prodigy" ? ">= 0" : "> 0") + ", got " + num((*e)[0]));
    }
  }
  for (const char* name : {"weight_decay", "momentum", "dampening"}) {
    if (const auto* v = value(name); v && !((*v)[0] >= 0))
      return bad(name, ">= 0, got " + num((*v)[0]));
  }
  for (const char* name : {"d0", "d_coef", "growth_rate"}) {
    if (const auto* v = value(name); v && !((*v)[0] > 0))
      return bad(name, "> 0, got " + num((*v)[0]));
  }
  for (const char* name : {"slice_p", "warmup_steps"}) {
    const auto* v = value(name);
    const double lo = std::string(name) == "slice_p" ? 1 : 0;
    if (v && !((*v)[0] >= lo && std::floor((*v)[0]) == (*v)[0])) {
      return bad(name, "an integer >= " + num(lo) + ", got " + num((*v)[0]));
    }
  }
  if (o.type == "SGDNesterov" ||
      (o.type == "SGD" && value("nesterov") && (*value("nesterov"))[0] != 0)) {
    const auto* m = value("momentum");
    const auto* d = value("dampening");
    const double momentum = m ? (*m)[0] : (o.type == "SGDNesterov" ? 0.9 : 0.0);
    if (!(momentum > 0) || (d && (*d)[0] != 0)) {
      return "Nesterov momentum needs momentum > 0 and dampening 0 (torch.optim.SGD refuses "
             "others), got momentum " +
             num(momentum) + ", dampening " + num(d ? (*d)[0] : 0.0);
    }
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
  if (trim_blanks(name).empty()) return "AdamW";  // kohya: optimizer_type "" is AdamW
  auto it = aliases().find(lower(trim_blanks(name)));
  if (it == aliases().end()) return std::nullopt;
  return it->second;
}

std::pair<OptimizerChoice, std::optional<OptimizerKeyError>> read_optimizer(
    const TrainingSection& t) {
  OptimizerChoice out;
  const auto type = canonical_optimizer_type(t.optimizer_type);
  if (!type) {
    std::string key = lower(trim_blanks(t.optimizer_type));
    if (key.rfind("bitsandbytes.optim.", 0) == 0) key = key.substr(19);  // kohya's class path
    auto refused = refused_optimizers().find(key);
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
  if (auto problem = check_ranges(out)) {
    return {out, OptimizerKeyError{"optimizer_args", *problem}};
  }
  return {out, std::nullopt};
}

std::optional<std::string> kohya_ss_optimizer(const TrainingSection& t) {
  const auto [choice, error] = read_optimizer(t);
  if (error || (choice.type == "AdamW" && t.optimizer_args.empty())) return std::nullopt;
  static const std::map<std::string, std::string> classes = {
      {"AdamW", "torch.optim.adamw.AdamW"},
      {"Lion", "lion_pytorch.lion_pytorch.Lion"},
      {"SGDNesterov", "torch.optim.sgd.SGD"},
      {"SGD", "torch.optim.sgd.SGD"},
      {"AdaFactor", "transformers.optimization.Adafactor"},
      {"Prodigy", "prodigyopt.prodigy.Prodigy"},
      {"DAdaptAdam", "dadaptation.dadapt_adam.DAdaptAdam"},
      {"AdamWScheduleFree", "schedulefree.adamw_schedulefree.AdamWScheduleFree"}};
  // kohya joins f"{k}={v}" of the literal_eval'd arguments: a tuple reads "(a, b)".
  std::vector<std::string> args;
  bool has_momentum = false, has_relative_step = false;
  for (const std::string& arg : t.optimizer_args) {
    const auto kv = split_kohya_arg(arg);
    if (!kv) continue;
    const auto v = parse_py_literal(kv->value);
    std::string text = kv->value;
    if (v && v->kind == PyLiteral::Kind::Numbers) {
      std::string part, joined;
      std::string body = kv->value;
      for (char ch : std::string("()[]"))
        body.erase(std::remove(body.begin(), body.end(), ch), body.end());
      std::stringstream parts(body);
      while (std::getline(parts, part, ',')) {
        if (!trim_blanks(part).empty()) joined += (joined.empty() ? "" : ", ") + trim_blanks(part);
      }
      text = "(" + joined + ")";
    }
    has_momentum = has_momentum || kv->key == "momentum";
    has_relative_step = has_relative_step || kv->key == "relative_step";
    args.push_back(kv->key + "=" + text);
  }
  if (choice.type == "SGDNesterov" && !has_momentum) args.push_back("momentum=0.9");
  if (choice.type == "AdaFactor" && !has_relative_step) args.push_back("relative_step=True");
  std::string joined;
  for (const auto& a : args) joined += (joined.empty() ? "" : ",") + a;
  return classes.at(choice.type) + (joined.empty() ? "" : "(" + joined + ")");
}

std::string kohya_ss_lr_scheduler(const TrainingSection& t, const std::string& lr_text) {
  const auto [choice, error] = read_optimizer(t);
  return !error && choice.relative_step ? "adafactor:" + lr_text : t.lr_scheduler;
}

std::optional<OptimizerKeyError> check_optimizer(const JobConfig& c,
                                                 std::vector<std::string>& warnings) {
  const auto [choice, error] = read_optimizer(c.training);
  if (error) return error;
  const auto& t = c.training;
  const auto& n = c.network;
  const auto warn = [&](const std::string& key, const std::string& text) {
    warnings.push_back(c.source_name + ": key '" + key + "': " + text);
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
                      : "unet_lr " + num(unet) + " and text_encoder_lr " + num(te));
      return OptimizerKeyError{"optimizer_type", os.str()};
    }
    // kohya tests the first parameter group's lr: the UNet's, or the text encoders'.
    const double lr = n.trains_unet() ? unet : te;
    if (lr <= 0.1) {
      warn(n.trains_unet() && n.unet_lr            ? "network.unet_lr"
           : !n.trains_unet() && n.text_encoder_lr ? "network.text_encoder_lr"
                                                   : "training.learning_rate",
           "the lr " + num(lr) + " is low for " + choice.type +
               ", which scales it by its own estimate d: 1.0 is the usual setting (as kohya "
               "warns)");
    }
  }
  if (choice.relative_step) {
    // kohya: "adafactor does not require num_warmup_steps"; its relative step has its own.
    if (t.lr_warmup_steps.steps > 0 || t.lr_warmup_steps.ratio.value_or(0) > 0) {
      return OptimizerKeyError{"lr_warmup_steps",
                               "expected 0 with AdaFactor's relative_step (its lr warms up by "
                               "itself; kohya refuses a warmup for the adafactor schedule), "
                               "got " +
                                   t.lr_warmup_steps.text()};
    }
    if (t.lr_scheduler != "adafactor") {
      warn("training.lr_scheduler",
           "'" + t.lr_scheduler +
               "' is replaced by 'adafactor' (kohya: AdaFactor's relative_step "
               "computes its own lr; set relative_step=False and no "
               "warmup_init to schedule it)");
    }
    if (n.unet_lr || n.text_encoder_lr || n.loraplus_lr_ratio || n.loraplus_unet_lr_ratio ||
        n.loraplus_text_encoder_lr_ratio) {
      warn("training.optimizer_type",
           "AdaFactor's relative_step ignores network.unet_lr, "
           "text_encoder_lr and the LoRA+ ratios: every parameter steps "
           "with its own relative lr (as kohya warns)");
    }
  } else if (choice.type == "AdaFactor" && t.lr_scheduler == "adafactor") {
    return OptimizerKeyError{"lr_scheduler",
                             "'adafactor' reports the lr of AdaFactor's relative_step, which "
                             "optimizer_args turn off: choose another schedule "
                             "(constant_with_warmup is kohya's suggestion)"};
  }
  if (choice.schedule_free && (t.lr_scheduler != "constant" || t.lr_warmup_steps.steps > 0 ||
                               t.lr_warmup_steps.ratio.value_or(0) > 0)) {
    warn("training.lr_scheduler",
         "is not used with AdamWScheduleFree: the lr stays constant (as kohya; "
         "its warmup is optimizer_args warmup_steps)");
  }
  return std::nullopt;
}

}  // namespace lf
