// kohya-format LoRA files: "<lora_name>.lora_down.weight", ".lora_up.weight", ".alpha" tensors
// plus ss_* metadata and the sshs_* hashes, as kohya sd-scripts train_network.py writes them, so
// ComfyUI, A1111/Forge and diffusers load the result unchanged.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>

#include "common/config/job_config.h"
#include "common/data/dataset.h"
#include "common/data/dataset_metadata.h"  // kohya_bucket_info_json
#include "common/data/epoch_plan.h"
#include "common/io/sha256.h"
#include "common/util/py_format.h"         // py_float
#include "worker/core/lora/lora_network.h"

namespace lf {

// Facts of the run that the metadata records (kohya ss_* keys), besides the job config.
struct LoRATrainingFacts {
  std::int64_t session_id = 0;
  double training_started_at = 0.0;  // unix seconds
  int epoch = 0;                     // 1-based epoch of this file (kohya ss_epoch)
  std::int64_t steps = 0;            // global_step of this file (ss_steps)
  std::int64_t max_train_steps = 0;
  int num_epochs = 0;
  std::int64_t num_batches_per_epoch = 0;
  std::int64_t num_train_images = 0;  // sum images x repeats, train subsets
  std::int64_t num_reg_images = 0;    // raw reg images x repeats (kohya records the raw count)
  std::int64_t num_validation_images = 0;  // held out (dataset validation_split)
  int world_size = 1;
  std::string bucket_info_json;       // {"buckets": {...}, "mean_img_ar_error": x}
  // common/data/dataset_metadata.h JSON. With datasets_json set (a dataset config: several
  // datasets, a datasets: list or a kohya TOML) kohya writes ss_datasets instead of the legacy
  // per-job dataset keys (ss_resolution, ss_flip_aug, ...); this does the same.
  std::string tag_frequency_json;     // ss_tag_frequency
  std::string dataset_dirs_json;      // ss_dataset_dirs
  std::string reg_dataset_dirs_json;  // ss_reg_dataset_dirs (legacy form only)
  std::string datasets_json;          // ss_datasets, "" in the legacy (folder) form
  // The model, for ss_v2 / ss_base_model_version and modelspec.*: "sd1" | "sd2" | "sdxl" (as
  // model_config's family_name()), v-prediction, and clip skip (0 = not given: "None").
  std::string family = "sd1";
  bool v_parameterization = false;
  int clip_skip = 0;
};

// safetensors readers (the reference one included) refuse headers over this many bytes.
inline constexpr std::size_t kMaxSafetensorsHeaderBytes = 100000000;

// Builds the ss_* and modelspec.* metadata map (all values strings, Python str() style:
// "True"/"False"/"None"), as kohya train_network.py + library/sai_model_spec.build_metadata:
// ss_base_model_version "sd_v1" | "sd_v2" (+ "_v" with v-prediction) | "sdxl_base_v1-0",
// modelspec.architecture "stable-diffusion-v1/lora" | "stable-diffusion-v2-512/lora" |
// "stable-diffusion-v2-768-v/lora" | "stable-diffusion-xl-v1-base/lora",
// modelspec.implementation "diffusers" (SD 1.x/2.x) |
// "https://github.com/Stability-AI/generative-models" (SDXL). Throws std::invalid_argument for
// an unknown facts.family.
std::map<std::string, std::string> kohya_lora_metadata(const JobConfig& config,
                                                       const LoRATrainingFacts& facts);

// What kohya's --no_metadata keeps of `metadata`: the keys a loader needs (ss_v2,
// ss_base_model_version, ss_network_module / _dim / _alpha / _args) and the modelspec.* ones.
std::map<std::string, std::string> kohya_minimum_metadata(
    const std::map<std::string, std::string>& metadata);

// The tensors of a LoRA file as output.save_precision (kohya --save_precision) stores them:
// "float" float32, "fp16", "bf16", or "" (unset, kohya's None) as they are, in the training
// dtype; the ".alpha" scalars stay float32, so alpha / rank is exact in every precision. Throws
// std::invalid_argument for another value (dtype_from_name).
std::map<std::string, at::Tensor> tensors_in_save_precision(
    const std::map<std::string, at::Tensor>& lora_state, const std::string& save_precision);

// Adds sshs_model_hash (SHA-256 of the tensor data section) and sshs_legacy_hash (first 8 hex
// of SHA-256 over 64 KiB at 1 MiB of the ss_*-only serialisation), as kohya
// train_util.precalculate_safetensors_hashes, then writes atomically (temp, fsync, rename).
// The tensors are hashed and written from their own memory, never serialised into a buffer.
// Returns the written file's size and SHA-256 (for a checkpoint's COMMITTED manifest).
// Throws std::runtime_error naming the path on I/O errors, and (writing nothing) when the
// safetensors header (tensor entries + metadata) could exceed kMaxSafetensorsHeaderBytes.
FileDigest save_kohya_lora(const std::string& path,
                           const std::map<std::string, at::Tensor>& lora_state,
                           std::map<std::string, std::string> metadata);

// Parses diffusers' "lora_adapter_metadata" JSON (PEFT LoraConfig fields, keys prefixed
// "unet." / "text_encoder." / "text_encoder_2." or unprefixed) into per-component alpha configs
// keyed "unet", "text_encoder", "text_encoder_2" or "". Throws std::runtime_error on bad JSON,
// a non-numeric alpha_pattern value and an "r" outside [0, 1e9].
std::map<std::string, PeftAdapterConfig> parse_peft_adapter_metadata(const std::string& json);

// Loads an existing LoRA file (network.network_weights) into `network` to continue training:
// reads the tensors and the PEFT alpha metadata when present, then LoRANetwork::load_weights
// (kohya and the other accepted layouts; refusals name the variant). Throws std::runtime_error
// prefixed with the path.
LoRALoadReport load_network_weights(LoRANetwork& network, const std::string& path);

// kohya --dim_from_weights (create_network_from_weights): the rank and alpha of every module of
// the LoRA file at `path`, read in any layout load_network_weights accepts (normalised with
// `ctx`). Throws std::runtime_error prefixed with the path.
std::map<std::string, LoRAModuleDim> network_weights_module_dims(const std::string& path,
                                                                 const LoRAKeyContext& ctx);

}  // namespace lf
