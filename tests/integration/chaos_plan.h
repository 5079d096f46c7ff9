// The faults of a chaos run (chaos_run.h), drawn from a seed: the same seed, fault count and job
// size give the same faults on any platform (std::mt19937_64, whose output the standard fixes,
// and no std:: distribution, whose algorithms it leaves to the library), so a failing seed can
// be replayed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lf::test {

enum class FaultKind {
  kKillWorker,       // SIGKILL of one worker process (a crash, an OOM kill)
  kTerminateGroup,   // SIGTERM to every worker (a preemption: they checkpoint and exit 143)
  kKillCoordinator,  // SIGKILL of the coordinator, restarted on its SQLite state after down_ms
  kTornCheckpoint,   // the group frozen (SIGSTOP), its newest committed checkpoint torn, the
                     // group SIGKILLed: the restart must resume an older checkpoint
};
inline constexpr int kFaultKinds = 4;
// "kill_worker", "terminate_group", "kill_coordinator", "torn_checkpoint".
const char* fault_name(FaultKind kind);

// How a torn checkpoint is torn.
enum class TearKind {
  kTruncateLora,     // lora.safetensors cut to half its size
  kDeleteRankRng,    // rng/rank-<rank>.safetensors removed
  kDeleteCommitted,  // the COMMITTED marker removed (as if the writer died before it)
};
inline constexpr int kTearKinds = 3;
const char* tear_name(TearKind kind);  // "truncate_lora", "delete_rank_rng", "delete_committed"

struct PlannedFault {
  FaultKind kind = FaultKind::kKillWorker;
  // When: once the running group has trained global step `step`, `delay_ms` later (so it lands
  // anywhere in a step); or, `early`, `delay_ms` after the group's processes started (the job's
  // start, or the restart after the previous fault), while they load, register and form the
  // group, before they train (or, after a coordinator fault, while they reconnect); at the
  // latest when the group trains its next step.
  bool early = false;
  // Or, `late` (plan_faults with late = true: the last fault, a kill_worker or terminate_group,
  // half the time), `delay_ms` after the group trained the job's last step, while it writes the
  // final checkpoint and LoRA, reports and exits: whatever worker processes are left are
  // signalled.
  bool late = false;
  std::int64_t step = 0;
  int delay_ms = 0;
  int rank = 0;  // kKillWorker: the rank killed; kDeleteRankRng: the RNG file removed
  TearKind tear = TearKind::kTruncateLora;  // kTornCheckpoint
  int down_ms = 0;                          // kKillCoordinator: how long the coordinator stays down
};

// `faults` faults for a job of `steps` steps on `world_size` ranks that checkpoints every
// `save_every` steps. Steps are ascending, one drawn in each of `faults` equal slices of
// [save_every + 1, steps - 2 * save_every] (so a committed checkpoint exists to tear, and the
// job does not end before the last fault); one fault in 4 is early (drawn); with `late`, the last
// one is late half the time when it is a kill_worker or terminate_group; delays in
// [0, 800) ms, or [0, 5000) ms for early ones; down times in [0, 12000) ms (past the chaos
// job's 10 s collective_timeout, which bounds the wait of a checkpoint report). With 4 faults or
// more every kind occurs at least once. Throws std::invalid_argument when the job is too short
// for a fault window (steps < 3 * save_every + 1) or faults < 1.
std::vector<PlannedFault> plan_faults(std::uint64_t seed, int faults, std::int64_t steps,
                                      int save_every, int world_size, bool late = false);

// One line, e.g. "kill_worker rank 2 at step 57 +312 ms", "terminate_group early +2210 ms" or
// "kill_worker rank 0 late +75 ms".
std::string describe(const PlannedFault& fault);

}  // namespace lf::test
