// A VRAM budget for the frozen UNet, end to end: measure the activations with every block
// streamed (a caller-supplied probe runs one training forward and backward), plan the resident
// set within what is left (vram_plan.h) and keep the rest streaming (weight_streamer.h). Shared
// by the worker (worker.vram_budget_gb) and the training-step benchmark. CUDA devices only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "model/unet.h"
#include "offload/weight_streamer.h"

namespace lf {

struct UNetStreamingOptions {
  std::int64_t budget_bytes = 0;    // device memory the whole training may use
  std::int64_t reserved_bytes = 0;  // allocated later and not yet (LoRA grads, optimizer state)
  int streams = 2;
  at::ScalarType compute_dtype = at::kFloat;  // fp8_base weights are upcast to it
  at::Device device = at::Device(at::kCUDA, 0);
};

struct UNetStreamingReport {
  std::int64_t held_bytes = 0;         // allocated on the device with every block streamed
  std::int64_t activation_bytes = 0;   // measured by the probe, 10% margin included
  std::int64_t unet_block_bytes = 0;   // all blocks' weights
  std::int64_t resident_bytes = 0;     // the blocks kept resident
  std::int64_t stream_reserve_bytes = 0;
  std::size_t units = 0;
  std::size_t streamed = 0;
};

// Runs `probe` once with every checkpointable block of `unet` streamed (their checkpointing
// must be on), then plans with budget - held - reserved - activations for the blocks. Returns
// the streamer keeping the plan, or null when everything fits (the blocks are then all back on
// the device). Throws VramBudgetError whose minimum_bytes() is the smallest whole budget that
// would work, std::runtime_error for a device without CUDA support.
std::unique_ptr<WeightStreamer> stream_unet_within_budget(UNetModel& unet,
                                                          const UNetStreamingOptions& options,
                                                          const std::function<void()>& probe,
                                                          UNetStreamingReport* report);

}  // namespace lf
