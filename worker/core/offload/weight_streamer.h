// Weight streaming for worker.vram_budget_gb: the frozen weights of the UNet blocks the planner
// (vram_plan.h) did not keep resident live in host memory and come onto the device only while
// their block runs, through the block's gradient-checkpoint hooks: in the forward (run without
// a graph) and again in backward, when the block is recomputed. The next blocks in run order
// are prefetched while the current one computes (the reverse order in backward), with at most
// `streams` blocks on the device at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>

#include "model/gradient_checkpoint.h"
#include "offload/transfer_engine.h"

namespace lf {

class WeightStreamer {
 public:
  struct Unit {
    std::string name;
    torch::nn::Module* module = nullptr;     // its parameters are the streamed weights
    CheckpointableBlock* block = nullptr;    // gets the hooks (its checkpointing must be on)
  };

  // `units` in forward order, resident[i] from the plan. Moves every non-resident unit's
  // parameters to host memory and hooks it. Throws std::invalid_argument when the sizes differ
  // or a streamed unit does not checkpoint, std::runtime_error without CUDA support for a CUDA
  // device.
  WeightStreamer(std::vector<Unit> units, const std::vector<bool>& resident, at::Device device,
                 int streams);
  // Removes the hooks (the streamed weights stay in host memory).
  ~WeightStreamer();
  WeightStreamer(const WeightStreamer&) = delete;
  WeightStreamer& operator=(const WeightStreamer&) = delete;

  std::size_t num_streamed() const;
  std::int64_t bytes_copied() const { return bytes_copied_; }  // host -> device so far
  int max_in_flight() const { return max_in_flight_; }         // units on the device at once

 private:
  struct Slot {
    bool streamed = false;
    std::vector<at::Tensor> params;       // the module's parameters (their data is swapped)
    std::vector<at::Tensor> host;         // where the weights live between uses
    std::vector<at::Tensor> device_copy;  // while on the device
    std::shared_ptr<void> pending;        // a prefetch not yet waited for
    bool on_device = false;               // device_copy holds the weights (maybe pending)
    std::int64_t bytes = 0;
  };
  void begin(std::size_t unit, bool recompute);
  void end(std::size_t unit);
  void fetch(std::size_t unit);  // starts the copy unless already there
  void prefetch_after(std::size_t unit, bool backward);

  std::vector<Unit> units_;
  std::vector<Slot> slots_;
  at::Device device_;
  int streams_;
  std::unique_ptr<TransferEngine> engine_;
  bool backward_ = false;  // the direction of the pass running now
  int in_flight_ = 0;
  int max_in_flight_ = 0;
  std::int64_t bytes_copied_ = 0;
};

// Every CheckpointableBlock of `model` (the UNet: its ResBlocks and transformer blocks) as a
// streaming unit named by its module path, in forward order.
std::vector<WeightStreamer::Unit> streamable_units(torch::nn::Module& model);

}  // namespace lf
