// kohya LoRA file writer (see header).
#include "worker/io/lora_file.h"

#include "common/config/optimizer_keys.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "worker/core/train/precision.h"
#include "common/util/wall_clock.h"
#include "common/io/sha256.h"
#include "common/io/safetensors.h"
#include "worker/io/tensor_file.h"

namespace lf {
namespace {

std::string py_bool(bool b) { return b ? "True" : "False"; }

std::string basename_of(const std::string& path) {
  const auto pos = path.find_last_of('/');
  return pos == std::string::npos ? path : path.substr(pos + 1);
}

std::string optional_lr(const std::optional<double>& lr) { return lr ? py_float(*lr) : "None"; }

// kohya train_network's metadata of the noise and loss options: str() of the
// arguments, "None" for kohya's unset defaults (lorafleet's 0 = off).
void add_objective_metadata(std::map<std::string, std::string>& m, const JobConfig& c) {
  const TrainingSection& t = c.training;
  auto off_is_none = [](double v) { return v == 0 ? std::string("None") : py_float(v); };
  m["ss_scale_weight_norms"] = optional_lr(t.scale_weight_norms);
  m["ss_noise_offset"] = off_is_none(t.noise_offset);
  m["ss_noise_offset_random_strength"] = py_bool(t.noise_offset_random_strength);
  m["ss_adaptive_noise_scale"] = optional_lr(t.adaptive_noise_scale);
  m["ss_multires_noise_iterations"] =
      t.multires_noise_iterations > 0 ? std::to_string(t.multires_noise_iterations) : "None";
  m["ss_multires_noise_discount"] = py_float(t.multires_noise_discount);
  m["ss_ip_noise_gamma"] = off_is_none(t.ip_noise_gamma);
  m["ss_ip_noise_gamma_random_strength"] = py_bool(t.ip_noise_gamma_random_strength);
  m["ss_min_snr_gamma"] = optional_lr(t.min_snr_gamma);
  m["ss_debiased_estimation"] = py_bool(t.debiased_estimation_loss);
  m["ss_zero_terminal_snr"] = py_bool(t.zero_terminal_snr);
  m["ss_loss_type"] = t.loss_type;
  m["ss_huber_schedule"] = t.huber_schedule;
  m["ss_huber_scale"] = py_float(t.huber_scale);
  m["ss_huber_c"] = py_float(t.huber_c);
}

// kohya's block-wise and dropout network_args, as given (kohya records the strings).
void add_block_network_args(std::vector<std::pair<std::string, std::string>>& args,
                            const NetworkSection& n) {
  const std::pair<const char*, const std::string*> lists[] = {
      {"down_lr_weight", &n.down_lr_weight},      {"mid_lr_weight", &n.mid_lr_weight},
      {"up_lr_weight", &n.up_lr_weight},          {"block_dims", &n.block_dims},
      {"block_alphas", &n.block_alphas},          {"conv_block_dims", &n.conv_block_dims},
      {"conv_block_alphas", &n.conv_block_alphas}};
  for (const auto& [key, value] : lists) {
    if (!value->empty()) args.emplace_back(key, *value);
  }
  if (n.block_lr_zero_threshold != 0) {
    args.emplace_back("block_lr_zero_threshold", py_float(n.block_lr_zero_threshold));
  }
  if (n.rank_dropout) args.emplace_back("rank_dropout", py_float(*n.rank_dropout));
  if (n.module_dropout) args.emplace_back("module_dropout", py_float(*n.module_dropout));
}

// The JSON text of a string, as json.dumps writes it.
std::string json_string(const std::string& s) { return nlohmann::json(s).dump(); }

// ISO 8601 local time to the second (kohya's datetime.fromtimestamp(t).isoformat() also writes
// microseconds; readers parse both).
std::string iso_local_time(std::time_t t) {
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

// ModelSpec 1.0.1 (kohya library/sai_model_spec.build_metadata, as train_util
// get_sai_model_spec calls it for a LoRA): architecture and implementation by family, the
// title (metadata_title, else output_name), date, resolution, prediction type, encoder layer
// (clip skip), timestep range, and the author, description, license and tags given.
void add_modelspec_metadata(std::map<std::string, std::string>& m, const JobConfig& c,
                            const LoRATrainingFacts& f, int width, int height) {
  const bool sdxl = f.family == "sdxl", v2 = f.family == "sd2";
  m["modelspec.sai_model_spec"] = "1.0.1";
  m["modelspec.architecture"] =
      std::string(
          sdxl ? "stable-diffusion-xl-v1-base"
          : v2 ? (f.v_parameterization ? "stable-diffusion-v2-768-v" : "stable-diffusion-v2-512")
               : "stable-diffusion-v1") +
      "/lora";
  m["modelspec.implementation"] =
      sdxl ? "https://github.com/Stability-AI/generative-models" : "diffusers";
  const OutputSection& o = c.output;
  m["modelspec.title"] = o.metadata_title.empty() ? o.output_name : o.metadata_title;
  m["modelspec.date"] = iso_local_time(output_timestamp());
  m["modelspec.resolution"] = std::to_string(width) + "x" + std::to_string(height);
  m["modelspec.prediction_type"] = f.v_parameterization ? "v" : "epsilon";
  if (f.clip_skip > 0) m["modelspec.encoder_layer"] = std::to_string(f.clip_skip);
  const TrainingSection& t = c.training;
  if (t.min_timestep != 0 || t.max_timestep != 1000) {
    m["modelspec.timestep_range"] =
        std::to_string(t.min_timestep) + "," + std::to_string(t.max_timestep);
  }
  const std::pair<const char*, const std::string*> given[] = {
      {"modelspec.author", &o.metadata_author},
      {"modelspec.description", &o.metadata_description},
      {"modelspec.license", &o.metadata_license},
      {"modelspec.tags", &o.metadata_tags}};
  for (const auto& [key, value] : given) {
    if (!value->empty()) m[key] = *value;
  }
}

// kohya train_network's validation metadata: str() of its arguments ("None" when unset; the
// dataset keys of the first dataset, as kohya's CLI arguments).
void add_validation_metadata(std::map<std::string, std::string>& m, const JobConfig& c,
                             const LoRATrainingFacts& f) {
  const TrainingSection& t = c.training;
  auto zero_is_none = [](int v) { return v == 0 ? std::string("None") : std::to_string(v); };
  const DatasetConfig* d = c.datasets.empty() ? nullptr : &c.datasets[0];
  m["ss_num_validation_images"] = std::to_string(f.num_validation_images);
  m["ss_validation_split"] = py_float(d ? d->validation_split : 0.0);
  m["ss_validation_seed"] =
      d && d->validation_seed ? std::to_string(*d->validation_seed) : std::string("None");
  m["ss_validate_every_n_steps"] = zero_is_none(t.validate_every_n_steps);
  m["ss_validate_every_n_epochs"] = zero_is_none(t.validate_every_n_epochs);
  m["ss_max_validation_steps"] = zero_is_none(t.max_validation_steps);
}

}  // namespace

std::map<std::string, std::string> kohya_lora_metadata(const JobConfig& c,
                                                       const LoRATrainingFacts& f) {
  const auto& tr = c.training;
  std::map<std::string, std::string> m;
  m["ss_session_id"] = std::to_string(f.session_id);
  m["ss_training_started_at"] = py_float(f.training_started_at);
  m["ss_training_finished_at"] = py_float(static_cast<double>(output_timestamp()));
  m["ss_output_name"] = c.output.output_name;
  m["ss_learning_rate"] = py_float(tr.learning_rate);
  // kohya writes args.unet_lr / args.text_encoder_lr as given (None when unset).
  m["ss_unet_lr"] = optional_lr(c.network.unet_lr);
  m["ss_text_encoder_lr"] = optional_lr(c.network.text_encoder_lr);
  m["ss_num_train_images"] = std::to_string(f.num_train_images);
  m["ss_num_reg_images"] = std::to_string(f.num_reg_images);
  add_validation_metadata(m, c, f);
  m["ss_num_batches_per_epoch"] = std::to_string(f.num_batches_per_epoch);
  m["ss_num_epochs"] = std::to_string(f.num_epochs);
  m["ss_epoch"] = std::to_string(f.epoch);
  m["ss_steps"] = std::to_string(f.steps);
  m["ss_max_train_steps"] = std::to_string(f.max_train_steps);
  m["ss_lr_warmup_steps"] = tr.lr_warmup_steps.text();  // as given, as kohya writes it
  m["ss_lr_scheduler"] = kohya_ss_lr_scheduler(tr, py_float(tr.learning_rate));
  // LyCORIS's kohya entry point writes "lycoris.kohya" and its algo among the network_args;
  // kohya's OFT is its own module.
  const bool oft = c.network.algo == "oft";
  const bool lycoris = (c.network.algo != "lora" && !oft) || c.network.dora_wd;
  m["ss_network_module"] = oft ? "networks.oft" : lycoris ? "lycoris.kohya" : "networks.lora";
  m["ss_network_dim"] = std::to_string(c.network.network_dim);
  m["ss_network_alpha"] = py_float(c.network.network_alpha);
  m["ss_network_dropout"] = optional_lr(c.network.network_dropout);  // kohya --network_dropout
  // json.dumps of kohya's network_args dict, whose values are the "key=value" strings.
  std::vector<std::pair<std::string, std::string>> network_args;
  if (lycoris) network_args.emplace_back("algo", c.network.algo);
  if (c.network.factor != -1) network_args.emplace_back("factor", std::to_string(c.network.factor));
  if (c.network.decompose_both) network_args.emplace_back("decompose_both", "True");
  if (c.network.dora_wd) network_args.emplace_back("dora_wd", "True");
  if (c.network.enable_all_linear) network_args.emplace_back("enable_all_linear", "True");
  if (c.network.enable_conv) network_args.emplace_back("enable_conv", "True");
  if (c.network.conv_dim > 0) {
    network_args.emplace_back("conv_dim", std::to_string(c.network.conv_dim));
    network_args.emplace_back("conv_alpha", py_float(c.network.conv_alpha));
  }
  const std::pair<const char*, const std::optional<double>*> loraplus[] = {
      {"loraplus_lr_ratio", &c.network.loraplus_lr_ratio},
      {"loraplus_unet_lr_ratio", &c.network.loraplus_unet_lr_ratio},
      {"loraplus_text_encoder_lr_ratio", &c.network.loraplus_text_encoder_lr_ratio}};
  for (const auto& [key, ratio] : loraplus) {
    if (*ratio) network_args.emplace_back(key, py_float(**ratio));
  }
  add_block_network_args(network_args, c.network);
  if (!network_args.empty()) {
    std::string json;
    for (const auto& [key, value] : network_args) {
      json += (json.empty() ? "" : ", ") + json_string(key) + ": " + json_string(value);
    }
    m["ss_network_args"] = "{" + json + "}";
  }
  add_objective_metadata(m, c);
  m["ss_mixed_precision"] = tr.mixed_precision;
  m["ss_full_fp16"] = py_bool(tr.full_fp16);
  const bool sdxl = f.family == "sdxl", v2 = f.family == "sd2";
  if (!sdxl && !v2 && f.family != "sd1") {
    throw std::invalid_argument("kohya_lora_metadata: unknown model family '" + f.family +
                                "' (expected sd1, sd2 or sdxl)");
  }
  m["ss_v2"] = py_bool(v2);
  // kohya model_util.get_model_version_str_for_sd1_sd2 /
  // sdxl_model_util.MODEL_VERSION_SDXL_BASE_V1_0
  m["ss_base_model_version"] =
      sdxl ? std::string("sdxl_base_v1-0")
           : std::string(v2 ? "sd_v2" : "sd_v1") + (f.v_parameterization ? "_v" : "");
  m["ss_clip_skip"] = f.clip_skip > 0 ? std::to_string(f.clip_skip) : "None";
  // kohya writes args.max_token_length: None (its default, 75 tokens), 150 or 225.
  m["ss_max_token_length"] =
      tr.max_token_length == 75 ? "None" : std::to_string(tr.max_token_length);
  m["ss_cache_latents"] = "True";
  m["ss_seed"] = std::to_string(tr.seed);
  m["ss_gradient_checkpointing"] = py_bool(tr.gradient_checkpointing);
  m["ss_fp8_base"] = py_bool(c.model.fp8_base);
  m["ss_gradient_accumulation_steps"] = std::to_string(tr.gradient_accumulation_steps);
  m["ss_optimizer"] = kohya_ss_optimizer(tr).value_or(
      "torch.optim.adamw.AdamW(weight_decay=" + py_float(tr.adam_weight_decay) + ",betas=(" +
      py_float(tr.adam_beta1) + ", " + py_float(tr.adam_beta2) +
      "),eps=" + py_float(tr.adam_epsilon) + ")");
  m["ss_max_grad_norm"] = py_float(tr.max_grad_norm);
  m["ss_prior_loss_weight"] = py_float(tr.prior_loss_weight);
  m["ss_sd_model_name"] = basename_of(c.model.pretrained_model_name_or_path);
  const DatasetConfig first_dataset = c.datasets.empty() ? DatasetConfig{} : c.datasets[0];
  const BucketOptions& b = first_dataset.buckets;
  if (!f.tag_frequency_json.empty()) m["ss_tag_frequency"] = f.tag_frequency_json;
  if (!f.dataset_dirs_json.empty()) m["ss_dataset_dirs"] = f.dataset_dirs_json;
  if (!f.datasets_json.empty()) {
    // With a dataset config kohya describes every dataset in ss_datasets and writes none of
    // the per-job dataset keys below.
    m["ss_datasets"] = f.datasets_json;
  } else {
    // Legacy (folder form) dataset keys, from the one dataset and its folder defaults (kohya
    // writes these from the CLI arguments).
    const SubsetConfig& sub = first_dataset.subsets.empty() ? first_dataset.folder_defaults
                                                            : first_dataset.subsets[0];
    m["ss_batch_size_per_device"] = std::to_string(first_dataset.batch_size);
    // kohya: train_batch_size * num_processes * gradient_accumulation_steps.
    m["ss_total_batch_size"] = std::to_string(first_dataset.batch_size * f.world_size *
                                              tr.gradient_accumulation_steps);
    m["ss_resolution"] = "(" + std::to_string(b.resolution_w) + ", " +
                         std::to_string(b.resolution_h) + ")";
    m["ss_enable_bucket"] = py_bool(b.enable_bucket);
    m["ss_bucket_no_upscale"] = py_bool(b.bucket_no_upscale);
    m["ss_min_bucket_reso"] = std::to_string(b.min_bucket_reso);
    m["ss_max_bucket_reso"] = std::to_string(b.max_bucket_reso);
    m["ss_flip_aug"] = py_bool(sub.flip_aug);
    m["ss_color_aug"] = "False";
    m["ss_random_crop"] = py_bool(sub.random_crop);
    m["ss_shuffle_caption"] = py_bool(sub.caption.shuffle_caption);
    m["ss_keep_tokens"] = std::to_string(sub.caption.keep_tokens);
    if (!f.reg_dataset_dirs_json.empty()) m["ss_reg_dataset_dirs"] = f.reg_dataset_dirs_json;
    if (!f.bucket_info_json.empty()) m["ss_bucket_info"] = f.bucket_info_json;
  }
  // CLI-level caption dropout values (the first subset's, as kohya's CLI defaults).
  const SubsetConfig& sub0 = first_dataset.subsets.empty() ? first_dataset.folder_defaults
                                                           : first_dataset.subsets[0];
  m["ss_caption_dropout_rate"] = py_float(sub0.caption.caption_dropout_rate);
  m["ss_caption_dropout_every_n_epochs"] =
      std::to_string(sub0.caption.caption_dropout_every_n_epochs);
  m["ss_caption_tag_dropout_rate"] = py_float(sub0.caption.caption_tag_dropout_rate);
  m["ss_training_comment"] = c.output.training_comment.empty() ? "None" : c.output.training_comment;
  add_modelspec_metadata(m, c, f, b.resolution_w, b.resolution_h);
  return m;
}

std::map<std::string, std::string> kohya_minimum_metadata(
    const std::map<std::string, std::string>& metadata) {
  static const char* const kMinimum[] = {
      "ss_v2",          "ss_base_model_version", "ss_network_module",
      "ss_network_dim", "ss_network_alpha",      "ss_network_args"};
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : metadata) {
    if (key.rfind("modelspec.", 0) == 0) out[key] = value;
  }
  for (const char* key : kMinimum) {
    if (const auto it = metadata.find(key); it != metadata.end()) out[key] = it->second;
  }
  return out;
}

std::map<std::string, at::Tensor> tensors_in_save_precision(
    const std::map<std::string, at::Tensor>& lora_state, const std::string& save_precision) {
  if (save_precision.empty()) return lora_state;  // kohya's None: as trained
  const at::ScalarType dtype = dtype_from_name(save_precision);
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : lora_state) {
    const bool alpha = name.size() > 6 && name.compare(name.size() - 6, 6, ".alpha") == 0;
    out[name] = alpha ? t : t.to(dtype);
  }
  return out;
}

FileDigest save_kohya_lora(const std::string& path,
                           const std::map<std::string, at::Tensor>& lora_state,
                           std::map<std::string, std::string> metadata) {
  // Upper bound of the header: the metadata serialised alone, plus per tensor its JSON-escaped
  // name and at most 160 bytes of dtype / shape / offsets, plus the sshs keys still to come.
  {
    SafetensorsWriter meta_only;
    meta_only.set_metadata(metadata);
    std::size_t bound = meta_only.header().size() + 256;
    for (const auto& [name, tensor] : lora_state) {
      bound += json_string(name).size() + 160 + 24 * static_cast<std::size_t>(tensor.dim());
    }
    if (bound > kMaxSafetensorsHeaderBytes) {
      std::string largest;
      std::size_t largest_size = 0;
      for (const auto& [k, v] : metadata) {
        if (v.size() > largest_size) {
          largest = k;
          largest_size = v.size();
        }
      }
      throw std::runtime_error(path + ": the LoRA file header would take up to " +
                               std::to_string(bound) + " bytes, over the safetensors limit of " +
                               std::to_string(kMaxSafetensorsHeaderBytes) +
                               " that readers enforce (largest metadata value: " + largest + ", " +
                               std::to_string(largest_size) + " bytes); not written");
    }
  }
  // kohya hashes a serialisation that carries only the ss_* keys: its data section is the same
  // whatever the metadata, its 64 KiB at 1 MiB are not.
  std::map<std::string, std::string> ss_only;
  for (const auto& [k, v] : metadata) {
    if (k.rfind("ss_", 0) == 0) ss_only[k] = v;
  }
  TensorsWriter out = make_tensors_writer(lora_state, ss_only);
  const std::size_t legacy_begin = 0x100000, legacy_len = 0x10000;
  const std::vector<std::uint8_t> legacy = out.writer.image_bytes(legacy_begin, legacy_len);
  metadata["sshs_model_hash"] = out.writer.data_sha256();
  metadata["sshs_legacy_hash"] = sha256_hex(legacy.data(), legacy.size()).substr(0, 8);
  out.writer.set_metadata(std::move(metadata));
  return out.writer.write_atomic(path);
}

std::map<std::string, PeftAdapterConfig> parse_peft_adapter_metadata(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("lora_adapter_metadata is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw std::runtime_error("lora_adapter_metadata is not a JSON object");
  std::map<std::string, PeftAdapterConfig> out;
  for (const auto& [key, value] : j.items()) {
    std::string component, field = key;
    for (const char* prefix : {"unet.", "text_encoder.", "text_encoder_2."}) {
      const std::string p = prefix;
      if (key.rfind(p, 0) == 0) {
        component = p.substr(0, p.size() - 1);
        field = key.substr(p.size());
      }
    }
    PeftAdapterConfig& c = out[component];
    try {
      if (field == "r" && value.is_number()) {
        // A float outside int64 would be undefined behaviour to convert.
        const double r = value.get<double>();
        if (!(r >= 0 && r <= 1e9)) {
          throw std::runtime_error("lora_adapter_metadata: bad value for '" + key +
                                   "': expected a rank, got " + value.dump());
        }
        c.r = static_cast<int64_t>(r);
      }
      if (field == "lora_alpha" && value.is_number()) c.lora_alpha = value.get<double>();
      if (field == "use_rslora" && value.is_boolean()) c.use_rslora = value.get<bool>();
      if (field == "alpha_pattern" && value.is_object()) {
        for (const auto& [pattern, alpha] : value.items()) {
          c.alpha_pattern[pattern] = alpha.get<double>();
        }
      }
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error("lora_adapter_metadata: bad value for '" + key + "': " + e.what());
    }
  }
  return out;
}

namespace {

// A LoRA file's tensors and its PEFT alpha metadata, for `use`; errors prefixed with the path.
template <typename Use>
auto with_network_weights(const std::string& path, Use use) {
  try {
    LoadedTensors file = load_safetensors(path);
    std::map<std::string, PeftAdapterConfig> peft;
    auto it = file.metadata.find("lora_adapter_metadata");
    if (it != file.metadata.end()) peft = parse_peft_adapter_metadata(it->second);
    return use(std::map<std::string, at::Tensor>(file.tensors.begin(), file.tensors.end()), peft);
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (what.rfind(path, 0) == 0) throw;
    throw std::runtime_error(path + ": " + what);
  } catch (const std::invalid_argument& e) {  // lora_module_dims: a lora_down of < 2 dims
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace

LoRALoadReport load_network_weights(LoRANetwork& network, const std::string& path) {
  return with_network_weights(path, [&network](const auto& tensors, const auto& peft) {
    return network.load_weights(tensors, peft);
  });
}

std::map<std::string, LoRAModuleDim> network_weights_module_dims(const std::string& path,
                                                                 const LoRAKeyContext& ctx) {
  return with_network_weights(path, [&ctx](const auto& tensors, const auto& peft) {
    return lora_module_dims(normalize_lora_state_dict(tensors, ctx, peft).tensors);
  });
}

}  // namespace lf
