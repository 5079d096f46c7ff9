// Probe, plan, stream (see header).
#include "offload/unet_streaming.h"

#include <algorithm>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "device/cuda_info.h"
#include "model/lora_compatible.h"
#include "offload/vram_plan.h"

namespace lf {
namespace {

// The planner's view of the units: stored bytes, and the compute-dtype copies of the matrices
// stored in another dtype (fp8_base), which each layer upcasts. A LoRA adds no temporary here:
// it runs beside the frozen weight (up(down(x))), never merged into it.
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
      if (auto* l = m->as<LoRACompatibleLinearImpl>()) w = &l->weight();
      if (auto* c = m->as<LoRACompatibleConvImpl>()) w = &c->weight();
      if (w && w->scalar_type() != compute_dtype) b.temporary_bytes += w->numel() * compute_size;
    }
    blocks.push_back(b);
  }
  return blocks;
}

}  // namespace

std::unique_ptr<WeightStreamer> stream_unet_within_budget(UNetModel& unet,
                                                          const UNetStreamingOptions& o,
                                                          const std::function<void()>& probe,
                                                          UNetStreamingReport* report) {
  if (!o.device.is_cuda()) {
    throw std::runtime_error("a VRAM budget streams weights to a CUDA device, not " +
                             o.device.str());
  }
  const int index = o.device.index();
  std::vector<WeightStreamer::Unit> units = streamable_units(*unet);
  const std::vector<OffloadBlock> blocks = offload_blocks(units, o.compute_dtype);
  UNetStreamingReport r;
  r.units = units.size();
  std::int64_t largest = 0;
  for (const OffloadBlock& b : blocks) {
    largest = std::max(largest, offload_cost(b));
    r.unet_block_bytes += b.bytes;
  }
  {
    WeightStreamer all(units, std::vector<bool>(units.size(), false), o.device, o.streams);
    r.held_bytes = cuda_memory_stats(index).allocated_bytes;
    reset_cuda_peak_memory(index);
    probe();
    const std::int64_t peak = cuda_memory_stats(index).peak_allocated_bytes;
    const std::int64_t buffers = (o.streams + 1) * largest;
    r.activation_bytes = std::max<std::int64_t>(0, peak - r.held_bytes - buffers) * 11 / 10;
  }
  const std::int64_t outside = r.held_bytes + o.reserved_bytes + r.activation_bytes;
  VramPlan plan;
  try {
    // offload_streams units in flight plus the one the compute stream may still be finishing
    // (WeightStreamer::fetch), so the host never waits on the unit it is about to launch.
    plan = plan_vram(blocks, std::max<std::int64_t>(0, o.budget_bytes - outside), o.streams + 1);
  } catch (const VramBudgetError& e) {
    throw VramBudgetError(e.what(), outside + e.minimum_bytes());
  }
  // The streamer above left every block in host memory: the resident ones come back.
  for (std::size_t i = 0; i < units.size(); ++i) {
    if (plan.resident[i]) units[i].module->to(o.device);
  }
  r.resident_bytes = plan.resident_bytes;
  r.stream_reserve_bytes = plan.stream_reserve_bytes;
  r.streamed = plan.num_offloaded();
  if (report) *report = r;
  if (r.streamed == 0) return nullptr;
  return std::make_unique<WeightStreamer>(units, plan.resident, o.device, o.streams);
}

}  // namespace lf
