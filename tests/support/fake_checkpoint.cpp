// Fake committed checkpoints (see header).
#include "tests/support/fake_checkpoint.h"

#include "common/checkpoint/checkpoint_layout.h"
#include "common/io/safetensors.h"

namespace lf::test_support {

TrainPosition fake_position(int global_step, int epoch, int step_in_epoch, int world_size,
                            const std::string& lineage) {
  TrainPosition p;
  p.global_step = global_step;
  p.epoch = epoch;
  p.step_in_epoch = step_in_epoch;
  p.samples_in_epoch = 7;
  p.shared_seed = 1234;
  p.world_size = world_size;
  p.session_id = 11;
  p.training_started_at = 1700000000;
  p.batch_sizes = {1};
  p.optimizer_type = "AdamW";
  p.plan_epoch = epoch;
  p.plan_digest = "abc";
  p.plan_lineage = parse_plan_lineage(lineage);
  return p;
}

void write_fake_checkpoint(const std::filesystem::path& dir, const TrainPosition& position) {
  std::filesystem::create_directories(dir);
  SafetensorsWriter state;
  state.set_metadata(train_position_metadata(position));
  state.write_atomic((dir / kCheckpointStateFile).string());
  SafetensorsWriter lora;
  lora.write_atomic((dir / kCheckpointLoraFile).string());
  write_commit_marker(dir.string(), position.global_step);  // last, as the workers do
}

}  // namespace lf::test_support
