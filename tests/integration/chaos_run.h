// A chaos run (issue 14): the tiny job on `world_size` env-mode ranks under lorafleet-launch,
// once uninterrupted (the reference) and once meeting the faults that plan_faults draws from a
// seed (chaos_plan.h): SIGKILL of a worker, SIGTERM of the whole group, SIGKILL of the
// coordinator and its restart, a torn newest checkpoint. Each fault is injected once the running
// group has trained its step, logged (kind, step, time, target pids) as it happens, and the run
// waits for the group (or the coordinator) to be back before the next one. The final LoRA must
// be byte-identical to the reference's. Every wait has a deadline; on any failure every process
// of the run is killed. Shared by integration_test_chaos (short, in CI) and
// lorafleet-bench-chaos (bench/run_chaos.sh, long).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "tests/integration/chaos_plan.h"

namespace lf::test {

struct ChaosPrograms {
  std::string coordinator;      // lorafleet-coordinator
  std::string worker;           // lorafleet-worker
  std::string launch;           // lorafleet-launch
  std::string make_checkpoint;  // lorafleet-make-checkpoint
};

struct ChaosOptions {
  std::uint64_t seed = 1;
  int faults = 4;
  std::int64_t steps = 40;  // max_train_steps
  int save_every = 4;       // training.save_every_n_steps
  int world_size = 3;
  // Let the last fault come late (after the job's last step). Off by default: a worker killed
  // between its Finish and its exit, once the coordinator has ended with the job, makes
  // lorafleet-launch restart a group that cannot register (exit 75); see bench/README.md.
  bool late_faults = false;
  std::string work_dir;  // scratch, removed first: job/, reference/, chaos/ and the logs
  std::string demo_dir;  // .deps/demo (scripts/prepare_demo_data.sh)
  std::string vocab;     // .deps/bpe_simple_vocab_16e6.txt.gz
  ChaosPrograms programs;
  std::chrono::seconds time_limit{600};  // both runs together
  std::chrono::seconds wait_limit{120};  // any one wait: a step, a restart, a coordinator start
};

struct InjectedFault {
  PlannedFault planned;
  std::int64_t seen_step = 0;  // the newest step the group had printed at the fault's step
  double at_seconds = 0.0;     // since the chaos run's start
  std::vector<pid_t> targets;  // the processes signalled (workers by rank, or the coordinator)
  std::string detail;          // what was torn, how the group came back
  // kTornCheckpoint: the step of the checkpoint torn (-1: none was committed yet), and the one
  // the restarted group resumed (-1: it started afresh, or the next fault came before it
  // resumed); else both -1.
  std::int64_t torn_step = -1;
  std::int64_t resumed_step = -1;
  // Injection -> the (restarted) group's next step; -1 when the next fault is early.
  double recovery_seconds = -1.0;
};

struct ChaosResult {
  // "" when both runs ran to their end (whatever their exit codes); else what failed first (a
  // deadline, a process that exited early), with the logs' tails. The processes are gone.
  std::string error;
  std::vector<InjectedFault> injected;
  int reference_exit = -1;    // the reference's lorafleet-launch
  int launcher_exit = -1;     // the chaos run's lorafleet-launch
  int coordinator_exit = -1;  // the chaos run's last coordinator
  int coordinator_starts = 0;
  // The launcher's "restarted N ranks" lines, and G of the last coordinator's "all N ranks of
  // generation G finished" (-1 when the line is missing).
  int launcher_restarts = -1;
  int final_generation = -1;
  std::string reference_lora;  // <output_dir>/e2e.safetensors of each run
  std::string chaos_lora;
  bool lora_identical = false;  // both exist, are not empty and are equal byte for byte
  double reference_seconds = 0.0;
  double chaos_seconds = 0.0;
};

// Runs the reference and then the chaos job, logging the plan and each fault to `log` as it
// happens (one "[chaos] ..." line each). An early fault (PlannedFault::early) is injected while
// the group that the previous fault restarted is still starting, a late one while the group
// ends the job. Never throws for a failure of the
// job: see ChaosResult::error.
ChaosResult run_chaos(const ChaosOptions& options, std::ostream& log);

// What a run must show, one line per expectation it misses ("" none): no error, every fault
// injected, both launchers and the last coordinator exit 0, one group restart per worker fault
// (kill_worker, terminate_group, torn_checkpoint) and generation 1 + that many (less the early
// ones that came before their group formed and a late one that came after the job's end), every
// torn checkpoint skipped by the resume, and the LoRA byte-identical to the reference's.
std::vector<std::string> chaos_failures(const ChaosOptions& options, const ChaosResult& result);

// A one-line summary: seed, faults by kind, times, restarts, verdict.
std::string chaos_summary(const ChaosOptions& options, const ChaosResult& result);

}  // namespace lf::test
