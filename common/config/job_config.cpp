// Strict YAML job-config parser (yaml-cpp): every section and key is checked against the schema
// in job_config.h, and every error names "<file>:<line>", the dotted key and what was expected,
// so a typo fails at start-up instead of silently training with a default. The kohya dataset keys
// (`dataset:` and `datasets:`, or a kohya .toml) are read into levels and resolved by
// dataset_keys.h, the same code the TOML loader uses.
#include "common/config/job_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "common/config/dataset_keys.h"
#include "common/config/kohya_blocks.h"
#include "common/config/lr_schedule_keys.h"
#include "common/config/optimizer_keys.h"
#include "common/config/yaml_fields.h"

namespace lf {
namespace {

namespace fs = std::filesystem;
namespace dk = dataset_keys;

using job_yaml::Field;
using job_yaml::MisplacedHint;
using job_yaml::Parser;

using dk::resolve_path;

// A total no warmup or decay reaches, for the checks that need the planned total.
constexpr std::int64_t kUnplannedTotalSteps = std::int64_t{1} << 50;

// A kohya key written somewhere it is not allowed (e.g. image_dir in `dataset:`).
std::string misplaced_hint(const std::string& name) {
  const std::string allowed = dk::allowed_levels_text(name, false);
  return allowed.empty() ? ""
                         : "not allowed here (kohya allows " + name + " only in: " + allowed + ")";
}

// kohya's preconditions of the precision keys (train_network.py asserts them at start-up).
void validate_precision(const Parser& p, const JobConfig& c) {
  const auto& t = c.training;
  auto fail = [&p](const std::string& key, const std::string& problem) {
    p.fail_key(p.line_for(key), key, problem);
  };
  if (t.full_fp16 && t.full_bf16) {
    fail("training.full_bf16", "expected at most one of full_fp16 and full_bf16, got both true");
  }
  if (t.full_fp16 && t.mixed_precision != "fp16") {
    fail("training.full_fp16",
         "needs training.mixed_precision: fp16 (as kohya), got '" + t.mixed_precision + "'");
  }
  if (t.full_bf16 && t.mixed_precision != "bf16") {
    fail("training.full_bf16",
         "needs training.mixed_precision: bf16 (as kohya), got '" + t.mixed_precision + "'");
  }
  if (c.model.fp8_base && t.mixed_precision == "no") {
    fail("model.fp8_base",
         "needs training.mixed_precision fp16 or bf16 (the compute dtype the float8 weights "
         "are upcast to, as kohya), got 'no'");
  }
}

// kohya's preconditions of the noise, timestep and loss keys (train_util.verify_training_args).
void validate_objective(const Parser& p, JobConfig& c) {
  const auto& t = c.training;
  const bool v = c.model.v_parameterization;
  auto fail = [&p](const std::string& key, const std::string& problem) {
    p.fail_key(p.line_for(key), key, problem);
  };
  if (t.adaptive_noise_scale && t.noise_offset == 0) {
    fail("training.adaptive_noise_scale", "needs training.noise_offset > 0 (as kohya)");
  }
  if (t.noise_offset_random_strength && t.noise_offset == 0) {
    fail("training.noise_offset_random_strength", "needs training.noise_offset > 0");
  }
  if (t.ip_noise_gamma_random_strength && t.ip_noise_gamma == 0) {
    fail("training.ip_noise_gamma_random_strength", "needs training.ip_noise_gamma > 0");
  }
  if (t.scale_v_pred_loss_like_noise_pred && !v) {
    fail("training.scale_v_pred_loss_like_noise_pred",
         "needs model.v_parameterization: true (as kohya)");
  }
  if (t.v_pred_like_loss.value_or(0) != 0 && v) {
    fail("training.v_pred_like_loss",
         "is for noise prediction: not with model.v_parameterization (as kohya)");
  }
  // kohya get_timesteps: min == max trains every sample at that one timestep (below 1000).
  if (t.min_timestep > t.max_timestep ||
      (t.min_timestep == t.max_timestep && t.max_timestep > 999)) {
    fail("training.max_timestep",
         "expected at least training.min_timestep (" + std::to_string(t.min_timestep) +
             "; equal: one fixed timestep below 1000), got " + std::to_string(t.max_timestep));
  }
  if ((t.loss_type == "huber" || t.loss_type == "smooth_l1") && !(t.huber_c > 0)) {
    fail("training.huber_c",
         "expected a number in (0, 1] for loss_type " + t.loss_type + ", got 0");
  }
  if (t.zero_terminal_snr && !v) {
    c.dataset_warnings.push_back(
        c.source_name + ":" + std::to_string(p.line_for("training.zero_terminal_snr")) +
        ": key 'training.zero_terminal_snr': without "
        "model.v_parameterization training is unexpected (as kohya warns)");
  }
}

// LoRA+ ratios: a ratio of 0 would freeze every lora_up weight (initialised to zero), leaving the
// LoRA a no-op.
void validate_loraplus(const Parser& p, const JobConfig& c) {
  const auto& n = c.network;
  const std::pair<const char*, const std::optional<double>*> ratios[] = {
      {"network.loraplus_lr_ratio", &n.loraplus_lr_ratio},
      {"network.loraplus_unet_lr_ratio", &n.loraplus_unet_lr_ratio},
      {"network.loraplus_text_encoder_lr_ratio", &n.loraplus_text_encoder_lr_ratio}};
  for (const auto& [key, ratio] : ratios) {
    if (*ratio && !(**ratio > 0)) {
      p.fail_key(p.line_for(key), key, "expected a number > 0 (lora_up would not train), got 0");
    }
  }
}

// LoHa (network.algo) trains on networks.lora's modules and ranks; the options that act on a
// lora_down / lora_up pair, or that LyCORIS LohaModule applies differently (its rank_dropout masks
// rows of delta W; its dropout is a no-op with a warning), are not available with it.
void validate_algo(const Parser& p, const JobConfig& c) {
  const auto& n = c.network;
  for (const auto& [key, set] : {std::make_pair("network.factor", n.factor != -1),
                                 std::make_pair("network.decompose_both", n.decompose_both)}) {
    if (set && n.algo != "lokr") {
      p.fail_key(p.line_for(key), key, "is a LyCORIS LoKr option: it needs network.algo lokr");
    }
  }
  if (n.factor == 0) {
    p.fail_key(p.line_for("network.factor"), "network.factor",
               "expected -1 or a factor >= 1, got 0");
  }
  if (n.algo == "lora" && !n.dora_wd) return;
  const std::string what = n.dora_wd ? "network.dora_wd" : "network.algo " + n.algo;
  const std::pair<const char*, bool> refused[] = {
      {"network.network_dropout", n.network_dropout.has_value()},
      {"network.rank_dropout", n.rank_dropout.has_value()},
      {"network.loraplus_lr_ratio", n.loraplus_lr_ratio.has_value()},
      {"network.loraplus_unet_lr_ratio", n.loraplus_unet_lr_ratio.has_value()},
      {"network.loraplus_text_encoder_lr_ratio", n.loraplus_text_encoder_lr_ratio.has_value()},
      {"network.down_lr_weight", !n.down_lr_weight.empty()},
      {"network.mid_lr_weight", !n.mid_lr_weight.empty()},
      {"network.up_lr_weight", !n.up_lr_weight.empty()},
      {"network.block_dims", !n.block_dims.empty()},
      {"network.conv_block_dims", !n.conv_block_dims.empty()},
      {"training.scale_weight_norms", c.training.scale_weight_norms.has_value()},
      {"network.dim_from_weights", n.algo == "lokr" && n.dim_from_weights}};
  for (const auto& [key, set] : refused) {
    if (set) {
      p.fail_key(p.line_for(key), key,
                 "not available with " + what +
                     (std::string(key) == "network.dim_from_weights" ? " (give network_dim, factor "
                                                                       "and decompose_both)"
                                                                     : " (networks.lora only)"));
    }
  }
}

// kohya networks.oft (network.algo oft) reads network_dim (blocks), network_alpha (the constraint
// factor) and its own enable_all_linear / enable_conv; it ignores networks.lora's network_args and
// the dropouts, which are refused here rather than dropped (validate_algo), and it has no
// apply_max_norm_regularization, so kohya fails on scale_weight_norms.
void validate_oft(const Parser& p, JobConfig& c) {
  const auto& n = c.network;
  for (const auto& [key, set] : {std::make_pair("network.enable_all_linear", n.enable_all_linear),
                                 std::make_pair("network.enable_conv", n.enable_conv)}) {
    if (set && n.algo != "oft") {
      p.fail_key(p.line_for(key), key, "is a kohya networks.oft option: it needs network.algo oft");
    }
  }
  if (n.algo != "oft") return;
  const std::pair<const char*, bool> refused[] = {
      {"network.conv_dim", n.conv_dim > 0},
      {"network.module_dropout", n.module_dropout.has_value()},
      {"network.dora_wd", n.dora_wd},
      {"network.network_train_text_encoder_only", n.network_train_text_encoder_only}};
  for (const auto& [key, set] : refused) {
    if (set) {
      p.fail_key(p.line_for(key), key,
                 "not available with network.algo oft (kohya networks.oft trains the U-Net's "
                 "OFT blocks and takes only network_dim, network_alpha, enable_all_linear and "
                 "enable_conv)");
    }
  }
  const std::string where =
      c.source_name + ":" + std::to_string(p.line_for("network.network_alpha"));
  if (!(n.network_alpha > 0)) {
    p.fail_key(p.line_for("network.network_alpha"), "network.network_alpha",
               "expected a number > 0 with network.algo oft (the constraint factor: each "
               "rotation's ||Q|| stays <= alpha * out_dim, so 0 trains nothing; kohya suggests "
               "1e-4 to 1e-2), got 0");
  }
  if (n.network_alpha >= 1) {  // kohya networks.oft create_network's warning
    c.dataset_warnings.push_back(
        where + ": key 'network.network_alpha': " + std::to_string(n.network_alpha) +
        " is large for OFT (kohya warns at >= 1 and suggests 1e-4 to 1e-2; its CLI default 1 is "
        "lorafleet's default too)");
  }
  if (n.text_encoder_lr && *n.text_encoder_lr > 0) {
    c.dataset_warnings.push_back(c.source_name + ":" +
                                 std::to_string(p.line_for("network.text_encoder_lr")) +
                                 ": key 'network.text_encoder_lr': not used, kohya networks.oft "
                                 "trains the U-Net only");
  }
}

// kohya's retention keys thin out saves that must exist.
void validate_saving(const Parser& p, const JobConfig& c) {
  const auto& t = c.training;
  if (t.save_last_n_steps > 0 && t.save_every_n_steps == 0) {
    p.fail_key(p.line_for("training.save_last_n_steps"), "training.save_last_n_steps",
               "needs training.save_every_n_steps > 0 (it removes the older step saves)");
  }
  if (t.save_last_n_epochs > 0 && t.save_every_n_epochs == 0 && t.save_n_epoch_ratio == 0) {
    p.fail_key(p.line_for("training.save_last_n_epochs"), "training.save_last_n_epochs",
               "needs training.save_every_n_epochs or save_n_epoch_ratio > 0 (it removes the "
               "older epoch saves)");
  }
}

// The rules that involve more than one key, after every key's own rule (job_keys.h) held.
// folder_datasets: form 1 (train_data_dir/reg_data_dir), which needs train_data_dir.
void validate(const Parser& p, JobConfig& c, bool folder_datasets) {
  auto require = [&p](bool ok, const std::string& key, const std::string& expected,
                      const std::string& got) {
    if (!ok) p.fail_key(p.line_for(key), key, "expected " + expected + ", got " + got);
  };
  auto num = [](double d) {
    std::ostringstream os;
    os << d;
    return os.str();
  };

  // The kohya dataset keys are checked per resolved dataset (dataset_keys.cpp).
  if (folder_datasets) {
    require(!c.dataset.train_data_dir.empty(), "dataset.train_data_dir",
            "a non-empty path to a folder of <num_repeats>_<class tokens> subfolders", "nothing");
  }

  const auto& n = c.network;
  require(!(n.network_train_unet_only && n.network_train_text_encoder_only),
          "network.network_train_text_encoder_only",
          "not both network_train_unet_only and network_train_text_encoder_only (nothing would "
          "be trained)",
          "both true");
  {
    // A part whose lr is 0 stays as initialised (lora_up zero): with every trained part at 0 and
    // no network_weights the job would run to the end and write an empty LoRA. (With
    // network_weights, lr 0 re-saves the loaded LoRA: allowed.)
    const double base = c.training.learning_rate;
    require(n.trains_unet() || n.trains_text_encoder(),
            n.unet_lr ? "network.unet_lr" : "network.text_encoder_lr",
            "a UNet or text-encoder part to train (network_train_*_only and the lrs set to 0 "
            "leave none)",
            "none");
    const bool unet_moves = n.trains_unet() && n.unet_lr.value_or(base) > 0;
    const bool te_moves = n.trains_text_encoder() && n.text_encoder_lr.value_or(base) > 0;
    require(unet_moves || te_moves || !n.network_weights.empty(),
            n.unet_lr ? "network.unet_lr" : "training.learning_rate",
            "a learning rate > 0 for the UNet or the text encoders (nothing would be trained)",
            "0 for every trained part");
  }
  // kohya refuses cached text-encoder outputs while the text encoders' LoRA trains: their
  // outputs change every step.
  require(
      !c.dataset.cache_text_encoder_outputs_to_disk || n.network_train_unet_only || n.algo == "oft",
      "dataset.cache_text_encoder_outputs_to_disk",
      "false unless network.network_train_unet_only is true (the text encoders' LoRA trains "
      "by default and changes their outputs every step)",
      "true");

  const auto& t = c.training;
  require(t.max_train_steps >= 1 || t.max_train_epochs > 0, "training.max_train_steps",
          "an integer >= 1 (or max_train_epochs > 0)", std::to_string(t.max_train_steps));
  // kohya's choices (None, 150, 225): whole 75-token windows; the key rule bounds it to [75, 225].
  require(t.max_token_length % 75 == 0, "training.max_token_length",
          "75, 150 or 225 (whole 75-token windows; 75 = kohya's unset)",
          std::to_string(t.max_token_length));
  // With max_train_epochs the total is known once the dataset is planned: the coordinator checks
  // the total-dependent rules then (coordinator/job.cpp); here they cannot fail.
  const std::int64_t total = t.max_train_epochs > 0 ? kUnplannedTotalSteps : t.max_train_steps;
  if (const auto e = check_lr_schedule(t, total)) {
    p.fail_key(p.line_for("training." + e->key), "training." + e->key, e->problem);
  }
  if (const auto e = check_optimizer(c, c.dataset_warnings)) {
    p.fail_key(p.line_for("training." + e->key), "training." + e->key, e->problem);
  }
  validate_precision(p, c);
  validate_objective(p, c);
  validate_saving(p, c);
  validate_loraplus(p, c);
  validate_algo(p, c);
  validate_oft(p, c);
  if (const auto e = check_block_network_args(c.network)) {
    p.fail_key(p.line_for(e->key), e->key, e->problem);
  }

  const auto& w = c.worker;
  require(w.vram_budget_gb == 0 || w.device != "cpu", "worker.vram_budget_gb",
          "0 with worker.device cpu (the budget streams UNet weights to a GPU)",
          num(w.vram_budget_gb));
  require(w.vram_budget_gb == 0 || t.gradient_checkpointing, "worker.vram_budget_gb",
          "0 unless training.gradient_checkpointing is true (a streamed block's weights must "
          "be fetched again when its backward recomputes it)",
          num(w.vram_budget_gb));

  const auto& o = c.output;
  require(o.log_with.empty() || !o.logging_dir.empty(), "output.log_with",
          "output.logging_dir set too (the folder the TensorBoard logs go to)",
          "log_with " + o.log_with + " without a logging_dir");

  const bool samples_wanted =
      o.sample_every_n_steps > 0 || o.sample_every_n_epochs > 0 || o.sample_at_first;
  if (!samples_wanted && !o.sample_prompts.empty()) {
    c.dataset_warnings.push_back(c.source_name + ":" +
                                 std::to_string(p.line_for("output.sample_prompts")) +
                                 ": key 'output.sample_prompts': no sample images will be made "
                                 "(set sample_every_n_steps, sample_every_n_epochs or "
                                 "sample_at_first)");
  }
  require(!samples_wanted || !o.sample_prompts.empty(),
          o.sample_every_n_epochs > 0  ? "output.sample_every_n_epochs"
          : o.sample_every_n_steps > 0 ? "output.sample_every_n_steps"
                                       : "output.sample_at_first",
          "output.sample_prompts set too (the prompts of the sample images)", "no sample_prompts");
  require(!o.sample_use_karras_sigmas || o.sample_sampler == "euler" ||
              o.sample_sampler == "k_euler" || o.sample_sampler == "dpmsolver++" ||
              o.sample_sampler == "k_dpm_2" || o.sample_sampler == "dpm_2",
          "output.sample_use_karras_sigmas",
          "false unless sample_sampler is euler, dpmsolver++ or k_dpm_2 (diffusers' Karras "
          "sigmas)",
          "true with " + o.sample_sampler);

  const auto& co = c.coordinator;
  require(co.tls_cert_file.empty() == co.tls_key_file.empty(), "coordinator.tls_cert_file",
          "tls_cert_file and tls_key_file together (or neither)",
          co.tls_cert_file.empty() ? "only tls_key_file" : "only tls_cert_file");
  const auto& cl = c.cluster;
  require(cl.restart_backoff_max_seconds >= cl.restart_backoff_seconds,
          "cluster.restart_backoff_max_seconds", "seconds >= restart_backoff_seconds",
          num(cl.restart_backoff_max_seconds));
}

}  // namespace

JobConfig parse_job_config(const std::string& yaml_text, const std::string& source_name,
                           const std::string& base_dir, const std::string* dataset_config_text) {
  JobConfig c;
  c.source_name = source_name;
  c.yaml_text = yaml_text;
  Parser p(source_name);

  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    p.fail(e.mark.is_null() ? 1 : e.mark.line + 1, "YAML syntax error: " + e.msg);
  }

  auto& m = c.model;
  auto& d = c.dataset;
  auto& n = c.network;
  auto& t = c.training;
  auto& o = c.output;
  auto& co = c.coordinator;
  auto& w = c.worker;
  auto& cl = c.cluster;
  std::vector<std::string>& warnings = c.dataset_warnings;

  // The `dataset:` section: kohya's CLI level for the dataset keys, plus lorafleet's own keys.
  dk::GivenLevel section;
  section.source = source_name;
  section.path = "dataset";
  section.path_base = base_dir;
#define LF_KEY_FIELD(type, name, default_value, rule, doc) \
  p.key_field(section_name, #name, &section_struct.name, rule),
#define LF_SECTION_FIELDS(name_text, section_value, KEYS) \
  [&p](auto& section_struct) {                            \
    const std::string section_name = name_text;           \
    return std::vector<Field>{KEYS(LF_KEY_FIELD)};        \
  }(section_value)
  // lorafleet's own keys of the section first, then kohya's dataset keys at kohya's CLI level.
  std::vector<Field> dataset_fields = LF_SECTION_FIELDS("dataset", d, LF_DATASET_KEYS);
  for (Field& f : p.kohya_fields(dk::kSection, &section, &warnings)) {
    dataset_fields.push_back(std::move(f));
  }

  // `datasets:` (form 2): a list of [[datasets]] mappings, each with a `subsets:` list.
  std::vector<dk::DatasetLevels> yaml_datasets;
  int datasets_line = 0;  // 0: no `datasets:` key
  auto read_subsets = [&p, &source_name, &base_dir, &warnings](dk::DatasetLevels& dl,
                                                               const YAML::Node& v,
                                                               const std::string& key, int line) {
    if (!v.IsSequence() || v.size() == 0) {
      p.fail_key(line, key,
                 "expected a non-empty list of subsets (mappings with image_dir), got " +
                     Parser::describe(v));
    }
    for (std::size_t j = 0; j < v.size(); ++j) {
      dk::GivenLevel sl;
      sl.source = source_name;
      sl.path = key + "[" + std::to_string(j) + "]";
      sl.line = Parser::line_of(v[j], line);
      sl.path_base = base_dir;
      p.apply(v[j], sl.path, p.kohya_fields(dk::kSubset, &sl, &warnings), sl.line, misplaced_hint);
      dl.subsets.push_back(std::move(sl));
    }
  };
  const Field datasets_field = {
      "datasets", [&](const YAML::Node& v, const std::string& key, int line) {
        datasets_line = line;
        if (!v.IsSequence() || v.size() == 0) {
          p.fail_key(line, key,
                     "expected a non-empty list of datasets (mappings with subsets:), got " +
                         Parser::describe(v));
        }
        for (std::size_t i = 0; i < v.size(); ++i) {
          dk::DatasetLevels dl;
          dl.dataset.source = source_name;
          dl.dataset.path = key + "[" + std::to_string(i) + "]";
          dl.dataset.line = Parser::line_of(v[i], line);
          dl.dataset.path_base = base_dir;
          std::vector<Field> fields = p.kohya_fields(dk::kDataset, &dl.dataset, &warnings);
          fields.push_back(
              {"subsets", [&read_subsets, &dl](const YAML::Node& sv, const std::string& sk,
                                               int sline) { read_subsets(dl, sv, sk, sline); }});
          p.apply(v[i], dl.dataset.path, fields, dl.dataset.line, misplaced_hint);
          yaml_datasets.push_back(std::move(dl));
        }
      }};

  const std::vector<std::pair<std::string, std::vector<Field>>> sections = {
      {"model", LF_SECTION_FIELDS("model", m, LF_MODEL_KEYS)},
      {"dataset", dataset_fields},
      {"network", LF_SECTION_FIELDS("network", n, LF_NETWORK_KEYS)},
      {"training", LF_SECTION_FIELDS("training", t, LF_TRAINING_KEYS)},
      {"output", LF_SECTION_FIELDS("output", o, LF_OUTPUT_KEYS)},
      {"coordinator", LF_SECTION_FIELDS("coordinator", co, LF_COORDINATOR_KEYS)},
      {"worker", LF_SECTION_FIELDS("worker", w, LF_WORKER_KEYS)},
      {"cluster", LF_SECTION_FIELDS("cluster", cl, LF_CLUSTER_KEYS)},
  };
#undef LF_SECTION_FIELDS
#undef LF_KEY_FIELD

  if (!root.IsNull()) {
    if (!root.IsMap()) {
      p.fail(Parser::line_of(root, 1),
             "expected a mapping of sections (model, dataset, datasets, network, training, "
             "output, coordinator, worker, cluster), got " +
                 Parser::describe(root));
    }
    // Each section is a Field whose setter applies the section's own fields.
    std::vector<Field> top;
    for (const auto& [name, fields] : sections) {
      const MisplacedHint hint =
          name == "dataset" ? MisplacedHint(misplaced_hint) : MisplacedHint();
      top.push_back(
          {name, [&p, &fields = fields, hint](const YAML::Node& v, const std::string& key,
                                              int line) { p.apply(v, key, fields, line, hint); }});
      if (name == "dataset") top.push_back(datasets_field);
    }
    p.apply(root, "", top, 1);
  }
  section.line = p.line_for("dataset");

  // Which of the three forms (dataset_config.h).
  const bool from_toml = !d.dataset_config.empty();
  const bool from_yaml_list = datasets_line != 0;
  if (from_toml && from_yaml_list) {
    p.fail_key(datasets_line, "datasets",
               "cannot be combined with 'dataset.dataset_config' (line " +
                   std::to_string(p.line_for("dataset.dataset_config")) +
                   "): give the datasets either here or in the kohya .toml file");
  }
  p.check_rules();
  validate(p, c, !from_toml && !from_yaml_list);

  // The `dataset:` section's own view of the kohya keys, kept for code that reads them there.
  auto section_value = [&section](const char* key) -> const dk::GivenValue* {
    auto it = section.values.find(key);
    return it == section.values.end() ? nullptr : &it->second;
  };
  if (const auto* v = section_value("resolution")) {
    d.resolution_w = v->w;
    d.resolution_h = v->h;
  }
  if (const auto* v = section_value("enable_bucket")) d.enable_bucket = v->b;
  if (const auto* v = section_value("min_bucket_reso")) d.min_bucket_reso = static_cast<int>(v->i);
  if (const auto* v = section_value("max_bucket_reso")) d.max_bucket_reso = static_cast<int>(v->i);
  if (const auto* v = section_value("bucket_reso_steps")) {
    d.bucket_reso_steps = static_cast<int>(v->i);
  }
  if (const auto* v = section_value("bucket_no_upscale")) d.bucket_no_upscale = v->b;
  if (const auto* v = section_value("caption_extension")) d.caption_extension = v->s;
  if (!d.caption_extension.empty() && d.caption_extension[0] != '.') {
    d.caption_extension = "." + d.caption_extension;
  }

  // The `dataset:` section sits above these defaults; batch_size falls back to
  // training.train_batch_size as kohya's does to --train_batch_size.
  DatasetConfig defaults;
  defaults.batch_size = t.train_batch_size;
  if (from_toml || from_yaml_list) {
    const char* origin = from_toml ? "'dataset.dataset_config' is given"
                                   : "the datasets are listed under 'datasets:'";
    const std::pair<const char*, const std::string*> dirs[] = {
        {"dataset.train_data_dir", &d.train_data_dir}, {"dataset.reg_data_dir", &d.reg_data_dir}};
    for (const auto& [key, value] : dirs) {
      if (value->empty()) continue;
      warnings.push_back(source_name + ":" + std::to_string(p.line_for(key)) + ": key '" + key +
                         "': ignored because " + origin +
                         " (kohya likewise ignores it with --dataset_config)");
    }
  }
  if (from_toml) {
    d.dataset_config = resolve_path(base_dir, d.dataset_config);
    if (dataset_config_text != nullptr) {
      c.dataset_config_text = *dataset_config_text;
    } else {
      std::error_code ec;
      std::ifstream in;
      if (!fs::is_directory(d.dataset_config, ec)) in.open(d.dataset_config, std::ios::binary);
      if (!in.is_open()) {
        p.fail_key(p.line_for("dataset.dataset_config"), "dataset.dataset_config",
                   "cannot read '" + d.dataset_config + "' (expected a readable kohya .toml file)");
      }
      std::ostringstream text;
      text << in.rdbuf();
      c.dataset_config_text = text.str();
    }
    const dk::TomlLevels levels =
        dk::read_toml_levels(d.dataset_config, &warnings, &c.dataset_config_text, base_dir);
    c.datasets = dk::resolve_datasets(levels.datasets, &levels.general, &section, defaults,
                                      "the default", &warnings);
  } else if (from_yaml_list) {
    c.datasets =
        dk::resolve_datasets(yaml_datasets, nullptr, &section, defaults, "the default", &warnings);
  } else {
    DatasetConfig ds = dk::resolve_folder_dataset(section, defaults);
    ds.train_data_dir = resolve_path(base_dir, d.train_data_dir);
    ds.reg_data_dir = resolve_path(base_dir, d.reg_data_dir);
    c.datasets.push_back(std::move(ds));
  }

  m.pretrained_model_name_or_path = resolve_path(base_dir, m.pretrained_model_name_or_path);
  m.tokenizer_vocab = resolve_path(base_dir, m.tokenizer_vocab);
  d.train_data_dir = resolve_path(base_dir, d.train_data_dir);
  d.reg_data_dir = resolve_path(base_dir, d.reg_data_dir);
  n.network_weights = resolve_path(base_dir, n.network_weights);
  o.output_dir = resolve_path(base_dir, o.output_dir);
  o.logging_dir = resolve_path(base_dir, o.logging_dir);
  o.sample_prompts = resolve_path(base_dir, o.sample_prompts);
  co.job_token_file = resolve_path(base_dir, co.job_token_file);
  co.tls_cert_file = resolve_path(base_dir, co.tls_cert_file);
  co.tls_key_file = resolve_path(base_dir, co.tls_key_file);
  d.cache_dir = d.cache_dir.empty() ? (fs::path(o.output_dir) / "cache").string()
                                    : resolve_path(base_dir, d.cache_dir);
  return c;
}

JobConfig load_job_config(const std::string& path) {
  std::error_code ec;
  std::ifstream in;
  if (!fs::is_directory(path, ec)) in.open(path, std::ios::binary);
  if (!in.is_open()) {
    throw ConfigError(path + ": cannot read the job config file (expected a readable YAML file)");
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError(path + ": read error while loading the job config file");
  // Relative paths resolve against the working directory, as kohya's do.
  return parse_job_config(text.str(), path, fs::current_path().string());
}

}  // namespace lf
