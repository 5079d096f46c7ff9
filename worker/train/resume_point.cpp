// Resume checks and restore (see header).
#include "worker/train/resume_point.h"

#include <torch/torch.h>

#include <map>

#include "common/util/log.h"
#include "worker/io/tensor_file.h"
#include "worker/train/rng_streams.h"

namespace lf {

ResumePoint open_resume_point(const CheckpointPosition& assigned) {
  ResumePoint point;
  point.dir = assigned.dir;
  point.state = load_train_state(point.dir);
  if (static_cast<const TrainPosition&>(point.state) != assigned) {
    throw std::runtime_error(point.dir +
                             ": the train state is not the one the coordinator "
                             "planned the resume from (it planned global_step " +
                             std::to_string(assigned.global_step) + ", the file holds " +
                             std::to_string(point.state.global_step) +
                             "); was the checkpoint replaced meanwhile?");
  }
  return point;
}

TrainState apply_resume_point(ResumePoint point, const JobAssignment& job, int rank,
                              LoRANetwork& lora, LoRAOptimizer& optimizer,
                              const std::vector<std::string>& param_names) {
  const std::string& dir = point.dir;
  TrainState& state = point.state;
  LoadedTensors weights = load_safetensors(dir + "/lora.safetensors");
  lora.load_state_dict(
      std::map<std::string, at::Tensor>(weights.tensors.begin(), weights.tensors.end()));
  optimizer.load_state_dict(state.optimizer, param_names);
  state.optimizer.clear();
  // The noise stream is a pure function of (seed, rank, step); the saved generator state must
  // equal it, else the checkpoint came from a different stream layout.
  if (auto saved = load_rng_state(dir, rank)) {
    auto expect = make_noise_generator(job.shared_seed, rank, state.global_step);
    if (!torch::equal(saved->to(at::kByte), expect.get_state())) {
      throw std::runtime_error(dir + ": RNG state of rank " + std::to_string(rank) +
                               " does not match this version's noise stream");
    }
  }
  if (rank == 0) {
    LF_INFO("resumed from " << dir << " at global_step " << state.global_step << ", epoch "
                            << state.epoch + 1 << ", batch " << state.step_in_epoch);
  }
  return state;
}

}  // namespace lf
