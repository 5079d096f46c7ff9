// The chaos run, short version for CI (issue 14; the long one is bench/run_chaos.sh): the tiny
// job on 3 env-mode ranks under lorafleet-launch meets faults of every kind drawn from a seed
// (SIGKILL of a worker, SIGTERM of the group, SIGKILL + restart of the coordinator, a torn
// newest checkpoint) and must end exactly as an uninterrupted run: both exit 0, one group
// restart per worker fault, every torn checkpoint skipped, the same LoRA bytes. The faults are
// logged as they happen; LF_CHAOS_SEED=N replays a seed (default 6).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>

#include "tests/integration/chaos_run.h"

namespace fs = std::filesystem;

namespace {

using lf::test::ChaosOptions;
using lf::test::ChaosResult;
using lf::test::FaultKind;
using lf::test::plan_faults;
using lf::test::PlannedFault;

bool same(const PlannedFault& a, const PlannedFault& b) {
  return a.kind == b.kind && a.step == b.step && a.delay_ms == b.delay_ms && a.rank == b.rank &&
         a.tear == b.tear && a.down_ms == b.down_ms;
}

TEST(ChaosPlan, TheSeedFixesTheFaultsAndEveryKindOccurs) {
  const auto a = plan_faults(7, 20, 300, 5, 3);
  const auto b = plan_faults(7, 20, 300, 5, 3);
  const auto c = plan_faults(8, 20, 300, 5, 3);
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(c.size(), 20u);
  std::set<FaultKind> kinds;
  bool differs = false;
  int early = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(same(a[i], b[i])) << "fault " << i;
    differs = differs || !same(a[i], c[i]);
    kinds.insert(a[i].kind);
    // One step in each of 20 slices of [6, 290], ascending.
    EXPECT_GE(a[i].step, 6 + (285 * static_cast<std::int64_t>(i)) / 20) << i;
    EXPECT_LT(a[i].step, 6 + (285 * static_cast<std::int64_t>(i + 1)) / 20) << i;
    EXPECT_LT(a[i].delay_ms, a[i].early ? 5000 : 800);
    early += a[i].early ? 1 : 0;
    EXPECT_LT(a[i].rank, 3);
    EXPECT_LT(a[i].down_ms, 12000);
  }
  EXPECT_TRUE(differs) << "seeds 7 and 8 drew the same faults";
  EXPECT_EQ(kinds.size(), 4u);
  EXPECT_GT(early, 0);  // one in 4 is drawn early: 20 steady ones have odds of 0.3 %
  EXPECT_LT(early, 20);
  // Only the last fault may be late, only when asked, and only a worker's kill or the group's
  // SIGTERM (a torn checkpoint or a coordinator restart after the job's end is not what the run
  // checks).
  int late = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    for (const PlannedFault& f : plan_faults(seed, 5, 36, 4, 3)) EXPECT_FALSE(f.late);
    const auto plan = plan_faults(seed, 5, 36, 4, 3, /*late=*/true);
    for (std::size_t i = 0; i < plan.size(); ++i) {
      if (!plan[i].late) continue;
      ++late;
      EXPECT_EQ(i, plan.size() - 1) << "seed " << seed;
      EXPECT_TRUE(plan[i].kind == FaultKind::kKillWorker ||
                  plan[i].kind == FaultKind::kTerminateGroup)
          << "seed " << seed;
      EXPECT_FALSE(plan[i].early) << "seed " << seed;
    }
  }
  EXPECT_GT(late, 0);
  // Even the shortest plan with four faults has every kind.
  std::set<FaultKind> four;
  for (const PlannedFault& f : plan_faults(3, 4, 14, 4, 3)) four.insert(f.kind);
  EXPECT_EQ(four.size(), 4u);
  // A one-step window (13 = 3 x 4 + 1 steps: step 5), and none (12 steps).
  for (const PlannedFault& f : plan_faults(1, 3, 13, 4, 3)) EXPECT_EQ(f.step, 5);
  EXPECT_THROW(plan_faults(1, 1, 12, 4, 3), std::invalid_argument);
  EXPECT_THROW(plan_faults(1, 0, 300, 5, 3), std::invalid_argument);
}

TEST(Chaos, ShortRunWithEveryFaultKindEndsWithTheUninterruptedLoRA) {
  const char* seed = std::getenv("LF_CHAOS_SEED");
  ChaosOptions o;
  // Seed 6 draws every kind and three early faults, one a coordinator restart while the group
  // first registers.
  o.seed = seed != nullptr ? std::strtoull(seed, nullptr, 10) : 6;
  o.faults = 5;
  o.steps = 36;
  o.save_every = 4;
  o.world_size = 3;
  o.work_dir = (fs::temp_directory_path() / ("lf_chaos_" + std::to_string(getpid()))).string();
  o.demo_dir = std::string(LF_SOURCE_DIR) + "/.deps/demo";
  o.vocab = std::string(LF_SOURCE_DIR) + "/.deps/bpe_simple_vocab_16e6.txt.gz";
  o.programs = {LF_COORDINATOR_BIN, LF_WORKER_BIN, LF_LAUNCH_BIN, LF_MAKE_CHECKPOINT_BIN};
  o.time_limit = std::chrono::seconds(270);
  o.wait_limit = std::chrono::seconds(90);
  std::cout << "[chaos] replay: LF_CHAOS_SEED=" << o.seed << " ctest -R integration_test_chaos"
            << std::endl;

  const ChaosResult r = lf::test::run_chaos(o, std::cout);
  std::cout << lf::test::chaos_summary(o, r) << std::endl;
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.injected.size(), 5u);
  std::set<FaultKind> kinds;
  for (const auto& f : r.injected) kinds.insert(f.planned.kind);
  EXPECT_EQ(kinds.size(), 4u) << "every kind of fault, at least once";
  EXPECT_TRUE(r.lora_identical) << r.chaos_lora << " vs " << r.reference_lora;
  std::string failures;
  for (const std::string& f : lf::test::chaos_failures(o, r)) failures += "\n  " + f;
  EXPECT_EQ(failures, "");
  if (!HasFailure()) fs::remove_all(o.work_dir);
}

}  // namespace
