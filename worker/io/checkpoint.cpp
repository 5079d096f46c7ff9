// Train-state and RNG files of a checkpoint (see header). The state is a safetensors file:
// optimizer tensors by name, and the position fields as __metadata__ strings, whose encoding
// lives in common/checkpoint/checkpoint_layout.cpp so the coordinator can read it without torch.
#include "worker/io/checkpoint.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <stdexcept>

#include "worker/io/tensor_file.h"

namespace fs = std::filesystem;

namespace lf {

FileDigest save_train_state(const std::string& dir, const TrainState& s) {
  return save_safetensors((fs::path(dir) / kCheckpointStateFile).string(), s.optimizer,
                          train_position_metadata(s));
}

TrainState load_train_state(const std::string& dir) {
  const std::string file = (fs::path(dir) / kCheckpointStateFile).string();
  // Stored dtypes kept: optimizer scalars (Prodigy's d, schedule-free's weight sums) are float64.
  LoadedTensors loaded = load_safetensors(file, /*use_mmap=*/false, kKeepStoredDtype);
  TrainState s;
  static_cast<TrainPosition&>(s) = parse_train_position(loaded.metadata, file);
  for (auto& [k, v] : loaded.tensors) s.optimizer.emplace(k, v);
  return s;
}

std::string rng_state_file(int rank) { return "rng/rank-" + std::to_string(rank) + ".safetensors"; }

FileDigest save_rng_state(const std::string& dir, int rank, const at::Tensor& state) {
  fs::create_directories(fs::path(dir) / "rng");
  return save_safetensors((fs::path(dir) / rng_state_file(rank)).string(), {{"rng_state", state}},
                          {{"rank", std::to_string(rank)}});
}

std::optional<at::Tensor> load_rng_state(const std::string& dir, int rank) {
  const fs::path file = fs::path(dir) / rng_state_file(rank);
  if (!fs::exists(file)) return std::nullopt;
  LoadedTensors loaded = load_safetensors(file.string(), false);
  auto it = loaded.tensors.find("rng_state");
  if (it == loaded.tensors.end()) {
    throw std::runtime_error(file.string() +
                             ": no 'rng_state' tensor (expected the rank's "
                             "generator state)");
  }
  return it->second;
}

}  // namespace lf
