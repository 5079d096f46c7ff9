// lorafleet-make-checkpoint (see worker/make_checkpoint_main.cpp).
#pragma once

namespace lf {

// --architecture tiny|sd15 --seed N --output PATH. Writes atomically; refuses to overwrite an
// existing file unless --force. Returns the exit code.
int run_make_checkpoint(int argc, char** argv);

}  // namespace lf
