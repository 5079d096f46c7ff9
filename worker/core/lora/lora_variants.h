// Normalises the LoRA file layouts found in the wild to kohya's keys
// ("<lora_name>.lora_down.weight", ".lora_up.weight", ".alpha"), so an existing LoRA can be
// loaded to continue training. Accepts what stable-diffusion.cpp's convert_tensor_name /
// lora.hpp accept for plain LoRA, plus LyCORIS LoHa / LoKr / DoRA (kept as their factors) and
// kohya networks.oft OFT (oft_unet_* modules, kept as they are), and refuses, naming the variant
// and the first offending key, what lorafleet cannot continue (PEFT DoRA, full diffs, Tucker/CP
// lora_mid, hada_t1 / hada_t2 and lokr_t2).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "lora/lora_naming.h"

namespace lf {

// The alpha-related fields of a PEFT LoraConfig, as diffusers stores them in the safetensors
// metadata key "lora_adapter_metadata" (a JSON object, parsed in worker/io). Keys there are
// prefixed per component ("unet.lora_alpha", "text_encoder.r", "text_encoder_2.alpha_pattern")
// or unprefixed for a single-model save; the map passed below is keyed by that component
// ("unet", "text_encoder", "text_encoder_2", or "" for unprefixed).
struct PeftAdapterConfig {
  int64_t r = 0;            // informational: ranks are read from the tensors
  double lora_alpha = 0.0;  // 0: not given (alpha = rank, scale 1)
  bool use_rslora = false;  // PEFT scale alpha / sqrt(r): stored as kohya alpha * sqrt(r)
  // Module path (relative to the component, diffusers names) -> alpha. A pattern matches a module
  // whose path equals it or ends with "." + pattern (PEFT's get_pattern_key, literal patterns).
  std::map<std::string, double> alpha_pattern;
};

// What the target network's keys look like.
struct LoRAKeyContext {
  UNetLoRANaming unet;
  // kohya prefixes of the model's text encoders in order: {"lora_te"} (SD 1.x/2.x) or
  // {"lora_te1", "lora_te2"} (SDXL). PEFT "text_encoder." maps to [0], "text_encoder_2." to [1].
  std::vector<std::string> text_encoder_prefixes;
};

struct NormalizedLoRA {
  // kohya keys; every module has lora_down, lora_up (LoHa modules: hada_w1_a, hada_w1_b,
  // hada_w2_a, hada_w2_b; tensors as found, unchanged shape and dtype) and a 0-dim float32 alpha
  // (alpha from the file, or from ".scale" x rank, or the PEFT config, else the rank).
  std::map<std::string, at::Tensor> tensors;
  // The layouts seen, e.g. "kohya" or "PEFT/diffusers (lora_A/lora_B)", comma-joined.
  std::string variants;
};

// Maps every tensor of a LoRA file to kohya keys:
//  - kohya names "lora_unet_*", "lora_te_*", "lora_te1_*", "lora_te2_*"; "lycoris_" prefixes;
//  - suffixes ".lora_down.weight" / ".lora.down.weight" / "_lora.down.weight" / ".lora_A.weight" /
//    ".lora_A.default.weight" / ".lora_linear_layer.down.weight" (and the up / lora_B twins),
//    ".alpha", ".scale" (wins over alpha: alpha = scale x rank);
//  - LyCORIS LoHa ".hada_w1_a" / ".hada_w1_b" / ".hada_w2_a" / ".hada_w2_b" (all four, 2-D; rank
//    = hada_w1_b's first dimension), as lycoris-lora LohaModule saves them;
//  - PEFT/diffusers module paths "unet.*" (or bare "down_blocks.*" ...), "text_encoder.*",
//    "text_encoder_2.*": SD 1.x/2.x keep the diffusers path, SDXL (ctx.unet.ldm_names) is mapped
//    to kohya's ldm names with the general (L+1) rule;
//  - the old diffusers attention-processor names ("attn1.processor.to_q_lora.down.weight",
//    "to_out_lora" -> to_out.0; text encoder to_q/to_k/to_v/to_out -> q/k/v/out_proj).
//  - kohya networks.oft "oft_unet_*" modules: ".oft_blocks" ([k, b, b]) with their ".alpha".
// Throws std::runtime_error naming the variant and the first key for PEFT DoRA
// (lora_magnitude_vector), full diffs (.diff, .diff_b), Tucker/CP (lora_mid, hada_t1 / hada_t2,
// lokr_t2), and for unrecognised keys, duplicates, modules lacking lora_down or lora_up (or one
// of the LoHa / LoKr factors, or an OFT module its alpha), LoHa / LoKr factors that are not 2-D
// (a conv lokr_w2 may be 4-D) and modules mixing adapter kinds.
NormalizedLoRA normalize_lora_state_dict(const std::map<std::string, at::Tensor>& tensors,
                                         const LoRAKeyContext& ctx,
                                         const std::map<std::string, PeftAdapterConfig>& peft = {});

// Which model family kohya-named LoRA tensors look made for: "SDXL" (ldm UNet names, lora_te1/2,
// cross-attention width 2048), "SD 2.x" (width 1024), "SD 1.x" (768), "SD 1.x/2.x" (diffusers
// names, width not one of those), or "" when nothing tells.
std::string guess_lora_family(const std::map<std::string, at::Tensor>& kohya_tensors);

}  // namespace lf
