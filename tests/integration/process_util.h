// Helpers shared by the multi-process integration tests: run a shell command and capture its
// output, pick a free loopback port, read a file, find the newest checkpoint directory, build an
// mpirun prefix, and lay out a small demo dataset with a tiny base checkpoint.
#pragma once

#include <string>

namespace lf::test {

struct RunResult {
  int exit_code = -1;  // the command's exit status; 128 when it died by a signal
  std::string output;  // stdout + stderr
};

// Runs `cmd` through /bin/sh and waits for it.
RunResult run(const std::string& cmd);
// A TCP port that was free on 127.0.0.1 a moment ago.
int free_port();
// The whole file ("" when it cannot be read).
std::string read_file(const std::string& path);
// Name of the newest step-* directory under root ("" when none).
std::string newest_checkpoint(const std::string& root);
// Name of the newest step-* directory under root that holds a COMMITTED marker ("" when none).
std::string newest_committed_checkpoint(const std::string& root);
// `mpirun -np <np>` with oversubscription, no core binding, and --allow-run-as-root under root.
std::string mpirun(int np);
// Copies the demo's astronaut, chelsea and coffee photos + captions into <dir>/train/2_photo.
void copy_demo_photos(const std::string& demo_dir, const std::string& dir);
// Copies the demo's camera.png and coins.png regularisation photos into <dir>/reg/1_grey.
void copy_demo_reg_photos(const std::string& demo_dir, const std::string& dir);
// Runs `make_checkpoint_bin` to write a tiny-architecture base checkpoint (seed 7) at `path`.
RunResult make_tiny_checkpoint(const std::string& make_checkpoint_bin, const std::string& path);

}  // namespace lf::test
