// Streaming of the non-resident UNet blocks (see header).
#include "offload/weight_streamer.h"

#include <algorithm>
#include <stdexcept>

#include <torch/torch.h>

namespace lf {

std::vector<WeightStreamer::Unit> streamable_units(torch::nn::Module& model) {
  std::vector<WeightStreamer::Unit> units;
  for (const auto& item : model.named_modules()) {
    if (auto* block = dynamic_cast<CheckpointableBlock*>(item.value().get())) {
      units.push_back({item.key(), item.value().get(), block});
    }
  }
  return units;
}

WeightStreamer::WeightStreamer(std::vector<Unit> units, const std::vector<bool>& resident,
                               at::Device device, int streams)
    : units_(std::move(units)),
      slots_(units_.size()),
      device_(device),
      streams_(streams),
      engine_(make_transfer_engine(device)) {
  if (resident.size() != units_.size() || streams < 1) {
    throw std::invalid_argument("WeightStreamer: " + std::to_string(resident.size()) +
                                " plan entries for " + std::to_string(units_.size()) +
                                " units, streams " + std::to_string(streams));
  }
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < units_.size(); ++i) {
    if (resident[i]) continue;
    if (!units_[i].block->gradient_checkpointing()) {
      throw std::invalid_argument("WeightStreamer: " + units_[i].name +
                                  " does not checkpoint; a streamed block must");
    }
    Slot& s = slots_[i];
    s.streamed = true;
    s.params = units_[i].module->parameters();
    for (at::Tensor& p : s.params) {
      s.host.push_back(engine_->host_copy(p));
      s.bytes += static_cast<std::int64_t>(p.nbytes());
      p.set_data(s.host.back());
    }
    auto hooks = std::make_shared<CheckpointHooks>();
    hooks->begin = [this, i](bool recompute) { begin(i, recompute); };
    hooks->end = [this, i](bool) { end(i); };
    units_[i].block->set_checkpoint_hooks(std::move(hooks));
  }
  engine_->release_cached_memory();
}

WeightStreamer::~WeightStreamer() {
  for (std::size_t i = 0; i < units_.size(); ++i) {
    if (slots_[i].streamed) units_[i].block->set_checkpoint_hooks(nullptr);
  }
}

std::size_t WeightStreamer::num_streamed() const {
  std::size_t n = 0;
  for (const Slot& s : slots_) n += s.streamed;
  return n;
}

void WeightStreamer::fetch(std::size_t unit) {
  Slot& s = slots_[unit];
  if (s.on_device) return;
  // At most `streams` + 1 units' copies on the device: those in flight and one the compute stream
  // may still be reading after its end() (the unit before the running one). Waiting for that one
  // too would block the host before it queues the running unit's kernels, and idle the device.
  engine_->wait_for_released(static_cast<std::size_t>(std::max(0, streams_ - in_flight_)));
  s.pending = engine_->start(s.host, &s.device_copy);
  s.on_device = true;
  bytes_copied_ += s.bytes;
  max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
}

void WeightStreamer::prefetch_after(std::size_t unit, bool backward) {
  for (std::size_t k = unit; in_flight_ < streams_;) {
    if (backward ? k == 0 : k + 1 >= units_.size()) return;
    k = backward ? k - 1 : k + 1;
    if (slots_[k].streamed) fetch(k);
  }
}

void WeightStreamer::begin(std::size_t unit, bool recompute) {
  if (recompute != backward_) {
    // A new pass in the other direction: prefetches made for the old one that no block used
    // (backward prefetches the first block, which it never recomputes) give way.
    for (std::size_t k = 0; k < slots_.size(); ++k) {
      if (k != unit && slots_[k].on_device) end(k);
    }
    backward_ = recompute;
  }
  Slot& s = slots_[unit];
  fetch(unit);
  engine_->wait(s.pending, s.device_copy);
  s.pending.reset();
  torch::NoGradGuard no_grad;
  for (std::size_t j = 0; j < s.params.size(); ++j) s.params[j].set_data(s.device_copy[j]);
  // The forward runs the units in order, the backward recomputes them in reverse.
  prefetch_after(unit, /*backward=*/recompute);
}

void WeightStreamer::end(std::size_t unit) {
  Slot& s = slots_[unit];
  torch::NoGradGuard no_grad;
  for (std::size_t j = 0; j < s.params.size(); ++j) s.params[j].set_data(s.host[j]);
  engine_->released();
  s.device_copy.clear();
  s.pending.reset();
  s.on_device = false;
  --in_flight_;
}

}  // namespace lf
