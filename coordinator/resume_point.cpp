// Checkpoint resolution for the coordinator (see header), on top of the torch-free checkpoint
// layout (common/checkpoint/checkpoint_layout.h): only COMMITTED checkpoints count, torn ones
// are skipped with a warning naming the reason, and the position is read from the train state's
// header metadata.
#include "coordinator/resume_point.h"

#include <filesystem>
#include <stdexcept>

#include "common/checkpoint/checkpoint_layout.h"

namespace fs = std::filesystem;

namespace lf {

CheckpointPosition read_checkpoint_position(const std::string& dir) {
  CheckpointPosition p;
  static_cast<TrainPosition&>(p) = read_train_position(dir);
  p.dir = fs::absolute(dir).lexically_normal().string();
  if (p.world_size < 1 || p.global_step < 0 || p.epoch < 0 || p.step_in_epoch < 0) {
    throw std::runtime_error(dir +
                             "/train_state.safetensors: train state position is out of "
                             "range (world_size " +
                             std::to_string(p.world_size) + ", global_step " +
                             std::to_string(p.global_step) + ", epoch " + std::to_string(p.epoch) +
                             ", step_in_epoch " + std::to_string(p.step_in_epoch) + ")");
  }
  return p;
}

std::optional<CheckpointPosition> resolve_resume_request(const std::string& request,
                                                         const std::string& output_dir) {
  if (request.empty()) return std::nullopt;
  if (request == "auto") {
    const auto newest = find_latest_committed((fs::path(output_dir) / "checkpoints").string());
    if (!newest) return std::nullopt;
    return read_checkpoint_position(newest->dir);
  }
  return read_checkpoint_position(resolve_checkpoint(request));
}

}  // namespace lf
