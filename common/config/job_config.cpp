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
#include "common/config/yaml_fields.h"

namespace lf {
namespace {

namespace fs = std::filesystem;
namespace dk = dataset_keys;

using job_yaml::Field;
using job_yaml::MisplacedHint;
using job_yaml::Parser;

using dk::resolve_path;

// A kohya key written somewhere it is not allowed (e.g. image_dir in `dataset:`).
std::string misplaced_hint(const std::string& name) {
  const std::string allowed = dk::allowed_levels_text(name, false);
  return allowed.empty() ? "" : "not allowed here (kohya allows " + name + " only in: " + allowed +
                                    ")";
}

// kohya's preconditions of the precision keys (train_network.py asserts them at start-up).
void validate_precision(const Parser& p, const JobConfig& c) {
  const auto& t = c.training;
  auto fail = [&p](const std::string& key, const std::string& problem) {
    p.fail_key(p.line_for(key), key, problem);
  };
  if (t.mixed_precision != "no" && t.mixed_precision != "fp16" && t.mixed_precision != "bf16") {
    fail("training.mixed_precision",
         "expected one of: no, fp16, bf16 (kohya --mixed_precision), got '" + t.mixed_precision +
             "'");
  }
  if (t.full_fp16 && t.full_bf16) {
    fail("training.full_bf16", "expected at most one of full_fp16 and full_bf16, got both true");
  }
  if (t.full_fp16 && t.mixed_precision != "fp16") {
    fail("training.full_fp16", "needs training.mixed_precision: fp16 (as kohya), got '" +
                                   t.mixed_precision + "'");
  }
  if (t.full_bf16 && t.mixed_precision != "bf16") {
    fail("training.full_bf16", "needs training.mixed_precision: bf16 (as kohya), got '" +
                                   t.mixed_precision + "'");
  }
  if (c.model.fp8_base && t.mixed_precision == "no") {
    fail("model.fp8_base",
         "needs training.mixed_precision fp16 or bf16 (the compute dtype the float8 weights "
         "are upcast to, as kohya), got 'no'");
  }
}

// folder_datasets: form 1 (train_data_dir/reg_data_dir), which needs train_data_dir.
void validate(const Parser& p, JobConfig& c, bool folder_datasets) {
  auto require = [&p](bool ok, const std::string& key, const std::string& expected,
                      const std::string& got) {
    if (!ok) p.fail_key(p.line_for(key), key, "expected " + expected + ", got " + got);
  };
  auto str = [](const std::string& s) { return "'" + s + "'"; };
  auto num = [](double d) {
    std::ostringstream os;
    os << d;
    return os.str();
  };

  const auto& m = c.model;
  require(!m.pretrained_model_name_or_path.empty(), "model.pretrained_model_name_or_path",
          "a non-empty path to a .safetensors checkpoint", "nothing");
  // The worker's lf::model_preset() is the authority; this list mirrors it so a typo fails at
  // parse time, before any process starts.
  static const std::vector<std::string> kArchitectures = {"auto", "tiny", "tiny-sd2", "tiny-sdxl",
                                                          "sd15", "sd2", "sdxl"};
  require(std::find(kArchitectures.begin(), kArchitectures.end(), m.architecture) !=
              kArchitectures.end(),
          "model.architecture", "one of: auto, tiny, tiny-sd2, tiny-sdxl, sd15, sd2, sdxl",
          str(m.architecture));
  require(!m.tokenizer_vocab.empty(), "model.tokenizer_vocab",
          "a non-empty path to bpe_simple_vocab_16e6.txt.gz", "nothing");
  require(m.vae_dtype == "fp32" || m.vae_dtype == "fp16" || m.vae_dtype == "bf16",
          "model.vae_dtype", "one of: fp32, fp16, bf16", str(m.vae_dtype));

  // The kohya dataset keys are checked per resolved dataset (dataset_keys.cpp).
  auto& d = c.dataset;
  if (folder_datasets) {
    require(!d.train_data_dir.empty(), "dataset.train_data_dir",
            "a non-empty path to a folder of <num_repeats>_<class tokens> subfolders", "nothing");
  }
  require(d.reg_selection == "first" || d.reg_selection == "random" ||
              d.reg_selection == "rotate",
          "dataset.reg_selection", "one of: first, random, rotate", str(d.reg_selection));
  require(d.on_bad_image == "error" || d.on_bad_image == "skip", "dataset.on_bad_image",
          "one of: error, skip", str(d.on_bad_image));
  require(d.max_image_pixels >= 1, "dataset.max_image_pixels", "an integer >= 1",
          std::to_string(d.max_image_pixels));
  require(d.scan_threads >= 0, "dataset.scan_threads", "an integer >= 0 (0 = all cores)",
          std::to_string(d.scan_threads));

  auto& n = c.network;
  require(n.network_dim >= 1, "network.network_dim", "an integer >= 1",
          std::to_string(n.network_dim));
  require(n.network_alpha >= 0, "network.network_alpha", "a number >= 0", num(n.network_alpha));
  // kohya LoRAModule: alpha 0 (or None) means alpha = network_dim, i.e. scale 1.
  if (n.network_alpha == 0) n.network_alpha = n.network_dim;
  require(n.conv_dim >= 0, "network.conv_dim", "an integer >= 0 (0 = no conv LoRA)",
          std::to_string(n.conv_dim));
  require(n.conv_alpha >= 0, "network.conv_alpha", "a number >= 0", num(n.conv_alpha));
  if (n.conv_alpha == 0) n.conv_alpha = n.conv_dim;  // kohya LoRAModule: 0 means the rank
  require(!(n.network_train_unet_only && n.network_train_text_encoder_only),
          "network.network_train_text_encoder_only",
          "not both network_train_unet_only and network_train_text_encoder_only (nothing would "
          "be trained)",
          "both true");
  for (const auto& lr : {std::make_pair("network.unet_lr", n.unet_lr),
                         std::make_pair("network.text_encoder_lr", n.text_encoder_lr)}) {
    if (lr.second) require(*lr.second >= 0, lr.first, "a number >= 0", num(*lr.second));
  }
  {
    // A part whose lr is 0 stays as initialised (lora_up zero): with every trained part at 0 and
    // no network_weights the job would run to the end and write an empty LoRA. (With
    // network_weights, lr 0 re-saves the loaded LoRA: allowed.)
    const double base = c.training.learning_rate;
    // kohya: a part whose own lr is 0 is left out of the network.
    const bool unet_on = !n.network_train_text_encoder_only && !(n.unet_lr && *n.unet_lr == 0);
    const bool te_on =
        !n.network_train_unet_only && !(n.text_encoder_lr && *n.text_encoder_lr == 0);
    require(unet_on || te_on, n.unet_lr ? "network.unet_lr" : "network.text_encoder_lr",
            "a UNet or text-encoder part to train (network_train_*_only and the lrs set to 0 "
            "leave none)",
            "none");
    const bool unet_moves = unet_on && n.unet_lr.value_or(base) > 0;
    const bool te_moves = te_on && n.text_encoder_lr.value_or(base) > 0;
    require(unet_moves || te_moves || !n.network_weights.empty(),
            n.unet_lr ? "network.unet_lr" : "training.learning_rate",
            "a learning rate > 0 for the UNet or the text encoders (nothing would be trained)",
            "0 for every trained part");
  }
  // kohya refuses cached text-encoder outputs while the text encoders' LoRA trains: their
  // outputs change every step.
  require(!c.dataset.cache_text_encoder_outputs_to_disk || n.network_train_unet_only,
          "dataset.cache_text_encoder_outputs_to_disk",
          "false unless network.network_train_unet_only is true (the text encoders' LoRA trains "
          "by default and changes their outputs every step)",
          "true");

  const auto& t = c.training;
  require(t.train_batch_size >= 1, "training.train_batch_size", "an integer >= 1",
          std::to_string(t.train_batch_size));
  require(t.gradient_accumulation_steps >= 1, "training.gradient_accumulation_steps",
          "an integer >= 1", std::to_string(t.gradient_accumulation_steps));
  require(t.learning_rate >= 0, "training.learning_rate", "a number >= 0",
          num(t.learning_rate));
  require(t.lr_scheduler == "constant" || t.lr_scheduler == "constant_with_warmup" ||
              t.lr_scheduler == "linear" || t.lr_scheduler == "cosine",
          "training.lr_scheduler", "one of: constant, constant_with_warmup, linear, cosine",
          str(t.lr_scheduler));
  require(t.lr_warmup_steps >= 0, "training.lr_warmup_steps", "an integer >= 0",
          std::to_string(t.lr_warmup_steps));
  require(t.max_train_epochs >= 0, "training.max_train_epochs", "an integer >= 0",
          std::to_string(t.max_train_epochs));
  require(t.max_train_steps >= 1 || t.max_train_epochs > 0, "training.max_train_steps",
          "an integer >= 1 (or max_train_epochs > 0)", std::to_string(t.max_train_steps));
  require(t.save_every_n_steps >= 0, "training.save_every_n_steps", "an integer >= 0",
          std::to_string(t.save_every_n_steps));
  require(t.prior_loss_weight >= 0, "training.prior_loss_weight", "a number >= 0",
          num(t.prior_loss_weight));
  require(t.clip_skip >= 0, "training.clip_skip",
          "0 (the model family's default layer) or a layer count >= 1", num(t.clip_skip));
  require(t.max_grad_norm >= 0, "training.max_grad_norm", "a number >= 0 (0 disables clipping)",
          num(t.max_grad_norm));
  require(t.adam_beta1 >= 0 && t.adam_beta1 < 1, "training.adam_beta1", "a number in [0, 1)",
          num(t.adam_beta1));
  require(t.adam_beta2 >= 0 && t.adam_beta2 < 1, "training.adam_beta2", "a number in [0, 1)",
          num(t.adam_beta2));
  require(t.adam_epsilon >= 0, "training.adam_epsilon", "a number >= 0", num(t.adam_epsilon));
  require(t.adam_weight_decay >= 0, "training.adam_weight_decay", "a number >= 0",
          num(t.adam_weight_decay));
  validate_precision(p, c);

  const auto& o = c.output;
  require(!o.output_dir.empty(), "output.output_dir", "a non-empty folder path", "nothing");
  require(!o.output_name.empty() && o.output_name.find('/') == std::string::npos,
          "output.output_name", "a non-empty file name without '/'", str(o.output_name));
  require(o.keep_last_n_checkpoints >= 0, "output.keep_last_n_checkpoints",
          "an integer >= 0 (0 keeps all)", std::to_string(o.keep_last_n_checkpoints));
  require(o.save_precision.empty() || o.save_precision == "float" || o.save_precision == "fp16" ||
              o.save_precision == "bf16",
          "output.save_precision",
          "one of: float, fp16, bf16 (kohya --save_precision), or unset for the training dtype",
          str(o.save_precision));

  const auto& co = c.coordinator;
  require(!co.listen_address.empty(), "coordinator.listen_address", "a host:port address",
          "nothing");
  require(co.linger_seconds >= 0, "coordinator.linger_seconds", "an integer >= 0",
          std::to_string(co.linger_seconds));
  require(co.worker_timeout_seconds >= 10, "coordinator.worker_timeout_seconds",
          "an integer >= 10 (workers heartbeat every 5 s)",
          std::to_string(co.worker_timeout_seconds));

  const auto& w = c.worker;
  require(w.metrics_port_base >= 0 && w.metrics_port_base <= 65535, "worker.metrics_port_base",
          "a port in [0, 65535] (0 disables)", std::to_string(w.metrics_port_base));
  require(w.num_threads >= 1, "worker.num_threads", "an integer >= 1",
          std::to_string(w.num_threads));
  require(w.device == "auto" || w.device == "cpu" || w.device == "cuda", "worker.device",
          "one of: auto, cpu, cuda", str(w.device));
  require(w.vram_budget_gb >= 0, "worker.vram_budget_gb", "GiB >= 0 (0 = no budget)",
          num(w.vram_budget_gb));
  require(w.vram_budget_gb == 0 || w.device != "cpu", "worker.vram_budget_gb",
          "0 with worker.device cpu (the budget streams UNet weights to a GPU)",
          num(w.vram_budget_gb));
  require(w.vram_budget_gb == 0 || c.training.gradient_checkpointing, "worker.vram_budget_gb",
          "0 unless training.gradient_checkpointing is true (a streamed block's weights must "
          "be fetched again when its backward recomputes it)",
          num(w.vram_budget_gb));
  require(w.offload_streams >= 1 && w.offload_streams <= 8, "worker.offload_streams",
          "an integer in [1, 8]", std::to_string(w.offload_streams));

  require(co.tls_cert_file.empty() == co.tls_key_file.empty(), "coordinator.tls_cert_file",
          "tls_cert_file and tls_key_file together (or neither)",
          co.tls_cert_file.empty() ? "only tls_key_file" : "only tls_cert_file");
  const auto& cl = c.cluster;
  require(cl.world_size >= 0, "cluster.world_size", "an integer >= 0 (0: from the launcher)",
          std::to_string(cl.world_size));
  require(cl.collective_timeout >= 1, "cluster.collective_timeout", "seconds >= 1",
          std::to_string(cl.collective_timeout));
  require(cl.preempt_grace_seconds >= 1, "cluster.preempt_grace_seconds", "seconds >= 1",
          std::to_string(cl.preempt_grace_seconds));
  require(cl.max_restarts >= 0, "cluster.max_restarts", "an integer >= 0",
          std::to_string(cl.max_restarts));
  require(cl.restart_backoff_seconds >= 0, "cluster.restart_backoff_seconds", "seconds >= 0",
          num(cl.restart_backoff_seconds));
  require(cl.restart_backoff_max_seconds >= cl.restart_backoff_seconds,
          "cluster.restart_backoff_max_seconds", "seconds >= restart_backoff_seconds",
          num(cl.restart_backoff_max_seconds));
  require(cl.rendezvous_timeout_seconds >= 1, "cluster.rendezvous_timeout_seconds",
          "seconds >= 1", std::to_string(cl.rendezvous_timeout_seconds));
}

}  // namespace

JobConfig parse_job_config(const std::string& yaml_text, const std::string& source_name,
                           const std::string& base_dir,
                           const std::string* dataset_config_text) {
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
  std::vector<Field> dataset_fields = {
      p.string_field("train_data_dir", &d.train_data_dir),
      p.string_field("reg_data_dir", &d.reg_data_dir),
      p.string_field("dataset_config", &d.dataset_config)};
  for (Field& f : p.kohya_fields(dk::kSection, &section, &warnings)) {
    dataset_fields.push_back(std::move(f));
  }
  for (Field f : {p.string_field("reg_selection", &d.reg_selection),
                  p.string_field("on_bad_image", &d.on_bad_image),
                  p.i64_field("max_image_pixels", &d.max_image_pixels),
                  p.int_field("scan_threads", &d.scan_threads),
                  p.bool_field("cache_latents_to_disk", &d.cache_latents_to_disk),
                  p.bool_field("cache_text_encoder_outputs_to_disk",
                               &d.cache_text_encoder_outputs_to_disk),
                  p.string_field("cache_dir", &d.cache_dir)}) {
    dataset_fields.push_back(std::move(f));
  }

  // `datasets:` (form 2): a list of [[datasets]] mappings, each with a `subsets:` list.
  std::vector<dk::DatasetLevels> yaml_datasets;
  int datasets_line = 0;  // 0: no `datasets:` key
  auto read_subsets = [&p, &source_name, &base_dir, &warnings](
                          dk::DatasetLevels& dl, const YAML::Node& v, const std::string& key,
                          int line) {
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
      p.apply(v[j], sl.path, p.kohya_fields(dk::kSubset, &sl, &warnings), sl.line,
              misplaced_hint);
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
          fields.push_back({"subsets", [&read_subsets, &dl](const YAML::Node& sv,
                                                             const std::string& sk, int sline) {
                              read_subsets(dl, sv, sk, sline);
                            }});
          p.apply(v[i], dl.dataset.path, fields, dl.dataset.line, misplaced_hint);
          yaml_datasets.push_back(std::move(dl));
        }
      }};

  const std::vector<std::pair<std::string, std::vector<Field>>> sections = {
      {"model",
       {p.string_field("pretrained_model_name_or_path", &m.pretrained_model_name_or_path),
        p.string_field("architecture", &m.architecture),
        p.bool_field("v_parameterization", &m.v_parameterization),
        p.bool_field("disable_mmap_load_safetensors", &m.disable_mmap_load_safetensors),
        p.string_field("tokenizer_vocab", &m.tokenizer_vocab),
        p.string_field("vae_dtype", &m.vae_dtype), p.bool_field("fp8_base", &m.fp8_base)}},
      {"dataset", dataset_fields},
      {"network",
       {p.int_field("network_dim", &n.network_dim),
        p.double_field("network_alpha", &n.network_alpha),
        p.string_field("network_weights", &n.network_weights),
        p.int_field("conv_dim", &n.conv_dim), p.double_field("conv_alpha", &n.conv_alpha),
        p.bool_field("network_train_unet_only", &n.network_train_unet_only),
        p.bool_field("network_train_text_encoder_only", &n.network_train_text_encoder_only),
        p.optional_double_field("unet_lr", &n.unet_lr),
        p.optional_double_field("text_encoder_lr", &n.text_encoder_lr)}},
      {"training",
       {p.u64_field("seed", &t.seed), p.int_field("train_batch_size", &t.train_batch_size),
        p.int_field("gradient_accumulation_steps", &t.gradient_accumulation_steps),
        p.double_field("learning_rate", &t.learning_rate),
        p.string_field("lr_scheduler", &t.lr_scheduler),
        p.int_field("lr_warmup_steps", &t.lr_warmup_steps),
        p.int_field("max_train_steps", &t.max_train_steps),
        p.int_field("max_train_epochs", &t.max_train_epochs),
        p.int_field("save_every_n_steps", &t.save_every_n_steps),
        p.double_field("prior_loss_weight", &t.prior_loss_weight),
        p.double_field("max_grad_norm", &t.max_grad_norm),
        p.double_field("adam_beta1", &t.adam_beta1), p.double_field("adam_beta2", &t.adam_beta2),
        p.double_field("adam_epsilon", &t.adam_epsilon),
        p.double_field("adam_weight_decay", &t.adam_weight_decay),
        p.int_field("clip_skip", &t.clip_skip),
        p.string_field("mixed_precision", &t.mixed_precision),
        p.bool_field("full_fp16", &t.full_fp16), p.bool_field("full_bf16", &t.full_bf16),
        p.bool_field("gradient_checkpointing", &t.gradient_checkpointing),
        p.bool_field("deterministic", &t.deterministic)}},
      {"output",
       {p.string_field("output_dir", &o.output_dir), p.string_field("output_name", &o.output_name),
        p.int_field("keep_last_n_checkpoints", &o.keep_last_n_checkpoints),
        p.string_field("save_precision", &o.save_precision)}},
      {"coordinator",
       {p.string_field("listen_address", &co.listen_address),
        p.string_field("metrics_address", &co.metrics_address),
        p.int_field("linger_seconds", &co.linger_seconds),
        p.int_field("worker_timeout_seconds", &co.worker_timeout_seconds),
        p.string_field("job_token_file", &co.job_token_file),
        p.string_field("tls_cert_file", &co.tls_cert_file),
        p.string_field("tls_key_file", &co.tls_key_file)}},
      {"worker",
       {p.string_field("metrics_host", &w.metrics_host),
        p.int_field("metrics_port_base", &w.metrics_port_base),
        p.int_field("num_threads", &w.num_threads), p.string_field("device", &w.device),
        p.double_field("vram_budget_gb", &w.vram_budget_gb),
        p.int_field("offload_streams", &w.offload_streams)}},
      {"cluster",
       {p.int_field("world_size", &cl.world_size),
        p.int_field("collective_timeout", &cl.collective_timeout),
        p.int_field("preempt_grace_seconds", &cl.preempt_grace_seconds),
        p.int_field("max_restarts", &cl.max_restarts),
        p.double_field("restart_backoff_seconds", &cl.restart_backoff_seconds),
        p.double_field("restart_backoff_max_seconds", &cl.restart_backoff_max_seconds),
        p.int_field("rendezvous_timeout_seconds", &cl.rendezvous_timeout_seconds)}},
  };

  if (!root.IsNull()) {
    if (!root.IsMap()) {
      p.fail(Parser::line_of(root, 1),
             "expected a mapping of sections (model, dataset, datasets, network, training, "
             "output, coordinator, worker, cluster), got " + Parser::describe(root));
    }
    // Each section is a Field whose setter applies the section's own fields.
    std::vector<Field> top;
    for (const auto& [name, fields] : sections) {
      const MisplacedHint hint = name == "dataset" ? MisplacedHint(misplaced_hint)
                                                    : MisplacedHint();
      top.push_back({name, [&p, &fields = fields, hint](const YAML::Node& v,
                                                         const std::string& key, int line) {
                       p.apply(v, key, fields, line, hint);
                     }});
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
