// lorafleet-make-checkpoint (see worker/make_checkpoint_main.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace lf {

// --preset NAME --seed S --output PATH [--dtype fp32|fp16|bf16] [--keys-only] [--force].
// Writes the complete single-file checkpoint of the preset's family (make_random_checkpoint)
// atomically; --keys-only writes sorted "key<TAB>d0,d1,..." lines instead of weights (built in
// bf16 one part at a time, never the whole model). "--architecture" is the old spelling of
// --preset. Refuses to overwrite an existing file unless --force. Returns the exit code.
int run_make_checkpoint(int argc, char** argv);

// The __metadata__ the tool writes: format "pt", lorafleet.architecture (the preset name),
// lorafleet.family and lorafleet.seed. Part of the file's bytes, so the oracle tests share it.
std::map<std::string, std::string> random_checkpoint_metadata(const std::string& preset_name,
                                                              uint64_t seed);

}  // namespace lf
