// SIGTERM handling for preemptible nodes and Kubernetes pod eviction, and SIGINT (Ctrl-C) as an
// operator's stop. The signal only sets a flag (async-signal-safe); the training loop folds the
// flag into the step's gradient allreduce, so all ranks see the stop at the same step, commit
// one checkpoint and exit with kExitPreempted (SIGTERM) or 0 (SIGINT). A watcher thread enforces
// preempt_grace_seconds: whatever is still running at the deadline (a step longer than the grace, a
// slow disk) is abandoned with exit 143, and the previous committed checkpoint stands (checkpoints
// are committed atomically, so a SIGTERM or the deadline during a save never leaves a half-written
// one).
#pragma once

#include <chrono>

#include "common/util/exit_codes.h"

namespace lf {


class Preemption {
 public:
  // Installs SIGTERM and SIGINT handlers and starts the watcher. grace: seconds from the signal
  // to the forced exit. Call once, early in main.
  static void install(std::chrono::seconds grace);
  // Changes the grace (the job config's cluster.preempt_grace_seconds arrives after startup).
  static void set_grace(std::chrono::seconds grace);
  // True once SIGTERM arrived (a preemption: checkpoint, exit 143).
  static bool requested();
  // True once SIGINT (Ctrl-C) arrived: an operator's stop (checkpoint, LoRA, exit 0), as
  // `lorafleet-ctl stop`. A second SIGINT exits at once with 143; the last committed
  // checkpoint stands.
  static bool interrupted();
  // From the first training step on, a signal waits for the group's checkpoint (up to the
  // grace); before it (registering, loading, caching) there is nothing new to save, and the
  // process exits 143 at once.
  static void set_checkpointable();
  // Seconds since the signal (0 when none).
  static double seconds_since_request();
};

}  // namespace lf
