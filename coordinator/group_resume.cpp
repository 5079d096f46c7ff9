// Planning a group's resume (see header).
#include "coordinator/group_resume.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <map>

#include "common/checkpoint/abandoned_checkpoints.h"
#include "common/checkpoint/checkpoint_layout.h"
#include "common/config/job_config.h"
#include "common/util/log.h"
#include "coordinator/resume_point.h"

namespace fs = std::filesystem;

namespace lf {

GroupResume::GroupResume(CoordinatorJob& job) : job_(job) {}

std::string GroupResume::checkpoints_root() const {
  return (fs::path(job_.config().output.output_dir) / "checkpoints").string();
}

std::string GroupResume::common_request(const std::vector<RankResumeRequest>& ranks) const {
  std::map<std::string, std::string> ranks_by_request;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    std::string& list = ranks_by_request[ranks[r].resume];
    list += (list.empty() ? "" : ", ") + std::to_string(r);
  }
  if (ranks_by_request.size() > 1) {
    std::string detail;
    for (const auto& [request, list] : ranks_by_request) {
      detail += (detail.empty() ? "" : "; ") + std::string("ranks ") + list + ": " +
                (request.empty() ? std::string("no --resume") : "--resume " + request);
    }
    throw ConfigError("the ranks asked to resume from different checkpoints (" + detail +
                      "); start every rank with the same --resume");
  }
  const std::string request = ranks.empty() ? "" : ranks_by_request.begin()->first;
  if (request.empty() || request == "auto") return request;
  int restart_count = 0;
  for (const RankResumeRequest& r : ranks) restart_count = std::max(restart_count, r.restart_count);
  if (restart_count == 0) return request;
  const std::optional<CommittedCheckpoint> newest = find_latest_committed(checkpoints_root());
  if (!newest) return request;
  LF_INFO("--resume " << request << " is the command line of the group's first start, repeated "
                      << "by its supervisor (restart " << restart_count
                      << "): continuing from the newest committed checkpoint " << newest->dir
                      << " instead");
  return "auto";
}

void GroupResume::refuse_existing_checkpoints() const {
  const fs::path root = checkpoints_root();
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return;
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.path().filename().string().rfind("step-", 0) == 0) {
      const std::string out_dir = job_.config().output.output_dir;
      throw ConfigError(job_.config().source_name + ": key 'output.output_dir': " + out_dir +
                        " already holds checkpoints (" + e.path().string() + "); pass --resume " +
                        out_dir + " (or --resume auto) to continue that run, or choose another " +
                        "output_dir (nothing was overwritten)");
    }
  }
}

void GroupResume::check_plan(const CheckpointPosition& c, int world_size) const {
  std::string digest;
  try {
    digest = epoch_plan_digest(build_continued_epoch_plan(
        job_.dataset(), job_.plan_options(world_size), c.plan_epoch, c.plan_lineage));
  } catch (const std::invalid_argument& e) {
    throw ConfigError(c.dir + ": the plan of epoch " + std::to_string(c.plan_epoch + 1) +
                      " cannot be rebuilt along the checkpoint's lineage: " + e.what());
  }
  if (digest == c.plan_digest) return;
  throw ConfigError(c.dir + ": this job's plan of epoch " + std::to_string(c.plan_epoch + 1) +
                    " differs from the one the checkpoint was trained on: the dataset (images, "
                    "captions) or an option that shapes the plan (seed, reg_selection, "
                    "num_repeats, flip_aug, random_crop, caption options, bucket options, batch "
                    "sizes) changed since; resume with the same data and config, or start a new "
                    "run in another output_dir");
}

void GroupResume::set_aside_abandoned_branch(const CheckpointPosition& c) const {
  const std::string root = checkpoints_root();
  const std::optional<AbandonedCheckpoints> moved =
      set_aside_abandoned_checkpoints(root, c.global_step, std::time(nullptr));
  if (!moved) return;
  LF_WARN("--resume " << c.dir << " (global_step " << c.global_step << ") abandons the "
                      << moved->steps.size() << " newer checkpoint(s) of " << root << " (steps "
                      << moved->steps.front() << ".." << moved->steps.back() << "): moved to "
                      << moved->folder << ", not deleted; --resume auto no longer picks them");
}

std::optional<CheckpointPosition> GroupResume::plan(const std::vector<RankResumeRequest>& ranks) {
  const int world_size = static_cast<int>(ranks.size());
  const std::string request = common_request(ranks);
  std::optional<CheckpointPosition> pos;
  try {
    pos = resolve_resume_request(request, job_.config().output.output_dir);
  } catch (const std::exception& e) {
    throw ConfigError("cannot resume (--resume " + request + "): " + e.what());
  }
  if (!pos) {
    if (request.empty()) refuse_existing_checkpoints();
    job_.set_world_size(world_size);  // undoes an earlier generation's resume
    if (!request.empty()) LF_INFO("--resume auto: no checkpoint yet, starting fresh");
    return std::nullopt;
  }
  check_resume_compatible(*pos, resume_expectations_of(job_.config()));
  check_plan(*pos, world_size);
  job_.set_world_size(world_size);
  try {
    job_.set_resume(*pos);
  } catch (const std::invalid_argument& e) {
    job_.set_world_size(world_size);
    throw ConfigError("cannot resume " + pos->dir + ": " + e.what());
  }
  if (request != "auto") set_aside_abandoned_branch(*pos);  // only once the resume plans
  LF_INFO("the group resumes from " << pos->dir << " (written by " << pos->world_size
                                    << " ranks) at global_step " << pos->global_step << " on "
                                    << world_size << " ranks");
  return pos;
}

}  // namespace lf
