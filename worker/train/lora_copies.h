// The LoRA files a run leaves next to its checkpoints, named and thinned out as kohya sd-scripts
// does (train_network.py with train_util.EPOCH_FILE_NAME / STEP_FILE_NAME, get_remove_epoch_no
// and get_remove_step_no): "<output_name>-000002.safetensors" after epoch 2 (save_every_n_epochs),
// "<output_name>-step00000100.safetensors" after step 100 (save_every_n_steps, a preemption or a
// --stop-at-step), "<output_name>.safetensors" at the end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/config/job_config.h"

namespace lf {

enum class SaveReason { kStep, kEpoch, kFinal };

// The file name (no directory) of the LoRA saved for `reason` after `global_step` / `epoch`
// (1-based, completed).
std::string lora_copy_name(const std::string& output_name, SaveReason reason,
                           std::int64_t global_step, int epoch);

// kohya's epoch period: save_n_epoch_ratio > 0 gives floor(num_epochs / ratio), at least 1;
// else save_every_n_epochs (0: no epoch saves).
int epoch_save_period(const TrainingSection& t, int num_epochs);

// The older LoRA file that kohya's retention removes once this one is written, or std::nullopt:
// after epoch e, the file of epoch e - period * save_last_n_epochs (when >= 1); after a step
// save at s, the one of step r - r % save_every_n_steps with r = s - save_last_n_steps - 1
// (when >= 1). Final saves remove nothing.
std::optional<std::string> lora_copy_to_remove(const TrainingSection& t,
                                               const std::string& output_name, SaveReason reason,
                                               std::int64_t global_step, int epoch,
                                               int epoch_period);

}  // namespace lf
