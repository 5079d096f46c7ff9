// kohya's names and retention of the LoRA files saved during training (see header).
#include "worker/train/lora_copies.h"

#include <algorithm>
#include <cstdio>

namespace lf {

std::string lora_copy_name(const std::string& output_name, SaveReason reason,
                           std::int64_t global_step, int epoch) {
  char suffix[32];
  switch (reason) {
    case SaveReason::kFinal: return output_name + ".safetensors";
    case SaveReason::kEpoch: std::snprintf(suffix, sizeof(suffix), "-%06d", epoch); break;
    case SaveReason::kStep:
      std::snprintf(suffix, sizeof(suffix), "-step%08lld", static_cast<long long>(global_step));
      break;
  }
  return output_name + suffix + ".safetensors";
}

int epoch_save_period(const TrainingSection& t, int num_epochs) {
  if (t.save_n_epoch_ratio > 0) return std::max(1, num_epochs / t.save_n_epoch_ratio);
  return t.save_every_n_epochs;
}

std::optional<std::string> lora_copy_to_remove(const TrainingSection& t,
                                               const std::string& output_name, SaveReason reason,
                                               std::int64_t global_step, int epoch,
                                               int epoch_period) {
  if (reason == SaveReason::kEpoch && t.save_last_n_epochs > 0) {
    const int remove = epoch - epoch_period * t.save_last_n_epochs;
    if (remove >= 1) return lora_copy_name(output_name, SaveReason::kEpoch, 0, remove);
  }
  if (reason == SaveReason::kStep && t.save_last_n_steps > 0 && t.save_every_n_steps > 0) {
    std::int64_t remove = global_step - t.save_last_n_steps - 1;
    remove -= remove % t.save_every_n_steps;
    if (remove >= 1) return lora_copy_name(output_name, SaveReason::kStep, remove, 0);
  }
  return std::nullopt;
}

}  // namespace lf
