// The train position in a train state's header metadata, and the resume compatibility check
// (see header). Only common/io and common/config: the coordinator links this without LibTorch.
#include "common/checkpoint/train_position.h"

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "common/checkpoint/checkpoint_layout.h"
#include "common/config/job_config.h"
#include "common/config/optimizer_keys.h"
#include "common/io/safetensors.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

constexpr const char* kStatePrefix = "lorafleet.state.";
constexpr int kStateVersion = 2;

std::string join_ints(const std::vector<std::int64_t>& values) {
  std::string out;
  for (std::int64_t v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

std::string exact(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

template <typename T>
bool parse_whole(const std::string& s, T& out) {
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && ptr == end && !s.empty();
}

// The value of "lorafleet.state.<key>"; throws naming the file when it is missing.
const std::string& required(const std::map<std::string, std::string>& meta, const std::string& key,
                            const std::string& file) {
  const auto it = meta.find(kStatePrefix + key);
  if (it == meta.end()) {
    throw std::runtime_error(file + ": train state lacks '" + kStatePrefix + key + "'");
  }
  return it->second;
}

template <typename T>
T required_number(const std::map<std::string, std::string>& meta, const std::string& key,
                  const std::string& file, const char* expected) {
  const std::string& v = required(meta, key, file);
  T out{};
  if (!parse_whole(v, out)) {
    throw std::runtime_error(file + ": train state '" + kStatePrefix + key + "' is '" + v +
                             "', expected " + expected);
  }
  return out;
}

// A comma-separated list of integers ("" for an empty list).
std::vector<std::int64_t> required_ints(const std::map<std::string, std::string>& meta,
                                        const std::string& key, const std::string& file) {
  const std::string& v = required(meta, key, file);
  std::vector<std::int64_t> out;
  if (v.empty()) return out;
  std::stringstream list(v);
  for (std::string item; std::getline(list, item, ',');) {
    std::int64_t x = 0;
    if (!parse_whole(item, x)) {
      throw std::runtime_error(file + ": train state '" + kStatePrefix + key + "' is '" + v +
                               "', expected a comma-separated list of integers");
    }
    out.push_back(x);
  }
  return out;
}

std::string list_text(const std::vector<std::int64_t>& v) { return "[" + join_ints(v) + "]"; }

}  // namespace

bool operator==(const TrainPosition& a, const TrainPosition& b) {
  return train_position_metadata(a) == train_position_metadata(b);
}

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
  put("training_started_at", exact(s.training_started_at));
  put("reg_cursor", join_ints(s.reg_cursor));
  put("gradient_accumulation_steps", std::to_string(s.gradient_accumulation_steps));
  put("batch_sizes", join_ints(s.batch_sizes));
  put("optimizer_type", s.optimizer_type);
  put("plan_epoch", std::to_string(s.plan_epoch));
  put("plan_digest", s.plan_digest);
  put("plan_lineage", format_plan_lineage(s.plan_lineage));
  put("loss_scale", exact(s.loss_scale));
  put("loss_scale_growth_tracker", std::to_string(s.loss_scale_growth_tracker));
  put("skipped_steps", std::to_string(s.skipped_steps));
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
  s.reg_cursor = required_ints(m, "reg_cursor", file);
  s.gradient_accumulation_steps =
      required_number<int>(m, "gradient_accumulation_steps", file, "an integer");
  s.batch_sizes = required_ints(m, "batch_sizes", file);
  s.optimizer_type = required(m, "optimizer_type", file);
  s.plan_epoch = required_number<int>(m, "plan_epoch", file, "an integer");
  s.plan_digest = required(m, "plan_digest", file);
  try {
    s.plan_lineage = parse_plan_lineage(required(m, "plan_lineage", file));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(file + ": " + e.what());
  }
  s.loss_scale = required_number<double>(m, "loss_scale", file, "a number");
  s.loss_scale_growth_tracker =
      required_number<std::int64_t>(m, "loss_scale_growth_tracker", file, "an integer");
  s.skipped_steps = required_number<std::int64_t>(m, "skipped_steps", file, "an integer");
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

CheckpointPosition read_checkpoint_position(const std::string& dir) {
  CheckpointPosition p;
  static_cast<TrainPosition&>(p) = read_train_position(dir);
  p.dir = fs::absolute(dir).lexically_normal().string();
  if (p.world_size < 1 || p.global_step < 0 || p.epoch < 0 || p.step_in_epoch < 0 ||
      p.gradient_accumulation_steps < 1) {
    throw std::runtime_error(
        (fs::path(dir) / kCheckpointStateFile).string() +
        ": train state position is out of range (world_size " + std::to_string(p.world_size) +
        ", global_step " + std::to_string(p.global_step) + ", epoch " + std::to_string(p.epoch) +
        ", step_in_epoch " + std::to_string(p.step_in_epoch) + ", gradient_accumulation_steps " +
        std::to_string(p.gradient_accumulation_steps) + ")");
  }
  return p;
}

ResumeExpectations resume_expectations_of(const JobConfig& config) {
  ResumeExpectations e;
  e.shared_seed = config.training.seed;
  e.gradient_accumulation_steps = config.training.gradient_accumulation_steps;
  for (const DatasetConfig& d : config.datasets) e.batch_sizes.push_back(d.batch_size);
  e.optimizer_type = read_optimizer(config.training).first.type;
  return e;
}

void check_resume_compatible(const CheckpointPosition& c, const ResumeExpectations& job) {
  const std::string file = (fs::path(c.dir) / kCheckpointStateFile).string();
  auto refuse = [&](const std::string& key, const std::string& saved, const std::string& now,
                    const std::string& why) {
    throw ConfigError(file + ": key '" + key + "': the checkpoint was trained with " + saved +
                      ", the job has " + now + " (" + why +
                      "); resume with the same value or start a new output_dir");
  };
  if (c.shared_seed != job.shared_seed) {
    refuse("training.seed", std::to_string(c.shared_seed), std::to_string(job.shared_seed),
           "the noise, timesteps and plans all derive from it");
  }
  if (c.gradient_accumulation_steps != job.gradient_accumulation_steps) {
    refuse("training.gradient_accumulation_steps", std::to_string(c.gradient_accumulation_steps),
           std::to_string(job.gradient_accumulation_steps),
           "changing it would regroup the epoch and change the schedule");
  }
  if (c.batch_sizes != job.batch_sizes) {
    refuse("training.train_batch_size / dataset batch_size",
           "per-dataset batch sizes " + list_text(c.batch_sizes), list_text(job.batch_sizes),
           "changing them would change the epoch plan");
  }
  if (c.optimizer_type != job.optimizer_type) {
    refuse("training.optimizer_type", c.optimizer_type, job.optimizer_type,
           "an optimizer's state does not carry over to another");
  }
}

}  // namespace lf
