// Checkpoint resolution for the coordinator (see header). Mirrors worker/io/checkpoint.cpp's
// layout rules (a step-* directory is complete when it holds train_state.safetensors and
// lora.safetensors; hidden .step-*.tmp staging directories are torn) and its metadata keys
// ("lorafleet.state.<field>"), reading only the safetensors header.
#include "coordinator/resume_point.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "common/io/safetensors.h"
#include "common/util/log.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

constexpr const char* kStateFile = "train_state.safetensors";
constexpr const char* kStatePrefix = "lorafleet.state.";

bool is_complete_checkpoint(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.rfind("step-", 0) == 0 && fs::is_directory(p) && fs::exists(p / kStateFile) &&
         fs::exists(p / "lora.safetensors");
}

// The newest complete step-* directory directly under one of `roots`; "" when none.
std::string newest_checkpoint(const std::vector<fs::path>& roots) {
  std::vector<fs::path> found;
  for (const fs::path& root : roots) {
    if (!fs::is_directory(root)) continue;
    for (const auto& e : fs::directory_iterator(root)) {
      if (is_complete_checkpoint(e.path())) {
        found.push_back(e.path());
      } else if (e.path().filename().string().rfind(".step-", 0) == 0) {
        LF_WARN("skipping incomplete checkpoint " << e.path().string());
      }
    }
  }
  if (found.empty()) return "";
  std::sort(found.begin(), found.end(), [](const fs::path& a, const fs::path& b) {
    return a.filename() < b.filename();  // zero-padded names sort by step
  });
  return fs::absolute(found.back()).lexically_normal().string();
}

const std::string* find_meta(const std::map<std::string, std::string>& m, const char* key) {
  auto it = m.find(std::string(kStatePrefix) + key);
  return it == m.end() ? nullptr : &it->second;
}

std::int64_t meta_int(const std::map<std::string, std::string>& m, const char* key,
                      const std::string& file, std::optional<std::int64_t> fallback = {}) {
  const std::string* v = find_meta(m, key);
  if (v == nullptr || v->empty()) {
    if (fallback) return *fallback;
    throw std::runtime_error(file + ": train state lacks '" + key + "'");
  }
  try {
    std::size_t used = 0;
    const long long x = std::stoll(*v, &used);
    if (used == v->size()) return x;
  } catch (const std::exception&) {
  }
  throw std::runtime_error(file + ": train state '" + key + "' is not an integer: " + *v);
}

}  // namespace

CheckpointPosition read_checkpoint_position(const std::string& dir) {
  const std::string file = (fs::path(dir) / kStateFile).string();
  const SafetensorsFile st = SafetensorsFile::open(file);
  const auto& m = st.metadata();
  CheckpointPosition p;
  p.dir = fs::absolute(dir).lexically_normal().string();
  const std::int64_t version = meta_int(m, "version", file);
  if (version != 1) {
    throw std::runtime_error(file + ": train state version " + std::to_string(version) +
                             " is not supported (expected 1)");
  }
  p.global_step = meta_int(m, "global_step", file);
  p.epoch = static_cast<int>(meta_int(m, "epoch", file));
  p.batches_in_epoch = meta_int(m, "step_in_epoch", file);
  p.samples_in_epoch = meta_int(m, "samples_in_epoch", file);
  p.world_size = static_cast<int>(meta_int(m, "world_size", file));
  const std::string* seed = find_meta(m, "shared_seed");
  if (seed == nullptr) throw std::runtime_error(file + ": train state lacks 'shared_seed'");
  try {
    p.shared_seed = std::stoull(*seed);
  } catch (const std::exception&) {
    throw std::runtime_error(file + ": train state 'shared_seed' is not an integer: " + *seed);
  }
  p.plan_epoch = static_cast<int>(meta_int(m, "plan_epoch", file, -1));
  if (const std::string* d = find_meta(m, "plan_digest")) p.plan_digest = *d;
  const std::string* lineage = find_meta(m, "plan_lineage");
  if (lineage != nullptr && !lineage->empty()) {
    try {
      p.plan_lineage = parse_plan_lineage(*lineage);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(file + ": " + e.what());
    }
  } else {
    // Before lineages: the whole epoch was served for one world size.
    p.plan_lineage = {{p.world_size, p.plan_epoch == p.epoch ? p.batches_in_epoch : 0}};
  }
  if (p.world_size < 1 || p.global_step < 0 || p.epoch < 0 || p.batches_in_epoch < 0) {
    throw std::runtime_error(file + ": train state position is out of range (world_size " +
                             std::to_string(p.world_size) + ", global_step " +
                             std::to_string(p.global_step) + ", epoch " + std::to_string(p.epoch) +
                             ", step_in_epoch " + std::to_string(p.batches_in_epoch) + ")");
  }
  return p;
}

std::optional<CheckpointPosition> resolve_resume_request(const std::string& request,
                                                         const std::string& output_dir) {
  if (request.empty()) return std::nullopt;
  if (request == "auto") {
    const std::string dir = newest_checkpoint({fs::path(output_dir) / "checkpoints"});
    if (dir.empty()) return std::nullopt;
    return read_checkpoint_position(dir);
  }
  const fs::path p(request);
  if (!fs::exists(p)) throw std::runtime_error("--resume " + request + ": no such directory");
  if (fs::exists(p / kStateFile)) return read_checkpoint_position(p.string());
  const std::string dir = newest_checkpoint({p, p / "checkpoints"});
  if (dir.empty()) {
    throw std::runtime_error("--resume " + request +
                             ": no complete checkpoint (expected a step-XXXXXXXX directory "
                             "holding " +
                             std::string(kStateFile) + ")");
  }
  return read_checkpoint_position(dir);
}

}  // namespace lf
