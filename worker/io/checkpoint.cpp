// Checkpoint directory layout and the train-state file (see header). The state is a safetensors
// file: optimizer tensors by name, and the scalar position fields as __metadata__ strings.
#include "worker/io/checkpoint.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/io/atomic_file.h"
#include "common/util/log.h"
#include "worker/io/tensor_file.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

constexpr const char* kStateFile = "train_state.safetensors";
constexpr const char* kStatePrefix = "lorafleet.state.";
constexpr int kStateVersion = 1;

bool is_complete_checkpoint(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.rfind("step-", 0) == 0 && fs::is_directory(p) && fs::exists(p / kStateFile) &&
         fs::exists(p / "lora.safetensors");
}

std::int64_t meta_int(const std::map<std::string, std::string>& m, const std::string& key,
                      const std::string& file) {
  auto it = m.find(kStatePrefix + key);
  if (it == m.end()) throw std::runtime_error(file + ": train state lacks '" + key + "'");
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    throw std::runtime_error(file + ": train state '" + key + "' is not an integer: " + it->second);
  }
}

}  // namespace

std::string checkpoint_dir_name(std::int64_t global_step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%08lld", static_cast<long long>(global_step));
  return buf;
}

std::string resolve_checkpoint(const std::string& path) {
  const fs::path p(path);
  if (!fs::exists(p)) throw std::runtime_error("--resume " + path + ": no such directory");
  if (fs::exists(p / kStateFile)) return fs::absolute(p).string();
  std::vector<fs::path> found;
  for (const fs::path& root : {p, p / "checkpoints"}) {
    if (!fs::is_directory(root)) continue;
    for (const auto& e : fs::directory_iterator(root)) {
      const std::string name = e.path().filename().string();
      if (is_complete_checkpoint(e.path())) {
        found.push_back(e.path());
      } else if (name.rfind(".step-", 0) == 0) {
        LF_WARN("skipping incomplete checkpoint " << e.path().string());
      }
    }
  }
  if (found.empty()) {
    throw std::runtime_error("--resume " + path +
                             ": no complete checkpoint (expected a step-XXXXXXXX directory "
                             "holding " + std::string(kStateFile) + ")");
  }
  std::sort(found.begin(), found.end());  // zero-padded names sort by step
  return fs::absolute(found.back()).string();
}

namespace {

std::string join_ints(const std::vector<std::int64_t>& values) {
  std::string out;
  for (std::int64_t v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

// A comma-separated list of integers under kStatePrefix + key; empty when absent (checkpoints
// written before the key existed). Throws std::runtime_error naming the file when malformed.
std::vector<std::int64_t> optional_ints(const std::map<std::string, std::string>& meta,
                                        const std::string& key, const std::string& file) {
  std::vector<std::int64_t> out;
  auto it = meta.find(std::string(kStatePrefix) + key);
  if (it == meta.end() || it->second.empty()) return out;
  std::stringstream list(it->second);
  for (std::string item; std::getline(list, item, ',');) {
    try {
      out.push_back(std::stoll(item));
    } catch (const std::exception&) {
      throw std::runtime_error(file + ": " + key + " '" + it->second +
                               "' is not a comma-separated list of integers");
    }
  }
  return out;
}

}  // namespace

void save_train_state(const std::string& dir, const TrainState& s) {
  std::map<std::string, std::string> meta;
  auto put = [&](const std::string& k, const std::string& v) { meta[kStatePrefix + k] = v; };
  put("version", std::to_string(kStateVersion));
  put("global_step", std::to_string(s.global_step));
  put("epoch", std::to_string(s.epoch));
  put("step_in_epoch", std::to_string(s.step_in_epoch));
  put("samples_in_epoch", std::to_string(s.samples_in_epoch));
  put("shared_seed", std::to_string(s.shared_seed));
  put("world_size", std::to_string(s.world_size));
  put("session_id", std::to_string(s.session_id));
  put("reg_cursor", join_ints(s.reg_cursor));
  put("gradient_accumulation_steps", std::to_string(s.gradient_accumulation_steps));
  put("batch_sizes", join_ints(s.batch_sizes));
  put("plan_epoch", std::to_string(s.plan_epoch));
  put("plan_digest", s.plan_digest);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", s.training_started_at);
  put("training_started_at", buf);
  save_safetensors((fs::path(dir) / kStateFile).string(), s.optimizer, meta);
}

TrainState load_train_state(const std::string& dir) {
  const std::string file = (fs::path(dir) / kStateFile).string();
  LoadedTensors loaded = load_safetensors(file, /*use_mmap=*/false);
  const auto& m = loaded.metadata;
  TrainState s;
  const auto version = meta_int(m, "version", file);
  if (version != kStateVersion) {
    throw std::runtime_error(file + ": train state version " + std::to_string(version) +
                             " is not supported (expected " + std::to_string(kStateVersion) + ")");
  }
  s.global_step = meta_int(m, "global_step", file);
  s.epoch = static_cast<int>(meta_int(m, "epoch", file));
  s.step_in_epoch = meta_int(m, "step_in_epoch", file);
  s.samples_in_epoch = meta_int(m, "samples_in_epoch", file);
  s.shared_seed =
      static_cast<std::uint64_t>(std::stoull(m.at(std::string(kStatePrefix) + "shared_seed")));
  s.world_size = static_cast<int>(meta_int(m, "world_size", file));
  s.session_id = meta_int(m, "session_id", file);
  s.training_started_at = std::stod(m.at(std::string(kStatePrefix) + "training_started_at"));
  s.reg_cursor = optional_ints(m, "reg_cursor", file);
  s.batch_sizes = optional_ints(m, "batch_sizes", file);
  const std::vector<std::int64_t> accum = optional_ints(m, "gradient_accumulation_steps", file);
  s.gradient_accumulation_steps = accum.empty() ? 0 : static_cast<int>(accum[0]);
  const std::vector<std::int64_t> plan_epoch = optional_ints(m, "plan_epoch", file);
  s.plan_epoch = plan_epoch.empty() ? -1 : static_cast<int>(plan_epoch[0]);
  auto digest = m.find(std::string(kStatePrefix) + "plan_digest");
  if (digest != m.end()) s.plan_digest = digest->second;
  for (auto& [k, v] : loaded.tensors) s.optimizer.emplace(k, v);
  return s;
}

void save_rng_state(const std::string& dir, int rank, const at::Tensor& state) {
  const fs::path rng_dir = fs::path(dir) / "rng";
  fs::create_directories(rng_dir);
  save_safetensors((rng_dir / ("rank-" + std::to_string(rank) + ".safetensors")).string(),
                   {{"rng_state", state}}, {{"rank", std::to_string(rank)}});
}

std::optional<at::Tensor> load_rng_state(const std::string& dir, int rank) {
  const fs::path file = fs::path(dir) / "rng" / ("rank-" + std::to_string(rank) + ".safetensors");
  if (!fs::exists(file)) return std::nullopt;
  LoadedTensors loaded = load_safetensors(file.string(), false);
  auto it = loaded.tensors.find("rng_state");
  if (it == loaded.tensors.end()) throw std::runtime_error(file.string() + ": no 'rng_state'");
  return it->second;
}

std::string staging_dir_path(const std::string& root, std::int64_t global_step) {
  return (fs::path(root) / ("." + checkpoint_dir_name(global_step) + ".tmp")).string();
}

std::string prepare_staging_dir(const std::string& root, std::int64_t global_step) {
  const fs::path staging = staging_dir_path(root, global_step);
  fs::remove_all(staging);  // a torn earlier attempt at the same step
  fs::create_directories(staging / "rng");
  return staging.string();
}

std::string publish_staging_dir(const std::string& staging, const std::string& root,
                                std::int64_t global_step) {
  const fs::path target = fs::path(root) / checkpoint_dir_name(global_step);
  fsync_directory((fs::path(staging) / "rng").string());
  fsync_directory(staging);
  if (fs::exists(target)) {
    // Re-running the same step (e.g. after a crash right after publishing): keep the old one
    // until the new one is in place.
    const fs::path old = fs::path(root) / ("." + checkpoint_dir_name(global_step) + ".old");
    fs::remove_all(old);
    rename_atomic(target.string(), old.string());
    rename_atomic(staging, target.string());
    fs::remove_all(old);
  } else {
    rename_atomic(staging, target.string());
  }
  fsync_directory(root);
  return target.string();
}

void prune_checkpoints(const std::string& root, int keep) {
  if (keep <= 0 || !fs::is_directory(root)) return;
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(root)) {
    if (is_complete_checkpoint(e.path())) found.push_back(e.path());
  }
  std::sort(found.begin(), found.end());
  for (std::size_t i = 0; i + keep < found.size(); ++i) {
    LF_INFO("removing old checkpoint " << found[i].string() << " (keep_last_n_checkpoints "
                                       << keep << ")");
    fs::remove_all(found[i]);
  }
}

}  // namespace lf
