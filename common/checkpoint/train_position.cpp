// The train position in a train state's header metadata (see header). Only common/io: the
// coordinator links this without LibTorch.
#include "common/checkpoint/train_position.h"

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "common/checkpoint/checkpoint_layout.h"
#include "common/io/safetensors.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

constexpr const char* kStatePrefix = "lorafleet.state.";
constexpr int kStateVersion = 1;

std::string join_ints(const std::vector<std::int64_t>& values) {
  std::string out;
  for (std::int64_t v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

template <typename T>
bool parse_whole(const std::string& s, T& out) {
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && ptr == end && !s.empty();
}

const std::string* find_key(const std::map<std::string, std::string>& meta,
                            const std::string& key) {
  auto it = meta.find(kStatePrefix + key);
  return it == meta.end() ? nullptr : &it->second;
}

template <typename T>
T required_number(const std::map<std::string, std::string>& meta, const std::string& key,
                  const std::string& file, const char* expected) {
  const std::string* v = find_key(meta, key);
  if (v == nullptr) {
    throw std::runtime_error(file + ": train state lacks '" + kStatePrefix + key + "'");
  }
  T out{};
  if (!parse_whole(*v, out)) {
    throw std::runtime_error(file + ": train state '" + kStatePrefix + key + "' is '" + *v +
                             "', expected " + expected);
  }
  return out;
}

// A comma-separated list of integers; empty when absent (checkpoints written before the key).
std::vector<std::int64_t> optional_ints(const std::map<std::string, std::string>& meta,
                                        const std::string& key, const std::string& file) {
  std::vector<std::int64_t> out;
  const std::string* v = find_key(meta, key);
  if (v == nullptr || v->empty()) return out;
  std::stringstream list(*v);
  for (std::string item; std::getline(list, item, ',');) {
    std::int64_t x = 0;
    if (!parse_whole(item, x)) {
      throw std::runtime_error(file + ": train state '" + kStatePrefix + key + "' is '" + *v +
                               "', expected a comma-separated list of integers");
    }
    out.push_back(x);
  }
  return out;
}

}  // namespace

std::map<std::string, std::string> train_position_metadata(const TrainPosition& s) {
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
  put("plan_lineage", format_plan_lineage(s.plan_lineage));
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", s.training_started_at);
  put("training_started_at", buf);
  if (s.loss_scale > 0) {  // only runs with loss scaling carry it: other states stay as they were
    std::snprintf(buf, sizeof(buf), "%.17g", s.loss_scale);
    put("loss_scale", buf);
    put("loss_scale_growth_tracker", std::to_string(s.loss_scale_growth_tracker));
    put("skipped_steps", std::to_string(s.skipped_steps));
  }
  return meta;
}

TrainPosition parse_train_position(const std::map<std::string, std::string>& m,
                                   const std::string& file) {
  const auto version = required_number<int>(m, "version", file, "an integer");
  if (version != kStateVersion) {
    throw std::runtime_error(file + ": train state version " + std::to_string(version) +
                             " is not supported (expected " + std::to_string(kStateVersion) + ")");
  }
  TrainPosition s;
  s.global_step = required_number<std::int64_t>(m, "global_step", file, "an integer");
  s.epoch = required_number<int>(m, "epoch", file, "an integer");
  s.step_in_epoch = required_number<std::int64_t>(m, "step_in_epoch", file, "an integer");
  s.samples_in_epoch = required_number<std::int64_t>(m, "samples_in_epoch", file, "an integer");
  s.shared_seed =
      required_number<std::uint64_t>(m, "shared_seed", file, "an unsigned 64-bit integer");
  s.world_size = required_number<int>(m, "world_size", file, "an integer");
  s.session_id = required_number<std::int64_t>(m, "session_id", file, "an integer");
  s.training_started_at =
      required_number<double>(m, "training_started_at", file, "a number of seconds");
  s.reg_cursor = optional_ints(m, "reg_cursor", file);
  s.batch_sizes = optional_ints(m, "batch_sizes", file);
  const std::vector<std::int64_t> accum = optional_ints(m, "gradient_accumulation_steps", file);
  s.gradient_accumulation_steps = accum.empty() ? 0 : static_cast<int>(accum[0]);
  const std::vector<std::int64_t> plan_epoch = optional_ints(m, "plan_epoch", file);
  s.plan_epoch = plan_epoch.empty() ? -1 : static_cast<int>(plan_epoch[0]);
  if (const std::string* digest = find_key(m, "plan_digest")) s.plan_digest = *digest;
  const std::string* lineage = find_key(m, "plan_lineage");
  if (lineage != nullptr && !lineage->empty()) {
    try {
      s.plan_lineage = parse_plan_lineage(*lineage);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(file + ": " + e.what());
    }
  } else {
    s.plan_lineage = {{s.world_size, s.step_in_epoch}};  // one group served the whole epoch
  }
  if (find_key(m, "loss_scale") != nullptr) {
    s.loss_scale = required_number<double>(m, "loss_scale", file, "a number");
    s.loss_scale_growth_tracker =
        required_number<std::int64_t>(m, "loss_scale_growth_tracker", file, "an integer");
    s.skipped_steps = required_number<std::int64_t>(m, "skipped_steps", file, "an integer");
  }
  return s;
}

TrainPosition read_train_position(const std::string& dir) {
  const std::string file = (fs::path(dir) / kCheckpointStateFile).string();
  if (!fs::exists(file)) {
    throw std::runtime_error(file + ": missing (expected the train state of a checkpoint)");
  }
  const SafetensorsFile header = SafetensorsFile::open(file, /*use_mmap=*/true);
  return parse_train_position(header.metadata(), file);
}

}  // namespace lf
