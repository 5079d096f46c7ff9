// The resident-set planner (see header).
#include "offload/vram_plan.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace lf {
namespace {

std::string gib(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f GiB", static_cast<double>(bytes) / (1 << 30));
  return buf;
}

}  // namespace

std::size_t VramPlan::num_offloaded() const {
  return static_cast<std::size_t>(std::count(resident.begin(), resident.end(), false));
}

VramPlan plan_vram(const std::vector<OffloadBlock>& blocks, std::int64_t budget_bytes,
                   int streams) {
  if (streams < 1) throw std::invalid_argument("plan_vram: streams must be >= 1");
  for (const OffloadBlock& b : blocks) {
    if (b.bytes < 0 || b.temporary_bytes < 0) {
      throw std::invalid_argument("plan_vram: block " + b.name + " has a negative size");
    }
  }
  const std::size_t n = blocks.size();
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return offload_cost(blocks[a]) > offload_cost(blocks[b]);
  });
  VramPlan best;
  best.resident.assign(n, true);
  std::int64_t total = 0;
  for (const OffloadBlock& b : blocks) total += b.bytes;
  if (total <= budget_bytes) {
    best.resident_bytes = total;
    return best;
  }
  const std::int64_t minimum = n == 0 ? 0 : streams * offload_cost(blocks[order[0]]);
  if (budget_bytes < minimum) {
    throw VramBudgetError("the VRAM budget of " + gib(budget_bytes) + " for the UNet's blocks "
                          "is below the " + gib(minimum) + " that streaming needs (" +
                          std::to_string(streams) + " x the largest block, " +
                          blocks[order[0]].name + ")",
                          minimum);
  }
  bool found = false;
  std::int64_t prefix = 0;  // bytes of the blocks costing more than the k-th
  for (std::size_t k = 0; k < n; ++k) {
    const std::int64_t reserve = streams * offload_cost(blocks[order[k]]);
    if (prefix + reserve <= budget_bytes) {
      VramPlan plan;
      plan.resident.assign(n, false);
      plan.stream_reserve_bytes = reserve;
      plan.resident_bytes = prefix;
      for (std::size_t i = 0; i < k; ++i) plan.resident[order[i]] = true;
      for (std::size_t i = k + 1; i < n; ++i) {
        const OffloadBlock& b = blocks[order[i]];
        if (plan.resident_bytes + b.bytes + reserve <= budget_bytes) {
          plan.resident[order[i]] = true;
          plan.resident_bytes += b.bytes;
        }
      }
      if (!found || plan.resident_bytes > best.resident_bytes) best = plan;
      found = true;
    }
    prefix += blocks[order[k]].bytes;
  }
  return best;  // found: k = 0 fits, since budget >= minimum
}

}  // namespace lf
