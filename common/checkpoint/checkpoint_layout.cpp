// Checkpoint layout and commit marker (see header). Only std::filesystem,
// nlohmann-json and common/io: the coordinator links this without LibTorch.
#include "common/checkpoint/checkpoint_layout.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "common/io/atomic_file.h"
#include "common/io/safetensors.h"
#include "common/io/sha256.h"
#include "common/util/log.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

constexpr const char* kMarkerFormat = "lorafleet-checkpoint";
constexpr int kMarkerVersion = 1;

// A path with its trailing separator dropped, so filename() is the last component.
fs::path without_trailing_slash(const std::string& path) {
  fs::path p(path);
  return p.has_filename() || !p.has_parent_path() ? p : p.parent_path();
}

template <typename T>
bool parse_whole(const std::string& s, T& out) {
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && ptr == end && !s.empty();
}

bool all_digits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// Leftovers of an interrupted write: ".step-XXXXXXXX.tmp" (staging) and ".step-XXXXXXXX.old"
// (a same-step checkpoint being replaced). Their step, or INT64_MAX when the name is odd.
std::optional<std::int64_t> leftover_step_of(const std::string& name) {
  if (name.rfind(".step-", 0) != 0) return std::nullopt;
  const std::string rest = name.substr(1);
  const size_t dot = rest.find('.');
  if (auto step = checkpoint_step_of(rest.substr(0, dot))) return step;
  return INT64_MAX;
}

struct ScannedDir {
  fs::path path;
  std::int64_t step = 0;
  bool leftover = false;  // a staging / replaced dir, never complete
};

// step-* and .step-* directories directly under `root`, newest step first (a step dir before a
// leftover of the same step).
std::vector<ScannedDir> scan_checkpoint_root(const fs::path& root) {
  std::vector<ScannedDir> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& e : fs::directory_iterator(root)) {
    if (!e.is_directory(ec)) continue;
    const std::string name = e.path().filename().string();
    if (auto step = checkpoint_step_of(name)) {
      out.push_back({e.path(), *step, false});
    } else if (auto left = leftover_step_of(name)) {
      out.push_back({e.path(), *left, true});
    }
  }
  std::sort(out.begin(), out.end(), [](const ScannedDir& a, const ScannedDir& b) {
    if (a.step != b.step) return a.step > b.step;
    if (a.leftover != b.leftover) return !a.leftover;
    return a.path < b.path;
  });
  return out;
}

std::string leftover_reason(const fs::path& dir) {
  const std::string name = dir.filename().string();
  if (name.size() > 4 && name.compare(name.size() - 4, 4, ".old") == 0) {
    return "a checkpoint being replaced when a write was interrupted (not a checkpoint)";
  }
  return "an unfinished staging directory (its checkpoint write was interrupted or failed)";
}

// The newest complete checkpoint among `roots`, warning once about each torn or leftover
// directory newer than it (older ones would not have been chosen anyway).
std::optional<CommittedCheckpoint> newest_complete(const std::vector<fs::path>& roots) {
  std::vector<ScannedDir> all;
  for (const fs::path& root : roots) {
    std::vector<ScannedDir> found = scan_checkpoint_root(root);
    all.insert(all.end(), found.begin(), found.end());
  }
  std::stable_sort(all.begin(), all.end(), [](const ScannedDir& a, const ScannedDir& b) {
    if (a.step != b.step) return a.step > b.step;
    return !a.leftover && b.leftover;
  });
  for (const ScannedDir& d : all) {
    if (d.leftover) {
      LF_WARN("skipping " << d.path.string() << ": " << leftover_reason(d.path));
      continue;
    }
    if (auto reason = checkpoint_torn_reason(d.path.string())) {
      LF_WARN("skipping torn checkpoint " << d.path.string() << ": " << *reason);
      continue;
    }
    return CommittedCheckpoint{fs::absolute(d.path).lexically_normal().string(), d.step};
  }
  return std::nullopt;
}

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw std::runtime_error(path.string() + ": read failed");
  return s.str();
}

bool is_hex64(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](unsigned char c) {
           return std::isdigit(c) != 0 || (c >= 'a' && c <= 'f');
         });
}

// A relative path inside the checkpoint: no root, no "..", not empty.
bool is_safe_relative(const std::string& s) {
  const fs::path p(s);
  if (s.empty() || p.is_absolute()) return false;
  for (const fs::path& part : p) {
    if (part == "..") return false;
  }
  return true;
}

}  // namespace

std::string checkpoint_dir_name(std::int64_t global_step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%08lld", static_cast<long long>(global_step));
  return buf;
}

std::optional<std::int64_t> checkpoint_step_of(const std::string& dir_name) {
  if (dir_name.rfind("step-", 0) != 0) return std::nullopt;
  const std::string digits = dir_name.substr(5);
  std::int64_t step = 0;
  if (!all_digits(digits) || !parse_whole(digits, step)) return std::nullopt;
  return step;
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

void discard_staging_dir(const std::string& staging) noexcept {
  std::error_code ec;
  fs::remove_all(staging, ec);
  if (ec) {
    LF_WARN("could not remove the failed checkpoint's staging dir " << staging << " ("
                                                                    << ec.message() << ")");
  }
}

std::string publish_staging_dir(const std::string& staging, const std::string& root,
                                std::int64_t global_step, const WrittenFiles& written) {
  const fs::path target = fs::path(root) / checkpoint_dir_name(global_step);
  const fs::path old = fs::path(root) / ("." + checkpoint_dir_name(global_step) + ".old");
  bool renamed = false;
  bool replaced = false;
  try {
    if (fs::is_directory(fs::path(staging) / "rng")) {
      fsync_directory((fs::path(staging) / "rng").string());
    }
    fsync_directory(staging);
    if (fs::exists(target)) {
      // Re-running the same step (e.g. after resuming from an older one): keep the old one aside
      // until the new one is committed, and put it back if that fails.
      fs::remove_all(old);
      rename_atomic(target.string(), old.string());
      replaced = true;
    }
    rename_atomic(staging, target.string());  // fsyncs root
    renamed = true;
    write_commit_marker(target.string(), global_step, written);  // last: only now is it complete
  } catch (...) {
    discard_staging_dir(renamed ? target.string() : staging);
    if (replaced) {
      std::error_code ec;
      fs::rename(old, target, ec);
    }
    throw;
  }
  if (replaced) {
    std::error_code ec;
    fs::remove_all(old, ec);
    if (ec) LF_WARN("could not remove " << old.string() << " (" << ec.message() << ")");
  }
  return target.string();
}

CheckpointManifest write_commit_marker(const std::string& dir, std::int64_t global_step,
                                       const WrittenFiles& written) {
  CheckpointManifest manifest;
  manifest.global_step = global_step;
  const fs::path base(dir);
  for (const auto& e : fs::recursive_directory_iterator(base)) {
    if (!e.is_regular_file()) continue;
    const fs::path rel = e.path().lexically_relative(base);
    // The marker itself, and its temp file should an earlier marker write have died.
    if (!rel.has_parent_path() && rel.string().rfind(kCheckpointMarkerFile, 0) == 0) {
      continue;
    }
    CheckpointFileEntry f;
    f.path = rel.generic_string();
    f.size = e.file_size();
    const auto known = written.find(f.path);
    const bool as_written = known != written.end() && known->second.size == f.size;
    f.sha256 = as_written ? known->second.sha256 : sha256_file_hex(e.path().string());
    manifest.files.push_back(std::move(f));
  }
  std::sort(
      manifest.files.begin(), manifest.files.end(),
      [](const CheckpointFileEntry& a, const CheckpointFileEntry& b) { return a.path < b.path; });
  nlohmann::json files = nlohmann::json::array();
  for (const CheckpointFileEntry& f : manifest.files) {
    files.push_back({{"path", f.path}, {"size", f.size}, {"sha256", f.sha256}});
  }
  const nlohmann::json marker = {{"format", kMarkerFormat},
                                 {"version", kMarkerVersion},
                                 {"global_step", global_step},
                                 {"files", files}};
  write_file_atomic((base / kCheckpointMarkerFile).string(), marker.dump(1) + "\n");
  return manifest;
}

CheckpointManifest read_commit_marker(const std::string& dir) {
  const std::string file = (fs::path(dir) / kCheckpointMarkerFile).string();
  const std::string text = read_text_file(file);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(file + ": not valid JSON (" + e.what() + ")");
  }
  auto bad = [&](const std::string& what) {
    return std::runtime_error(file + ": expected " + what);
  };
  if (!j.is_object()) throw bad("a JSON object");
  if (!j.contains("format") || j["format"] != kMarkerFormat) {
    throw bad(std::string("\"format\": \"") + kMarkerFormat + "\"");
  }
  if (!j.contains("version") || j["version"] != kMarkerVersion) {
    throw bad("\"version\": " + std::to_string(kMarkerVersion));
  }
  if (!j.contains("global_step") || !j["global_step"].is_number_integer()) {
    throw bad("an integer \"global_step\"");
  }
  if (!j.contains("files") || !j["files"].is_array()) throw bad("a \"files\" array");
  CheckpointManifest m;
  m.global_step = j["global_step"].get<std::int64_t>();
  for (const auto& f : j["files"]) {
    if (!f.is_object() || !f.contains("path") || !f["path"].is_string() || !f.contains("size") ||
        !f["size"].is_number_unsigned() || !f.contains("sha256") || !f["sha256"].is_string()) {
      throw bad("each \"files\" entry to be {\"path\": string, \"size\": bytes, \"sha256\": hex}");
    }
    CheckpointFileEntry e;
    e.path = f["path"].get<std::string>();
    e.size = f["size"].get<std::uint64_t>();
    e.sha256 = f["sha256"].get<std::string>();
    if (!is_safe_relative(e.path)) throw bad("a relative path inside the checkpoint: " + e.path);
    if (!is_hex64(e.sha256)) throw bad("64 lowercase hex digits as sha256 of " + e.path);
    m.files.push_back(std::move(e));
  }
  return m;
}

std::optional<std::string> checkpoint_torn_reason(const std::string& dir, CheckpointCheck check) {
  const fs::path p = without_trailing_slash(dir);
  std::error_code ec;
  if (!fs::is_directory(p, ec)) return std::string("not a directory");
  if (leftover_step_of(p.filename().string())) return leftover_reason(p);
  if (!fs::exists(p / kCheckpointMarkerFile, ec)) {
    return std::string("no ") + kCheckpointMarkerFile +
           " marker (its write was interrupted before the commit, or it predates commit "
           "markers)";
  }
  CheckpointManifest m;
  try {
    m = read_commit_marker(p.string());
  } catch (const std::exception& e) {
    return std::string("unusable ") + kCheckpointMarkerFile + ": " + e.what();
  }
  const auto dir_step = checkpoint_step_of(p.filename().string());
  if (dir_step && *dir_step != m.global_step) {
    return std::string(kCheckpointMarkerFile) + " names global_step " +
           std::to_string(m.global_step) + ", the directory step " + std::to_string(*dir_step);
  }
  for (const char* required : {kCheckpointLoraFile, kCheckpointStateFile}) {
    const bool listed = std::any_of(m.files.begin(), m.files.end(),
                                    [&](const auto& f) { return f.path == required; });
    if (!listed) return std::string(kCheckpointMarkerFile) + " does not list " + required;
  }
  for (const CheckpointFileEntry& f : m.files) {
    const fs::path file = p / f.path;
    const auto size = fs::file_size(file, ec);
    if (ec) return f.path + " listed in " + kCheckpointMarkerFile + " is missing";
    if (size != f.size) {
      return f.path + " is " + std::to_string(size) + " bytes, " + kCheckpointMarkerFile +
             " lists " + std::to_string(f.size) + " (truncated or rewritten after the commit)";
    }
    if (check == CheckpointCheck::kSizesAndHash) {
      std::string hash;
      try {
        hash = sha256_file_hex(file.string());
      } catch (const std::exception& e) {
        return f.path + " cannot be read: " + e.what();
      }
      if (hash != f.sha256) {
        return f.path + " has sha256 " + hash + ", " + kCheckpointMarkerFile + " lists " +
               f.sha256 + " (modified after the commit)";
      }
    }
  }
  return std::nullopt;
}

std::optional<CommittedCheckpoint> find_latest_committed(const std::string& root) {
  return newest_complete({fs::path(root)});
}

std::string resolve_checkpoint(const std::string& path) {
  const fs::path p = without_trailing_slash(path);
  if (!fs::exists(p)) throw std::runtime_error("--resume " + path + ": no such directory");
  const std::string name = p.filename().string();
  const bool is_checkpoint_dir = checkpoint_step_of(name) || leftover_step_of(name) ||
                                 fs::exists(p / kCheckpointMarkerFile) ||
                                 fs::exists(p / kCheckpointStateFile);
  if (is_checkpoint_dir) {
    if (auto reason = checkpoint_torn_reason(p.string())) {
      throw std::runtime_error("--resume " + p.string() + ": torn checkpoint: " + *reason +
                               " (pass its parent folder to resume from the newest complete one)");
    }
    return fs::absolute(p).lexically_normal().string();
  }
  if (auto found = newest_complete({p, p / "checkpoints"})) return found->dir;
  throw std::runtime_error("--resume " + path +
                           ": no complete checkpoint (expected a step-XXXXXXXX directory with a " +
                           kCheckpointMarkerFile + " marker in it or in its checkpoints/)");
}

void prune_checkpoints(const std::string& root, int keep) {
  if (keep <= 0) return;
  const std::vector<ScannedDir> dirs = scan_checkpoint_root(root);  // newest first
  std::optional<std::int64_t> newest_complete_step;
  int complete_seen = 0;
  auto remove_dir = [](const fs::path& dir, const std::string& why) {
    LF_INFO("removing " << dir.string() << " (" << why << ")");
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (ec) LF_WARN("could not remove " << dir.string() << " (" << ec.message() << ")");
  };
  for (const ScannedDir& d : dirs) {
    std::optional<std::string> reason = d.leftover
                                            ? std::optional<std::string>(leftover_reason(d.path))
                                            : checkpoint_torn_reason(d.path.string());
    if (!reason) {
      if (!newest_complete_step) newest_complete_step = d.step;
      if (++complete_seen > keep) {
        remove_dir(d.path, "older than the newest " + std::to_string(keep) +
                               " (output.keep_last_n_checkpoints)");
      }
    } else if (newest_complete_step && d.step < *newest_complete_step) {
      remove_dir(d.path, "torn, older than the newest complete checkpoint: " + *reason);
    }
  }
}

}  // namespace lf
