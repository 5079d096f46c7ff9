// lorafleet-launch: the supervisor for runs without a cluster scheduler (torchrun's role). It
// starts the group, and when any member fails it stops the rest and starts the group again from
// the last committed checkpoint (the workers get LF_RESUME=auto), with exponential backoff. The
// job has one restart budget: the coordinator's cluster.max_restarts, which it enforces by
// refusing the next generation (the workers then exit 3 and the launcher stops), unless the
// launcher is given --max-restarts N: then it stops after N failures itself and hands N to the
// workers (LF_MAX_RESTARTS), which give it to the coordinator as the budget. Two forms:
//   lorafleet-launch --nproc N -- lorafleet-worker ARGS   N local ranks, Kubernetes-native style
//                                                         (LF_RANK / LF_WORLD_SIZE, Gloo)
//   lorafleet-launch -- mpirun -np N lorafleet-worker ARGS  restarts the whole mpirun command
// The restarted members get LF_RESTART_COUNT and LF_RESTART_CAUSE: "preemption" after a
// preemption, which the coordinator then does not count either, else the failure ("rank 1 killed
// by signal 9 (Killed)").
// Exit codes of members: 143 (preempted) restarts without counting against max_restarts;
// 3 (bad input) and 4 (cancelled by an operator) stop at once; anything else, or death by a
// signal, is a failure that restarts. SIGTERM to the launcher is forwarded (the members commit a
// checkpoint and exit 143; the launcher exits 143). SIGINT (Ctrl-C) is forwarded as SIGINT, an
// operator's stop: the members commit a checkpoint, write the LoRA and exit 0, and so does the
// launcher.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lf {

struct LaunchOptions {
  int nproc = 0;                      // 0: run `command` once as is (e.g. mpirun); N: N ranks
  std::vector<std::string> command;   // program and arguments
  // Failures tolerated; unset: the coordinator's cluster.max_restarts decides.
  std::optional<int> max_restarts;
  double backoff_seconds = 2.0;       // before restart k: backoff * 2^(k-1) ...
  double backoff_max_seconds = 60.0;  // ... capped at this
  double stop_grace_seconds = 30.0;   // SIGTERM → SIGKILL for the members of a failed group
};

// Backoff before restart k (1-based), in seconds.
double restart_backoff(const LaunchOptions& options, int k);

// Runs the group until it succeeds, fails permanently, or restarts run out. Returns the exit
// code: 0 success, 143 stopped by a signal, 3 bad input, else the failing member's code (1 when
// it died by a signal). Logs every start, failure, restart and its cause.
int run_launcher(const LaunchOptions& options);

// The CLI (thin main: worker/launch_main.cpp).
int launcher_main(int argc, char** argv);

}  // namespace lf
