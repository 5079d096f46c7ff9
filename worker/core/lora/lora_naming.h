// kohya LoRA module names ("lora_unet_...", "lora_te_...", "lora_te1_...", "lora_te2_...") derived
// from lorafleet's module paths, which follow the ldm UNet and the HF CLIP text model. Pure string
// functions, so the rules can be checked for every family without building a model. Mirrors
// kohya-ss/sd-scripts networks/lora.py LoRANetwork.create_modules (lora_name = prefix + "." +
// module path + "." + child path with "." -> "_"), with the module paths of kohya's own UNets:
// library/original_unet.py (SD 1.x/2.x: diffusers names) and library/sdxl_original_unet.py (SDXL:
// ldm names, e.g. ResBlock in_layers.2 / emb_layers.1 / out_layers.3 / skip_connection).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lf {

// What the UNet key names depend on besides the module path.
struct UNetLoRANaming {
  // true for SDXL (kohya keeps the ldm names of sdxl_original_unet), false for SD 1.x/2.x
  // (kohya's original_unet mirrors the diffusers module tree).
  bool ldm_names = false;
  int64_t num_res_blocks = 2;             // L: ResBlocks per input level
  std::vector<bool> level_has_attention;  // per level: SD1/2 {1,1,1,0}, SDXL {0,1,1}
};

// Where an ldm UNet layer sits, as far as kohya's target classes go.
enum class UNetLoRAScope {
  kNone,         // not a kohya target (conv_in, time_embed, label_emb, out)
  kTransformer,  // inside a SpatialTransformer (Transformer2DModel): always targeted
  kResBlock,     // inside a ResBlock / Downsample / Upsample: targeted only with conv_dim (LoCon)
};

struct UNetLoRAName {
  std::string name;  // kohya lora_name, "" when scope == kNone
  UNetLoRAScope scope = UNetLoRAScope::kNone;
};

// Maps an ldm UNet *layer* path (a Linear or Conv2d, e.g.
// "input_blocks.1.1.transformer_blocks.0.attn1.to_q", "input_blocks.1.0.in_layers.2",
// "input_blocks.3.0.op", "output_blocks.2.1.conv") to its kohya lora_name:
//   SD 1.x/2.x: "lora_unet_" + diffusers path ("down_blocks_0_attentions_0_..._to_q",
//     "down_blocks_0_resnets_0_conv1", "down_blocks_0_downsamplers_0_conv",
//     "up_blocks_0_upsamplers_0_conv"; ResBlock children conv1 / time_emb_proj / conv2 /
//     conv_shortcut);
//   SDXL: "lora_unet_" + the ldm path ("input_blocks_1_0_in_layers_2", "output_blocks_2_2_conv").
// Throws std::invalid_argument for a path that is not an ldm UNet layer of this wiring (e.g. an
// upsample index that does not match the level's attention, an unknown ResBlock child).
UNetLoRAName kohya_unet_lora_name(const std::string& ldm_layer_path, const UNetLoRANaming& naming);

// ldm module path -> diffusers module path (diffusers convert_ldm_unet_checkpoint, for any L):
// input_blocks.{1+i(L+1)+j}.0 -> down_blocks.i.resnets.j (children renamed conv1, time_emb_proj,
// conv2, conv_shortcut), .1 -> down_blocks.i.attentions.j, input_blocks.{(i+1)(L+1)}.0.op ->
// down_blocks.i.downsamplers.0.conv, middle_block.{0,1,2} -> mid_block.{resnets.0, attentions.0,
// resnets.1}, output_blocks.{i(L+1)+j}.0 / .1 -> up_blocks.i.resnets.j / attentions.j, the
// upsample conv -> up_blocks.i.upsamplers.0.conv. Throws std::invalid_argument otherwise.
std::string ldm_to_diffusers_unet_path(const std::string& ldm_path, const UNetLoRANaming& naming);

// The inverse of ldm_to_diffusers_unet_path (for SDXL PEFT/diffusers LoRA keys, which kohya
// converts to the ldm names as convert_diffusers_to_sai_if_needed does). Throws
// std::invalid_argument for a path outside down_blocks / mid_block / up_blocks or off the wiring.
std::string diffusers_to_ldm_unet_path(const std::string& diffusers_path,
                                       const UNetLoRANaming& naming);

// True for the text-encoder layers kohya targets (children of CLIPAttention / CLIPMLP):
// "encoder.layers.{i}.self_attn.{q_proj,k_proj,v_proj,out_proj}" and
// "encoder.layers.{i}.mlp.{fc1,fc2}" (paths relative to the HF text_model). *layer gets i.
bool is_text_encoder_lora_target(const std::string& text_model_layer_path, int64_t* layer);

// prefix ("lora_te" | "lora_te1" | "lora_te2") + "_text_model_" + path with '.' -> '_', e.g.
// "lora_te1_text_model_encoder_layers_0_self_attn_q_proj" (HF CLIP names for every family,
// also where the checkpoint is open_clip).
std::string kohya_text_encoder_lora_name(const std::string& prefix,
                                         const std::string& text_model_layer_path);

}  // namespace lf
