// worker.vram_budget_gb on a CUDA device (worker/core/offload/unet_streaming.h): what the frozen
// UNet may keep resident beside everything else the training holds, the rest streamed. The
// activations are measured, not guessed: one probe step (forward and backward of the UNet, and
// of the text encoders while they train, on zero inputs of the largest bucket and batch) runs
// with every UNet block streamed. The probe draws no random numbers and leaves no gradient.
#pragma once

#include <memory>

#include <c10/core/Device.h>

#include "common/config/job_config.h"
#include "common/data/dataset.h"
#include "worker/core/lora/lora_network.h"
#include "worker/core/model/sd_models.h"
#include "worker/core/offload/weight_streamer.h"
#include "worker/core/train/precision.h"
#include "worker/train/text_encoder_stack.h"

namespace lf {

struct VramBudgetInputs {
  const JobConfig& config;
  const Precision& precision;
  SDModels& models;
  LoRANetwork& lora;
  TextEncoderStack* trained_encoders;  // null unless the text encoders' LoRA trains
  const Dataset& dataset;
  at::Device device;
  int rank = 0;
};

// Returns the streamer that keeps the plan (null when worker.vram_budget_gb is 0 or the whole
// UNet fits). Throws ConfigError naming worker.vram_budget_gb and the minimum it needs when no
// plan fits, std::runtime_error for a non-CUDA device.
std::unique_ptr<WeightStreamer> apply_vram_budget(const VramBudgetInputs& in);

}  // namespace lf
