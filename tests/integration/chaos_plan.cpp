// The seeded fault plan (see header).
#include "tests/integration/chaos_plan.h"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <utility>

namespace lf::test {
namespace {

// A draw in [0, n): the raw generator modulo n (its bias is irrelevant here, and unlike
// std::uniform_int_distribution it is the same with every standard library).
std::int64_t draw(std::mt19937_64& rng, std::int64_t n) {
  return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n));
}

// The fault kinds in order: one of each (when there are at least as many faults as kinds), the
// rest drawn, all shuffled (Fisher-Yates with draw()).
std::vector<FaultKind> draw_kinds(std::mt19937_64& rng, int faults) {
  std::vector<FaultKind> kinds;
  for (int k = 0; k < kFaultKinds && faults >= kFaultKinds; ++k) {
    kinds.push_back(static_cast<FaultKind>(k));
  }
  while (static_cast<int>(kinds.size()) < faults) {
    kinds.push_back(static_cast<FaultKind>(draw(rng, kFaultKinds)));
  }
  for (std::size_t i = kinds.size(); i > 1; --i) {
    std::swap(kinds[i - 1],
              kinds[static_cast<std::size_t>(draw(rng, static_cast<std::int64_t>(i)))]);
  }
  return kinds;
}

}  // namespace

const char* fault_name(FaultKind kind) {
  switch (kind) {
    case FaultKind::kKillWorker: return "kill_worker";
    case FaultKind::kTerminateGroup: return "terminate_group";
    case FaultKind::kKillCoordinator: return "kill_coordinator";
    case FaultKind::kTornCheckpoint: return "torn_checkpoint";
  }
  return "?";
}

const char* tear_name(TearKind kind) {
  switch (kind) {
    case TearKind::kTruncateLora: return "truncate_lora";
    case TearKind::kDeleteRankRng: return "delete_rank_rng";
    case TearKind::kDeleteCommitted: return "delete_committed";
  }
  return "?";
}

std::vector<PlannedFault> plan_faults(std::uint64_t seed, int faults, std::int64_t steps,
                                      int save_every, int world_size, bool late) {
  const std::int64_t first = save_every + 1;
  const std::int64_t last = steps - 2 * static_cast<std::int64_t>(save_every);
  if (faults < 1 || last < first || save_every < 1 || world_size < 1) {
    throw std::invalid_argument(
        "plan_faults: need faults >= 1 and steps >= 3 * save_every + 1, got " +
        std::to_string(faults) + " faults, " + std::to_string(steps) + " steps, save_every " +
        std::to_string(save_every));
  }
  std::mt19937_64 rng(seed);
  const std::vector<FaultKind> kinds = draw_kinds(rng, faults);
  std::vector<PlannedFault> plan;
  const std::int64_t span = last - first + 1;
  for (int i = 0; i < faults; ++i) {
    PlannedFault f;
    f.kind = kinds[static_cast<std::size_t>(i)];
    // Slice i of the window: [first + span*i/faults, first + span*(i+1)/faults), never empty.
    const std::int64_t lo = first + span * i / faults;
    const std::int64_t hi = std::max(lo + 1, first + span * (i + 1) / faults);
    f.step = lo + draw(rng, hi - lo);
    f.early = draw(rng, 4) == 0;
    if (late && i + 1 == faults &&
        (f.kind == FaultKind::kKillWorker || f.kind == FaultKind::kTerminateGroup)) {
      f.late = draw(rng, 2) == 0;
      f.early = f.early && !f.late;
    }
    f.delay_ms = static_cast<int>(draw(rng, f.early ? 5000 : 800));
    f.rank = static_cast<int>(draw(rng, world_size));
    f.tear = static_cast<TearKind>(draw(rng, kTearKinds));
    f.down_ms = static_cast<int>(draw(rng, 12000));
    plan.push_back(f);
  }
  return plan;
}

std::string describe(const PlannedFault& f) {
  std::string s = fault_name(f.kind);
  if (f.kind == FaultKind::kKillWorker) s += " rank " + std::to_string(f.rank);
  if (f.kind == FaultKind::kKillCoordinator) s += " down " + std::to_string(f.down_ms) + " ms";
  if (f.kind == FaultKind::kTornCheckpoint) {
    s += std::string(" ") + tear_name(f.tear);
    if (f.tear == TearKind::kDeleteRankRng) s += " rank " + std::to_string(f.rank);
  }
  return s +
         (f.early  ? " early"
          : f.late ? " late"
                   : " at step " + std::to_string(f.step)) +
         " +" + std::to_string(f.delay_ms) + " ms";
}

}  // namespace lf::test
