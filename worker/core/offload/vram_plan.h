// Which blocks of the frozen UNet stay on the device under worker.vram_budget_gb, and which are
// streamed from host memory ahead of their use. Plain C++ (no LibTorch), after ComfyUI's
// accounting for weight offloading: blocks are ordered by offload cost, which for a block whose
// weights need temporaries while it runs is more than its size (lorafleet: the compute-dtype
// copies of fp8_base matrices; ComfyUI: LoRA patches merged into a weight), and VRAM for the
// buffers of `streams` blocks in flight is reserved before anything is made resident, so the
// largest offloaded block's buffers always fit.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace lf {

// One streamable unit of the UNet (a checkpointed ResBlock or transformer block).
struct OffloadBlock {
  std::string name;                  // e.g. "input_blocks.4.1.transformer_blocks.0"
  std::int64_t bytes = 0;            // its frozen weights as stored (the streamed copy)
  // Device memory its weights need beyond their stored size while it runs and is recomputed:
  // the compute-dtype copies of weights stored in another dtype (fp8_base upcasts each matrix,
  // and the backward keeps the copies until the block's gradients are done).
  std::int64_t temporary_bytes = 0;
};

// What offloading `block` costs on the device while it runs: its copy plus its temporaries.
inline std::int64_t offload_cost(const OffloadBlock& block) {
  return block.bytes + block.temporary_bytes;
}

struct VramPlan {
  std::vector<bool> resident;          // per input block: stays on the device
  std::int64_t resident_bytes = 0;     // sum of the resident blocks' bytes
  std::int64_t stream_reserve_bytes = 0;  // streams x the largest offloaded block's cost
  std::size_t num_offloaded() const;
};

// Thrown when not even streaming every block fits: minimum_bytes = streams x the largest cost.
class VramBudgetError : public std::invalid_argument {
 public:
  VramBudgetError(const std::string& what, std::int64_t minimum_bytes)
      : std::invalid_argument(what), minimum_bytes_(minimum_bytes) {}
  std::int64_t minimum_bytes() const { return minimum_bytes_; }

 private:
  std::int64_t minimum_bytes_;
};

// Chooses the resident set for `budget_bytes` (the device memory the blocks may take: resident
// weights plus stream buffers) and `streams` >= 1 blocks in flight. Blocks are taken in order of
// decreasing offload cost (ties: the earlier block first): for the largest offloaded block k,
// every block costing more stays resident, `streams` x cost(k) is reserved, and the cheaper
// blocks are made resident while they fit; the k that keeps the most bytes resident wins, and
// with everything fitting nothing is streamed. Throws VramBudgetError naming the minimum when
// budget_bytes < streams x the largest cost, std::invalid_argument for streams < 1 or negative
// sizes.
VramPlan plan_vram(const std::vector<OffloadBlock>& blocks, std::int64_t budget_bytes,
                   int streams);

}  // namespace lf
