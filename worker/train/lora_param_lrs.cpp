// kohya's per-part lrs and LoRA+ ratios (see header).
#include "worker/train/lora_param_lrs.h"

#include <stdexcept>

namespace lf {

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
  std::vector<double> lrs(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    const bool te = text_encoder[i];
    const std::optional<double>& ratio = te ? te_ratio : unet_ratio;
    const bool plus = ratio && names[i].find("lora_up") != std::string::npos;
    lrs[i] = (te ? te_lr : unet_lr) * (plus ? *ratio : 1.0);
  }
  return lrs;
}

}  // namespace lf
