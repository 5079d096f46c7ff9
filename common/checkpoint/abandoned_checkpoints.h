// The checkpoints of an abandoned branch: after a group resumes an older checkpoint on request
// (--resume PATH), the newer checkpoints under <output_dir>/checkpoints belong to a training
// history that no longer continues. They are moved aside, never deleted, so that neither
// `--resume auto` nor output.keep_last_n_checkpoints pruning picks them up.
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace lf {

struct AbandonedCheckpoints {
  std::string folder;               // root/abandoned-<YYYYmmddHHMMSS>[-N]
  std::vector<std::int64_t> steps;  // the steps moved there, ascending
};

// Moves every step-* directory directly under `root` whose step is after `resumed_step`
// (complete or torn) into a new folder root/abandoned-<kohya_local_timestamp(now)>/, keeping
// their names ("-2", "-3"... is appended when that folder exists). Leftover staging dirs
// (.step-*.tmp) are left to the writer, which replaces them. Renames only, on the same
// filesystem: nothing is copied or removed. nullopt when no directory is newer or `root` does
// not exist. Throws std::runtime_error naming the directory and the reason when a rename fails
// (the ones moved before it stay in the folder).
std::optional<AbandonedCheckpoints> set_aside_abandoned_checkpoints(const std::string& root,
                                                                    std::int64_t resumed_step,
                                                                    std::time_t now);

}  // namespace lf
