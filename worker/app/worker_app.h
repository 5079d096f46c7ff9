// lorafleet-worker: one rank of a training job, launched by mpirun. Parses the command line,
// joins MPI and the coordinator, runs the training loop, and reports the outcome.
#pragma once

namespace lf {

// Returns the process exit code (0 on success, 1 on any error, with a one-line message that
// names the file, key or address on stderr).
int run_worker(int argc, char** argv);

}  // namespace lf
