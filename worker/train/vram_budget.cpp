// The VRAM budget of a training session (see header).
#include "worker/train/vram_budget.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/util/log.h"
#include "worker/core/model/unet.h"
#include "worker/core/offload/unet_streaming.h"
#include "worker/core/offload/vram_plan.h"
#include "worker/core/train/autocast.h"
#include "worker/train/token_windows.h"

namespace lf {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / kGiB);
  return buf;
}

struct ProbeShape {
  std::int64_t batch = 1;
  std::int64_t latent_h = 8;
  std::int64_t latent_w = 8;
  std::string describe() const {
    return std::to_string(latent_w * 8) + "x" + std::to_string(latent_h * 8) + " batch " +
           std::to_string(batch);
  }
};

// The largest step: the biggest bucket (latents are 1/8 of it) at the largest batch.
ProbeShape largest_step(const Dataset& dataset) {
  ProbeShape s;
  for (const DatasetInfo& d : dataset.datasets) {
    s.batch = std::max<std::int64_t>(s.batch, d.batch_size);
  }
  for (const ImageRecord& r : dataset.images) {
    const std::int64_t w = r.bucket.bucket.width, h = r.bucket.bucket.height;
    if (w * h > s.latent_w * s.latent_h * 64) {
      s.latent_h = h / 8;
      s.latent_w = w / 8;
    }
  }
  return s;
}

// One forward and backward of the step shape on zero inputs (no random draws), under the
// training's autocast; the LoRA gradients it leaves are dropped.
void probe_step(const VramBudgetInputs& in, const ProbeShape& s) {
  const ModelPreset& preset = in.models.preset;
  const auto opts = torch::TensorOptions().device(in.device).dtype(in.precision.weight_dtype);
  torch::Tensor loss;
  {
    AutocastScope amp(in.device.type(), in.precision.weight_dtype, in.precision.autocast);
    torch::Tensor context;
    if (in.trained_encoders) {
      context = in.trained_encoders
                    ->encode(std::vector<std::string>(static_cast<std::size_t>(s.batch), "a photo"),
                             in.device)
                    .context;
    } else {
      const std::int64_t length = context_length(in.config.training.max_token_length);
      context = torch::zeros({s.batch, length, preset.unet.context_dim}, opts);
    }
    torch::Tensor y;
    if (preset.unet.adm_in_channels > 0) {
      y = torch::zeros({s.batch, preset.unet.adm_in_channels}, opts);
    }
    torch::Tensor x = torch::zeros({s.batch, preset.unet.in_channels, s.latent_h, s.latent_w}, opts);
    torch::Tensor t = torch::full({s.batch}, 999, torch::dtype(torch::kInt64).device(in.device));
    loss = in.models.unet->forward(x, t, context, y).to(torch::kFloat32).square().mean();
  }
  loss.backward();
  for (const auto& p : in.lora.parameters()) p.mutable_grad().reset();
}

}  // namespace

std::unique_ptr<WeightStreamer> apply_vram_budget(const VramBudgetInputs& in) {
  const double budget = in.config.worker.vram_budget_gb * kGiB;
  if (budget <= 0) return nullptr;
  const ProbeShape shape = largest_step(in.dataset);
  UNetStreamingOptions o;
  o.budget_bytes = static_cast<std::int64_t>(budget);
  // The LoRA's gradients and AdamW's two float32 moments arrive with the first step; a half
  // LoRA (full_fp16 / full_bf16) is stepped through float32 copies of itself and its gradients.
  const auto n = static_cast<std::int64_t>(in.lora.num_parameters());
  const auto lora_element = static_cast<std::int64_t>(c10::elementSize(in.precision.lora_dtype));
  o.reserved_bytes = n * lora_element + n * 8 + (lora_element < 4 ? n * 8 : 0);
  o.streams = in.config.worker.offload_streams;
  o.compute_dtype = in.precision.weight_dtype;
  o.device = in.device;
  UNetStreamingReport r;
  std::unique_ptr<WeightStreamer> streamer;
  try {
    streamer = stream_unet_within_budget(in.models.unet, o, [&] { probe_step(in, shape); }, &r);
  } catch (const VramBudgetError& e) {
    throw ConfigError(in.config.source_name + ": key 'worker.vram_budget_gb': expected at least " +
                      gib(static_cast<double>(e.minimum_bytes())) + " for this training (" +
                      e.what() + "; activations measured at " + shape.describe() + "), got " +
                      gib(budget));
  }
  if (in.rank == 0) {
    LF_INFO("vram budget " << gib(budget) << ": " << r.units - r.streamed << " of " << r.units
                           << " UNet blocks resident (" << gib(r.resident_bytes) << " of "
                           << gib(r.unet_block_bytes) << "), " << r.streamed << " streamed with "
                           << o.streams + 1 << " buffers (" << gib(r.stream_reserve_bytes) << "); "
                           << gib(r.held_bytes) << " held beside them, activations "
                           << gib(r.activation_bytes) << " measured at " << shape.describe());
  }
  return streamer;
}

}  // namespace lf
