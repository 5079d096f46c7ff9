// Resume checks and restore (see header).
#include "worker/train/resume_point.h"

#include <torch/torch.h>

#include <filesystem>
#include <map>

#include "common/config/job_config.h"
#include "common/config/optimizer_keys.h"
#include "common/util/log.h"
#include "worker/io/tensor_file.h"
#include "worker/train/rng_streams.h"

namespace fs = std::filesystem;

namespace lf {

void refuse_existing_checkpoints(const std::string& config_name, const std::string& output_dir) {
  const fs::path out_dir(output_dir);
  const fs::path root = out_dir / "checkpoints";
  if (!fs::is_directory(root)) return;
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.path().filename().string().rfind("step-", 0) == 0) {
      throw ConfigError(
          config_name + ": key 'output.output_dir': " + out_dir.string() +
          " already holds checkpoints (" + e.path().string() + "); pass --resume " +
          out_dir.string() +
          " to continue that run, or choose another output_dir (nothing was overwritten)");
    }
  }
}

std::vector<std::int64_t> batch_sizes_of(const JobConfig& config) {
  std::vector<std::int64_t> out;
  for (const DatasetConfig& d : config.datasets) out.push_back(d.batch_size);
  return out;
}

namespace {

// A config change, not a fault a restart cures: ConfigError (exit 3), so that supervisors stop
// retrying. A config whose optimizer keys are bad is left to build_lora_optimizer's message.
void refuse_other_optimizer(const ResumePoint& point, const JobConfig& config) {
  const auto [choice, error] = read_optimizer(config.training);
  const std::string saved = LoRAOptimizer::saved_type(point.state.optimizer);
  if (error || saved == choice.type) return;
  throw ConfigError(point.dir +
                    ": key 'training.optimizer_type': the checkpoint was trained with " + saved +
                    ", the job has " + choice.type +
                    " (an optimizer's state does not carry over to another; resume with " + saved +
                    " or start a new output_dir)");
}

}  // namespace

ResumePoint open_resume_point(const JobAssignment& job, const JobConfig& config) {
  ResumePoint point;
  point.dir = resolve_checkpoint(job.resume.checkpoint);
  point.state = load_train_state(point.dir);
  const TrainState& s = point.state;
  if (s.shared_seed != job.shared_seed) {
    throw std::runtime_error(point.dir + ": checkpoint was trained with seed " +
                             std::to_string(s.shared_seed) + ", the job has seed " +
                             std::to_string(job.shared_seed));
  }
  if (s.global_step != job.resume.global_step || s.epoch != job.resume.epoch ||
      s.step_in_epoch != job.resume.batches_in_epoch) {
    throw std::runtime_error(point.dir + ": the coordinator planned a resume at global_step " +
                             std::to_string(job.resume.global_step) + " but the checkpoint is "
                             "at global_step " + std::to_string(s.global_step) +
                             " (was it replaced meanwhile?)");
  }
  // Older checkpoints lack these (0 / empty): nothing to compare then.
  if (s.gradient_accumulation_steps != 0 &&
      s.gradient_accumulation_steps != config.training.gradient_accumulation_steps) {
    throw ConfigError(point.dir +
                      ": checkpoint was trained with "
                      "training.gradient_accumulation_steps " +
                      std::to_string(s.gradient_accumulation_steps) + ", the job has " +
                      std::to_string(config.training.gradient_accumulation_steps) +
                      " (changing it would regroup the epoch and change the schedule)");
  }
  if (!s.batch_sizes.empty() && s.batch_sizes != batch_sizes_of(config)) {
    auto list = [](const std::vector<std::int64_t>& v) {
      std::string out;
      for (std::int64_t x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
      return "[" + out + "]";
    };
    throw ConfigError(point.dir + ": checkpoint was trained with per-dataset batch sizes " +
                      list(s.batch_sizes) + ", the job has " + list(batch_sizes_of(config)) +
                      " (changing them would change the epoch plan)");
  }
  refuse_other_optimizer(point, config);
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
