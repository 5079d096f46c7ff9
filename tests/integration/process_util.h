// Helpers shared by the multi-process integration tests: run a shell command and capture its
// output, pick a free loopback port, read a file, find the newest checkpoint directory.
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

}  // namespace lf::test
