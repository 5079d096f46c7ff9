// kohya's per-part lrs and LoRA+ ratios (see header).
#include "worker/train/lora_param_lrs.h"

#include <stdexcept>

#include "common/config/kohya_blocks.h"
#include "worker/core/lora/lora_blocks.h"

namespace lf {
namespace {

// kohya prepare_optimizer_params: the network is SDXL's when a UNet module has ldm block names.
bool sdxl_names(const std::vector<std::string>& names, const std::vector<bool>& text_encoder) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (text_encoder[i]) continue;
    if (names[i].find("input_blocks") != std::string::npos ||
        names[i].find("output_blocks") != std::string::npos) {
      return true;
    }
  }
  return false;
}

// The block lr weight of UNet parameter `name` ("<lora_name>.lora_up.weight").
double block_weight(const std::vector<double>& weights, const std::string& name, bool sdxl) {
  const std::string module = name.substr(0, name.find('.'));
  const int b = kohya_block_index(module, sdxl);
  if (b < 0 || static_cast<std::size_t>(b) >= weights.size()) {
    throw std::invalid_argument("lora_parameter_lrs: " + module + " is in no kohya block");
  }
  return weights[static_cast<std::size_t>(b)];
}

}  // namespace

std::vector<double> lora_parameter_lrs(const JobConfig& config,
                                       const std::vector<std::string>& names,
                                       const std::vector<bool>& text_encoder) {
  if (names.size() != text_encoder.size()) {
    throw std::invalid_argument("lora_parameter_lrs: one text_encoder flag per name expected");
  }
  const NetworkSection& n = config.network;
  const double base = config.training.learning_rate;
  const double unet_lr = n.unet_lr.value_or(base);
  const double te_lr = n.text_encoder_lr.value_or(base);
  const std::optional<double> unet_ratio =
      n.loraplus_unet_lr_ratio ? n.loraplus_unet_lr_ratio : n.loraplus_lr_ratio;
  const std::optional<double> te_ratio =
      n.loraplus_text_encoder_lr_ratio ? n.loraplus_text_encoder_lr_ratio : n.loraplus_lr_ratio;
  const bool sdxl = sdxl_names(names, text_encoder);
  // kohya set_block_lr_weight: the UNet's lr of each block times its weight (empty: none).
  const std::vector<double> blocks = kohya_block_lr_weights(n, sdxl).weights;
  std::vector<double> lrs(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    const bool te = text_encoder[i];
    const std::optional<double>& ratio = te ? te_ratio : unet_ratio;
    const bool plus = ratio && names[i].find("lora_up") != std::string::npos;
    double lr = te ? te_lr : unet_lr;
    if (!te && !blocks.empty()) lr *= block_weight(blocks, names[i], sdxl);
    lrs[i] = lr * (plus ? *ratio : 1.0);
  }
  return lrs;
}

}  // namespace lf
