// Committed checkpoints for coordinator tests, written the way the workers lay them out
// (common/checkpoint/checkpoint_layout.h): a train state carrying a position in its header, an
// empty LoRA file and the COMMITTED marker, last.
#pragma once

#include <filesystem>
#include <string>

#include "common/checkpoint/train_position.h"

namespace lf::test_support {

// A position at `global_step` of `epoch` after `step_in_epoch` batches served along `lineage`
// ("2:3,1:2"), with seed 1234, batch size 1 on one dataset, AdamW, plan_epoch = epoch and the
// placeholder plan digest "abc".
TrainPosition fake_position(int global_step, int epoch, int step_in_epoch, int world_size,
                            const std::string& lineage);

// Writes `dir` as a committed checkpoint of `position`.
void write_fake_checkpoint(const std::filesystem::path& dir, const TrainPosition& position);

}  // namespace lf::test_support
