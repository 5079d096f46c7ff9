// The fate of every kohya train_network.py / sdxl_train_network.py argument (see
// kohya_arg_fates.h), one line each, in the order kohya's setup_parser adds them.
#include "common/config/kohya_arg_fates.h"

#include <algorithm>

#include "common/config/dataset_keys.h"
#include "common/config/job_keys.h"

namespace lf {
namespace {

using F = KohyaArgFate;

KohyaArg key(const char* name, const char* kohya_default = "") {
  return {name, F::kKey, "", "", kohya_default};
}
KohyaArg mapped(const char* name, const char* what) { return {name, F::kMapped, "", what, ""}; }
KohyaArg ignored(const char* name, const char* why) { return {name, F::kIgnored, "", why, ""}; }
KohyaArg noop_only(const char* name, const char* noop, const char* why) {
  return {name, F::kNoOpOnly, noop, why, ""};
}

constexpr const char* kNotYet = "not implemented in lorafleet yet";
constexpr const char* kLogs =
    "lorafleet decides this itself: it logs to stderr, /metrics (Prometheus) and the metric "
    "snapshots in output_dir";
constexpr const char* kAttention =
    "lorafleet decides this itself: LibTorch's attention kernel, the same result";
constexpr const char* kLoader =
    "lorafleet decides this itself: its data pipeline is planned by the coordinator";
constexpr const char* kDdp =
    "lorafleet decides this itself: gradients go over MPI/NCCL (cluster.collective_timeout "
    "bounds a collective)";
constexpr const char* kCompile = "lorafleet decides this itself: C++ LibTorch, no torch.compile";
constexpr const char* kDeepSpeedOff = "only read with deepspeed, which lorafleet refuses";
constexpr const char* kHub = "lorafleet does not upload to or download from the Hugging Face Hub";
constexpr const char* kMetadata =
    "not implemented in lorafleet yet (metadata_title, _author, _description, _license and "
    "_tags are)";

const std::vector<KohyaArg>& table() {
  static const std::vector<KohyaArg> args = {
      // library/utils.py add_logging_arguments
      ignored("console_log_level", kLogs),
      ignored("console_log_file", kLogs),
      ignored("console_log_simple", kLogs),
      // train_util.add_sd_models_arguments
      ignored("v2",
              "lorafleet decides this itself: model.architecture auto detects SD 1.x / 2.x / SDXL "
              "from the checkpoint"),
      key("v_parameterization"),
      key("pretrained_model_name_or_path"),
      ignored("tokenizer_cache_dir",
              "lorafleet decides this itself: the CLIP vocabulary is model.tokenizer_vocab"),
      // sai_model_spec.add_model_spec_arguments
      key("metadata_title"),
      key("metadata_author"),
      key("metadata_description"),
      key("metadata_license"),
      key("metadata_tags"),
      noop_only("metadata_usage_hint", "off", kMetadata),
      noop_only("metadata_thumbnail", "off", kMetadata),
      noop_only("metadata_merged_from", "off", kMetadata),
      noop_only("metadata_trigger_phrase", "off", kMetadata),
      noop_only("metadata_preprocessor", "off", kMetadata),
      noop_only("metadata_is_negative_embedding", "off", kMetadata),
      // train_util.add_dataset_arguments(parser, True, True, True)
      key("train_data_dir"),
      key("cache_info"),
      key("shuffle_caption"),
      key("caption_separator"),
      key("caption_extension"),
      key("caption_extention"),
      key("keep_tokens"),
      key("keep_tokens_separator"),
      key("secondary_separator"),
      key("enable_wildcard"),
      key("caption_prefix"),
      key("caption_suffix"),
      key("color_aug"),
      key("flip_aug"),
      key("face_crop_aug_range"),
      key("random_crop"),
      noop_only("debug_dataset", "off",
                "lorafleet-coordinator --inspect shows the datasets, buckets and steps instead"),
      key("resolution"),
      noop_only("cache_latents", "true",
                "lorafleet always caches the latents, encoded once before training "
                "(cache_latents_to_disk keeps them between runs); set cache_latents = true"),
      ignored("vae_batch_size", kLoader),
      key("cache_latents_to_disk"),
      ignored("skip_cache_check",
              "lorafleet decides this itself: its cache files carry their own checks"),
      key("enable_bucket", "false"),
      key("min_bucket_reso"),
      key("max_bucket_reso"),
      key("bucket_reso_steps"),
      key("bucket_no_upscale"),
      key("token_warmup_min"),
      key("token_warmup_step"),
      key("alpha_mask"),
      key("resize_interpolation"),
      noop_only("dataset_class", "off", "arbitrary dataset classes are not loaded by lorafleet"),
      key("caption_dropout_rate"),
      key("caption_dropout_every_n_epochs"),
      key("caption_tag_dropout_rate"),
      key("reg_data_dir"),
      noop_only("in_json", "off",
                "fine-tuning (metadata .json) datasets are not implemented in "
                "lorafleet yet; use DreamBooth subsets"),
      noop_only("dataset_repeats", "off|1", "only read with in_json, which lorafleet refuses"),
      // train_util.add_training_arguments(parser, True)
      key("output_dir"),
      key("output_name"),
      noop_only("huggingface_repo_id", "off", kHub),
      noop_only("huggingface_repo_type", "off", kHub),
      noop_only("huggingface_path_in_repo", "off", kHub),
      noop_only("huggingface_token", "off", kHub),
      noop_only("huggingface_repo_visibility", "off", kHub),
      noop_only("save_state_to_huggingface", "off", kHub),
      noop_only("resume_from_huggingface", "off", kHub),
      noop_only("async_upload", "off", kHub),
      key("save_precision"),
      key("save_every_n_epochs"),
      key("save_every_n_steps"),
      key("save_n_epoch_ratio"),
      key("save_last_n_epochs"),
      noop_only("save_last_n_epochs_state", "off",
                "lorafleet decides this itself: output.keep_last_n_checkpoints (job YAML) keeps "
                "the newest checkpoints"),
      key("save_last_n_steps"),
      noop_only("save_last_n_steps_state", "off",
                "lorafleet decides this itself: output.keep_last_n_checkpoints (job YAML) keeps "
                "the newest checkpoints"),
      ignored("save_state",
              "lorafleet decides this itself: every save is a resumable checkpoint (optimizer, "
              "RNG and data position included)"),
      ignored("save_state_on_train_end",
              "lorafleet decides this itself: the last save is a resumable checkpoint"),
      noop_only("resume", "off",
                "lorafleet decides this itself: a restarted job resumes from the last committed "
                "checkpoint in output_dir"),
      key("train_batch_size"),
      key("max_token_length"),
      ignored("mem_eff_attn", kAttention),
      ignored("torch_compile", kCompile),
      ignored("dynamo_backend", kCompile),
      ignored("dynamo_mode", kCompile),
      ignored("dynamo_fullgraph", kCompile),
      ignored("dynamo_dynamic", kCompile),
      ignored("xformers", kAttention),
      ignored("sdpa", kAttention),
      noop_only("vae", "off", "not implemented in lorafleet yet: the checkpoint's own VAE is used"),
      key("max_train_steps"),
      key("max_train_epochs"),
      ignored("max_data_loader_n_workers", kLoader),
      ignored("persistent_data_loader_workers", kLoader),
      key("seed"),
      key("gradient_checkpointing"),
      key("gradient_accumulation_steps"),
      key("mixed_precision"),
      key("full_fp16"),
      key("full_bf16"),
      key("fp8_base"),
      ignored("ddp_timeout", kDdp),
      ignored("ddp_gradient_as_bucket_view", kDdp),
      ignored("ddp_static_graph", kDdp),
      key("clip_skip"),
      key("logging_dir"),
      key("log_with"),
      key("log_prefix"),
      key("log_tracker_name"),
      ignored("wandb_run_name", kLogs),
      ignored("log_tracker_config", kLogs),
      ignored("wandb_api_key", kLogs),
      key("log_config"),
      key("noise_offset"),
      key("noise_offset_random_strength"),
      key("multires_noise_iterations"),
      key("ip_noise_gamma"),
      key("ip_noise_gamma_random_strength"),
      key("multires_noise_discount"),
      key("adaptive_noise_scale"),
      key("zero_terminal_snr"),
      key("min_timestep"),
      key("max_timestep"),
      key("loss_type"),
      key("huber_schedule"),
      key("huber_c"),
      key("huber_scale"),
      ignored("lowram",
              "lorafleet decides this itself: worker.vram_budget_gb and the block streaming"),
      ignored("highvram",
              "lorafleet decides this itself: worker.vram_budget_gb and the block streaming"),
      key("sample_every_n_steps"),
      key("sample_at_first"),
      key("sample_every_n_epochs"),
      key("sample_prompts"),
      key("sample_sampler"),
      noop_only("config_file", "off", "a config file cannot name another one"),
      noop_only("output_config", "off",
                "kohya writes its arguments to the --config_file and exits; run kohya for that"),
      key("prior_loss_weight"),
      // train_util.add_masked_loss_arguments
      noop_only("conditioning_data_dir", "off",
                "masked loss is not implemented in lorafleet "
                "yet (alpha_mask is)"),
      noop_only("masked_loss", "off", "not implemented in lorafleet yet (alpha_mask is)"),
      // deepspeed_utils.add_deepspeed_arguments
      noop_only("deepspeed", "off",
                "lorafleet decides this itself: data-parallel ranks with replicated LoRA "
                "weights, no DeepSpeed"),
      ignored("zero_stage", kDeepSpeedOff),
      ignored("offload_optimizer_device", kDeepSpeedOff),
      ignored("offload_optimizer_nvme_path", kDeepSpeedOff),
      ignored("offload_param_device", kDeepSpeedOff),
      ignored("offload_param_nvme_path", kDeepSpeedOff),
      ignored("zero3_init_flag", kDeepSpeedOff),
      ignored("zero3_save_16bit_model", kDeepSpeedOff),
      noop_only("fp16_master_weights_and_gradients", "off", "DeepSpeed's; lorafleet refuses it"),
      // train_util.add_optimizer_arguments
      key("optimizer_type"),
      mapped("use_8bit_adam", "true: training.optimizer_type = AdamW8bit (kohya's old spelling)"),
      mapped("use_lion_optimizer", "true: training.optimizer_type = Lion (kohya's old spelling)"),
      key("learning_rate", "2e-06"),
      key("max_grad_norm"),
      key("optimizer_args"),
      noop_only("lr_scheduler_type", "off",
                "custom scheduler modules are not loaded by lorafleet; lr_scheduler names one of "
                "kohya's schedules"),
      key("lr_scheduler_args"),
      key("lr_scheduler", "constant"),
      key("lr_warmup_steps"),
      key("lr_decay_steps"),
      key("lr_scheduler_num_cycles"),
      key("lr_scheduler_power"),
      noop_only("fused_backward_pass", "off", kNotYet),
      key("lr_scheduler_timescale"),
      key("lr_scheduler_min_lr_ratio"),
      // config_util.add_config_arguments
      key("dataset_config"),
      // custom_train_functions.add_custom_train_arguments
      key("min_snr_gamma"),
      key("scale_v_pred_loss_like_noise_pred"),
      key("v_pred_like_loss"),
      key("debiased_estimation_loss"),
      noop_only("weighted_captions", "off", kNotYet),
      // train_network.setup_parser
      ignored("cpu_offload_checkpointing",
              "lorafleet decides this itself: worker.vram_budget_gb streams UNet blocks"),
      key("no_metadata"),
      mapped("save_model_as", "safetensors only: lorafleet writes .safetensors LoRA files"),
      key("unet_lr"),
      key("text_encoder_lr"),
      noop_only("fp8_base_unet", "off", "not implemented in lorafleet yet (fp8_base is)"),
      key("network_weights"),
      mapped("network_module",
             "networks.lora (lorafleet's LoRA / LoCon), networks.oft (kohya's OFT: network.algo "
             "oft), or lycoris.kohya with network_args algo=loha or algo=lokr (LyCORIS LoHa / "
             "LoKr); other modules and algos are not implemented in lorafleet yet"),
      key("network_dim"),
      key("network_alpha"),
      key("network_dropout"),
      mapped("network_args",
             "each \"key=value\" sets the network key of that name (conv_dim, conv_alpha, "
             "loraplus_lr_ratio, ...); a key lorafleet's network does not have is refused"),
      key("network_train_unet_only"),
      key("network_train_text_encoder_only"),
      key("training_comment"),
      key("dim_from_weights"),
      key("scale_weight_norms"),
      noop_only("base_weights", "off", kNotYet),
      noop_only("base_weights_multiplier", "off", kNotYet),
      mapped("no_half_vae", "true: model.vae_dtype = fp32 (lorafleet's default VAE dtype)"),
      noop_only("skip_until_initial_step", "off",
                "lorafleet decides this itself: a resumed job continues at its exact step"),
      noop_only("initial_epoch", "off|1",
                "lorafleet decides this itself: a resumed job continues at its exact step"),
      noop_only("initial_step", "off",
                "lorafleet decides this itself: a resumed job continues at its exact step"),
      key("validation_seed"),
      key("validation_split"),
      key("validate_every_n_steps"),
      key("validate_every_n_epochs"),
      key("max_validation_steps"),
      // sdxl_train_util.add_sdxl_training_arguments (sdxl_train_network.py)
      noop_only("cache_text_encoder_outputs", "off",
                "not implemented in lorafleet yet (cache_text_encoder_outputs_to_disk is)"),
      key("cache_text_encoder_outputs_to_disk"),
      key("disable_mmap_load_safetensors"),
  };
  return args;
}

}  // namespace

const std::vector<KohyaArg>& kohya_args() { return table(); }

const KohyaArg* find_kohya_arg(const std::string& name) {
  const auto& args = table();
  auto it =
      std::find_if(args.begin(), args.end(), [&name](const KohyaArg& a) { return name == a.name; });
  return it == args.end() ? nullptr : &*it;
}

std::string kohya_noop_text(const KohyaArg& arg) {
  std::string out;
  std::string values = arg.noop;
  std::size_t start = 0;
  while (start <= values.size()) {
    const std::size_t bar = std::min(values.find('|', start), values.size());
    const std::string v = values.substr(start, bar - start);
    if (!out.empty()) out += " or ";
    out += v == "off" ? "off (false, 0, \"\" or [])" : "`" + v + "`";
    start = bar + 1;
  }
  return out;
}

std::string kohya_arg_target(const std::string& name) {
  for (const JobKeyInfo& k : job_keys()) {
    if (k.name == name) return k.section + "." + k.name;
  }
  if (dataset_keys::find_key(name, dataset_keys::kSection) != nullptr) return "dataset." + name;
  return "";
}

KohyaArgFate effective_fate(const KohyaArg& arg) {
  return kohya_arg_target(arg.name).empty() ? arg.fate : F::kKey;
}

std::string kohya_args_markdown() {
  std::string out;
  for (const KohyaArg& a : table()) {
    std::string fate, what;
    switch (effective_fate(a)) {
      case F::kKey: {
        const auto* ds = dataset_keys::find_key(a.name, dataset_keys::kSection);
        if (ds != nullptr && !ds->supported) {
          fate = "no-op only";
          what = "sets `dataset." + std::string(a.name) +
                 "`, a kohya dataset key lorafleet accepts only at its no-op value (not "
                 "implemented in lorafleet yet)";
          break;
        }
        fate = "key";
        what = "sets `" + kohya_arg_target(a.name) + "`";
        if (*a.kohya_default != '\0') {
          what += std::string("; kohya's default `") + a.kohya_default + "` when not given";
        }
        break;
      }
      case F::kMapped:
        fate = "mapped";
        what = a.detail;
        break;
      case F::kIgnored:
        fate = "ignored";
        what = a.detail;
        break;
      case F::kNoOpOnly:
        fate = "no-op only";
        what = "only " + kohya_noop_text(a) + ": " + a.detail;
        break;
    }
    out += std::string("| `") + a.name + "` | " + fate + " | " + what + " |\n";
  }
  return out;
}

}  // namespace lf
