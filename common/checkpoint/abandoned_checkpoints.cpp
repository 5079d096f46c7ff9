#include "common/checkpoint/abandoned_checkpoints.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "common/checkpoint/checkpoint_layout.h"
#include "common/io/atomic_file.h"
#include "common/util/wall_clock.h"

namespace fs = std::filesystem;

namespace lf {

namespace {

// root/abandoned-<stamp>, or the first root/abandoned-<stamp>-N that does not exist yet.
fs::path fresh_folder(const fs::path& root, const std::string& stamp) {
  fs::path folder = root / ("abandoned-" + stamp);
  for (int n = 2; fs::exists(folder); ++n) {
    folder = root / ("abandoned-" + stamp + "-" + std::to_string(n));
  }
  return folder;
}

}  // namespace

std::optional<AbandonedCheckpoints> set_aside_abandoned_checkpoints(const std::string& root,
                                                                    std::int64_t resumed_step,
                                                                    std::time_t now) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return std::nullopt;
  std::vector<std::pair<std::int64_t, fs::path>> newer;
  for (const fs::directory_entry& e : fs::directory_iterator(root)) {
    if (!e.is_directory()) continue;
    const std::optional<std::int64_t> step = checkpoint_step_of(e.path().filename().string());
    if (step && *step > resumed_step) newer.emplace_back(*step, e.path());
  }
  if (newer.empty()) return std::nullopt;
  std::sort(newer.begin(), newer.end());
  const fs::path folder = fresh_folder(root, kohya_local_timestamp(now));
  fs::create_directory(folder, ec);
  if (ec) {
    throw std::runtime_error("cannot create " + folder.string() +
                             " for the abandoned checkpoints: " + ec.message());
  }
  AbandonedCheckpoints out;
  out.folder = folder.string();
  for (const auto& [step, dir] : newer) {
    rename_atomic(dir.string(), (folder / dir.filename()).string());  // fsyncs `folder`
    out.steps.push_back(step);
  }
  fsync_directory(root);  // the checkpoints left it
  return out;
}

}  // namespace lf
