// The learning rate of each LoRA parameter, as kohya networks.lora
// (LoRANetwork.prepare_optimizer_params_with_multiple_te_lrs) groups them: the part's lr
// (network.unet_lr / text_encoder_lr, else training.learning_rate), times the LoRA+ ratio for
// the lora_up weights (Hayou et al. 2024, "LoRA+: Efficient Low Rank Adaptation of Large
// Models"): loraplus_unet_lr_ratio or loraplus_text_encoder_lr_ratio, else loraplus_lr_ratio.
// With kohya's block lr weights (down_lr_weight, mid_lr_weight, up_lr_weight;
// LoRANetwork.set_block_lr_weight / get_lr_weight) a UNet parameter's part lr is first
// multiplied by the weight of its module's block (get_block_index; SDXL when the UNet names are
// ldm's input_blocks / output_blocks, as kohya tells them apart).
#pragma once

#include <string>
#include <vector>

#include "common/config/job_config.h"

namespace lf {

// names[i] is the kohya key of parameter i ("lora_unet_..._to_q.lora_up.weight");
// text_encoder[i] says whether it belongs to a text encoder. Returns one lr per parameter.
// Throws std::invalid_argument when the sizes differ, for a block lr weight that is neither a
// preset nor numbers, or for a UNet module outside kohya's blocks while block lr weights are set.
std::vector<double> lora_parameter_lrs(const JobConfig& config,
                                       const std::vector<std::string>& names,
                                       const std::vector<bool>& text_encoder);

}  // namespace lf
