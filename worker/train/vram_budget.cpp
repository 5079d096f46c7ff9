// The VRAM budget: probe, plan, stream (see header).
#include "worker/train/vram_budget.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/util/log.h"
#include "worker/core/device/cuda_info.h"
#include "worker/core/model/lora_compatible.h"
#include "worker/core/model/unet.h"
#include "worker/core/offload/vram_plan.h"
#include "worker/core/train/autocast.h"

namespace lf {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / kGiB);
  return buf;
}

// The planner's view of the units: stored bytes and the LoRA'd weights' compute-dtype size.
std::vector<OffloadBlock> offload_blocks(const std::vector<WeightStreamer::Unit>& units,
                                         at::ScalarType compute_dtype) {
  std::vector<OffloadBlock> blocks;
  const auto compute_size = static_cast<std::int64_t>(c10::elementSize(compute_dtype));
  for (const auto& u : units) {
    OffloadBlock b;
    b.name = u.name;
    for (const auto& p : u.module->parameters()) b.bytes += p.nbytes();
    for (const auto& m : u.module->modules(/*include_self=*/true)) {
      const torch::Tensor* w = nullptr;
      if (auto* l = m->as<LoRACompatibleLinearImpl>(); l && l->adapter()) w = &l->weight();
      if (auto* c = m->as<LoRACompatibleConvImpl>(); c && c->adapter()) w = &c->weight();
      if (w) b.lora_weight_bytes += w->numel() * compute_size;
    }
    blocks.push_back(b);
  }
  return blocks;
}

// One forward and backward of the training's largest step shape on zero inputs.
void probe_step(const VramBudgetInputs& in, std::int64_t batch, std::int64_t lat_h,
                std::int64_t lat_w) {
  const ModelPreset& preset = in.models.preset;
  const auto opts = torch::TensorOptions().device(in.device).dtype(in.precision.weight_dtype);
  torch::Tensor loss;
  {
    AutocastScope amp(in.device.type(), in.precision.weight_dtype, in.precision.autocast);
    torch::Tensor context;
    if (in.trained_encoders) {
      context = in.trained_encoders
                    ->encode(std::vector<std::string>(static_cast<std::size_t>(batch), "a photo"),
                             in.device)
                    .context;
    } else {
      context = torch::zeros({batch, 77, preset.unet.context_dim}, opts);
    }
    torch::Tensor y;
    if (preset.unet.adm_in_channels > 0) {
      y = torch::zeros({batch, preset.unet.adm_in_channels}, opts);
    }
    torch::Tensor x = torch::zeros({batch, preset.unet.in_channels, lat_h, lat_w}, opts);
    torch::Tensor t = torch::full({batch}, 999, torch::dtype(torch::kInt64).device(in.device));
    loss = in.models.unet->forward(x, t, context, y).to(torch::kFloat32).square().mean();
  }
  loss.backward();
  for (const auto& p : in.lora.parameters()) p.mutable_grad().reset();
}

}  // namespace

std::unique_ptr<WeightStreamer> apply_vram_budget(const VramBudgetInputs& in) {
  const double budget = in.config.worker.vram_budget_gb * kGiB;
  if (budget <= 0) return nullptr;
  if (!in.device.is_cuda()) {
    throw std::runtime_error("worker.vram_budget_gb: weight streaming needs a CUDA device");
  }
  const int index = in.device.index();
  const int streams = in.config.worker.offload_streams;
  std::vector<WeightStreamer::Unit> units = streamable_units(*in.models.unet);
  const std::vector<OffloadBlock> blocks = offload_blocks(units, in.precision.weight_dtype);
  std::int64_t largest = 0, unet_block_bytes = 0;
  for (const OffloadBlock& b : blocks) {
    largest = std::max(largest, offload_cost(b));
    unet_block_bytes += b.bytes;
  }
  // The largest step: the biggest bucket (latents are 1/8 of it) at the largest batch.
  std::int64_t batch = 1, lat_h = 8, lat_w = 8;
  for (const DatasetInfo& d : in.dataset.datasets) batch = std::max<std::int64_t>(batch, d.batch_size);
  for (const ImageRecord& r : in.dataset.images) {
    if (static_cast<std::int64_t>(r.bucket.bucket.width) * r.bucket.bucket.height >
        lat_h * lat_w * 64) {
      lat_h = r.bucket.bucket.height / 8;
      lat_w = r.bucket.bucket.width / 8;
    }
  }
  // Probe with everything streamed: what is allocated then is what the plan cannot change.
  double activations = 0, fixed = 0;
  {
    WeightStreamer all(units, std::vector<bool>(units.size(), false), in.device, streams);
    fixed = static_cast<double>(cuda_memory_stats(index).allocated_bytes);
    reset_cuda_peak_memory(index);
    probe_step(in, batch, lat_h, lat_w);
    const double peak = static_cast<double>(cuda_memory_stats(index).peak_allocated_bytes);
    activations = std::max(0.0, peak - fixed - static_cast<double>(streams * largest)) * 1.1;
  }
  // The optimizer's state (AdamW: two moments) and the gradients come at the first step.
  const double lora_state = 3.0 * static_cast<double>(in.lora.num_parameters()) *
                            static_cast<double>(c10::elementSize(in.precision.lora_dtype));
  const double for_blocks = budget - fixed - lora_state - activations;
  VramPlan plan;
  try {
    plan = plan_vram(blocks, static_cast<std::int64_t>(std::max(0.0, for_blocks)), streams);
  } catch (const VramBudgetError& e) {
    const double minimum = fixed + lora_state + activations + static_cast<double>(e.minimum_bytes());
    throw ConfigError(in.config.source_name + ": key 'worker.vram_budget_gb': expected at least " +
                      gib(minimum) + " for this training (" + gib(fixed) + " held already, " +
                      gib(lora_state) + " LoRA gradients and optimizer state, " +
                      gib(activations) + " activations measured at " + std::to_string(lat_w * 8) +
                      "x" + std::to_string(lat_h * 8) + " batch " + std::to_string(batch) +
                      ", " + gib(static_cast<double>(e.minimum_bytes())) + " to stream the UNet "
                      "with worker.offload_streams " + std::to_string(streams) + "), got " +
                      gib(budget));
  }
  for (std::size_t i = 0; i < units.size(); ++i) {
    if (plan.resident[i]) units[i].module->to(in.device);
  }
  if (in.rank == 0) {
    LF_INFO("vram budget " << gib(budget) << ": " << units.size() - plan.num_offloaded()
                           << " of " << units.size() << " UNet blocks resident ("
                           << gib(static_cast<double>(plan.resident_bytes)) << " of "
                           << gib(static_cast<double>(unet_block_bytes)) << "), "
                           << plan.num_offloaded() << " streamed with " << streams
                           << " buffers (" << gib(static_cast<double>(plan.stream_reserve_bytes))
                           << "); activations " << gib(activations) << " measured at "
                           << lat_w * 8 << "x" << lat_h * 8 << " batch " << batch);
  }
  if (plan.num_offloaded() == 0) return nullptr;
  return std::make_unique<WeightStreamer>(units, plan.resident, in.device, streams);
}

}  // namespace lf
