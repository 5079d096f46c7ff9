// Checkpoint resolution for the coordinator (see header), on top of the torch-free checkpoint
// layout (common/checkpoint/checkpoint_layout.h): only COMMITTED checkpoints count, torn ones
// are skipped with a warning naming the reason, and the position is read from the train state's
// header metadata.
#include "coordinator/resume_point.h"

#include <filesystem>

#include "common/checkpoint/checkpoint_layout.h"

namespace fs = std::filesystem;

namespace lf {

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
