// The learning rate of each LoRA parameter, as kohya networks.lora
// (LoRANetwork.prepare_optimizer_params_with_multiple_te_lrs) groups them: the part's lr
// (network.unet_lr / text_encoder_lr, else training.learning_rate), times the LoRA+ ratio for
// the lora_up weights (Hayou et al. 2024, "LoRA+: Efficient Low Rank Adaptation of Large
// Models"): loraplus_unet_lr_ratio or loraplus_text_encoder_lr_ratio, else loraplus_lr_ratio.
#pragma once

#include <string>
#include <vector>

#include "common/config/job_config.h"

namespace lf {

// names[i] is the kohya key of parameter i ("lora_unet_..._to_q.lora_up.weight");
// text_encoder[i] says whether it belongs to a text encoder. Returns one lr per parameter.
// Throws std::invalid_argument when the sizes differ.
std::vector<double> lora_parameter_lrs(const JobConfig& config,
                                       const std::vector<std::string>& names,
                                       const std::vector<bool>& text_encoder);

}  // namespace lf
