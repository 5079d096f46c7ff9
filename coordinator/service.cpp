// CoordinatorService: registration barrier with deadlines, generations and restarts, per-rank
// progress and leases, checkpoint commit counting and job completion, mirrored into the
// StateStore. Every handler takes mutex_ for its whole body except plan building, which
// CoordinatorJob serializes on its own. Progress reaches the store only through the ticker's
// batched write (~1/s), outside mutex_, so a report never waits on an fsync.
#include "coordinator/service.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "common/checkpoint/abandoned_checkpoints.h"
#include "common/checkpoint/checkpoint_layout.h"
#include "common/data/epoch_plan.h"
#include "common/util/exit_codes.h"
#include "common/util/log.h"
#include "proto/proto_convert.h"

namespace lf {
namespace pb = lorafleet::v1;

static std::string seconds_text(std::chrono::milliseconds d) {
  std::ostringstream os;
  os << static_cast<double>(d.count()) / 1000.0 << " s";
  return os.str();
}

// The ranks not registered, for a message: up to 16, then how many in all (a world_size of
// thousands would otherwise make a line of megabytes).
template <class RankStates>
static std::string unregistered_ranks(const RankStates& ranks) {
  std::string list;
  std::size_t count = 0;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].registered) continue;
    if (++count <= 16) list += (list.empty() ? "" : ", ") + std::to_string(r);
  }
  if (count > 16) list += ", ... (" + std::to_string(count) + " in total)";
  return list;
}

// The wire form of a resume position.
static void fill_resume_point(const CheckpointPosition& p, pb::ResumePoint* out) {
  out->set_checkpoint(p.dir);
  out->set_global_step(p.global_step);
  out->set_epoch(p.epoch);
  out->set_batches_in_epoch(p.step_in_epoch);
  out->set_samples_in_epoch(p.samples_in_epoch);
  out->set_world_size(p.world_size);
  out->set_plan_digest(p.plan_digest);
  out->set_plan_epoch(p.plan_epoch);
  for (const PlanSegment& seg : p.plan_lineage) {
    pb::PlanSegment* o = out->add_plan_lineage();
    o->set_world_size(seg.world_size);
    o->set_batches(seg.batches);
  }
}

// How long a cancel waits for a rank to report its exit: two worker heartbeats (5 s each) and
// a margin.
constexpr std::chrono::milliseconds kCancelWait = std::chrono::seconds(15);

static bool is_restart_cause(const std::string& cause) {
  const auto& causes = CoordinatorMetrics::kRestartCauses;
  return std::find(causes.begin(), causes.end(), cause) != causes.end();
}

CoordinatorService::CoordinatorService(CoordinatorJob& job, CoordinatorMetrics& metrics,
                                       const ServiceOptions& options, StateStore* store,
                                       OperatorControl* control)
    : job_(job),
      metrics_(metrics),
      options_(options),
      auth_(options.job_token),
      store_(store),
      control_(control) {
  base_dir_ = options_.base_dir.empty() ? std::filesystem::current_path().string()
                                        : std::filesystem::absolute(options_.base_dir).string();
  to_proto(job_.dataset(), &manifest_);
  if (options_.world_size > 0) {
    const JobSchedule s = job_.set_world_size(options_.world_size);
    world_size_ = options_.world_size;
    world_size_fixed_ = true;
    ranks_.assign(world_size_, RankState{});
    metrics_.set_job(s.world_size, s.max_train_steps, s.num_epochs);
  }
  if (store_ != nullptr && store_->resumed()) {
    const StoredJob stored = store_->load();
    if (!stored.done) {
      restore(stored);
    } else if (!restore_finished(stored)) {
      store_->start_fresh_record();  // failed, cancelled or stopped before its end: run it again
    }
  }
  update_membership_metrics(Clock::now());
  ticker_ = std::thread([this] { tick_loop(); });
}

CoordinatorService::~CoordinatorService() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ticker_ = true;
    shutting_down_ = true;
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

void CoordinatorService::restore(const StoredJob& stored) {
  const std::string& path = store_->path();
  if (stored.world_size > 0) {
    if (world_size_fixed_ && stored.world_size != world_size_) {
      // Resized between coordinator runs: the old generation cannot continue; the new group
      // forms at the new size and resumes the last committed checkpoint (epoch plan lineage).
      LF_WARN("coordinator state " << path << ": the job ran with world_size "
                                   << stored.world_size << ", now " << world_size_
                                   << ": generation " << stored.generation
                                   << " is not restored; the group re-forms at the new size");
    }
    if (!world_size_fixed_) {
      const JobSchedule s = job_.set_world_size(stored.world_size);
      world_size_ = stored.world_size;
      ranks_.assign(world_size_, RankState{});
      metrics_.set_job(s.world_size, s.max_train_steps, s.num_epochs);
    }
    // Plans are a pure function of (dataset, seed, world_size, epoch): the newest one issued
    // must come out the same, or the workers would go on training on other data.
    const StoredPlan* newest = nullptr;
    for (const StoredPlan& p : stored.plans) {
      if (p.world_size == world_size_ && (newest == nullptr || p.epoch > newest->epoch))
        newest = &p;
      if (p.world_size == world_size_) plans_recorded_.insert(p.epoch);
    }
    if (newest != nullptr && epoch_plan_digest(*job_.epoch_plan(newest->epoch)) != newest->digest) {
      throw std::runtime_error("coordinator state " + path + ": the plan of epoch " +
                               std::to_string(newest->epoch) +
                               " differs from the one issued before the restart (has the dataset "
                               "changed?); remove the file to start the job afresh");
    }
  }
  generation_ = stored.generation;
  last_committed_step_ = stored.last_committed_step;
  last_committed_path_ = stored.last_committed_path;
  if (last_committed_step_ >= 0) {
    committed_steps_.insert(last_committed_step_);
    metrics_.checkpoint_committed(last_committed_step_);
  }
  for (const auto& [cause, n] : stored.restarts) {
    restarts_[cause] = n;
    metrics_.add_restarts(cause, n);
  }
  metrics_.set_generation(generation_);
  const Clock::time_point now = Clock::now();
  if (stored.state == GenerationState::kRunning && world_size_ > 0 &&
      static_cast<int>(stored.ranks.size()) == world_size_) {
    if (!assignment_.ParseFromString(stored.assignment)) {
      throw std::runtime_error("coordinator state " + path +
                               ": the stored assignment of generation " +
                               std::to_string(generation_) + " does not parse");
    }
    if (assignment_.has_resume_point()) {
      // The generation resumed a checkpoint: its schedule continues that checkpoint's plan.
      const pb::ResumePoint& p = assignment_.resume_point();
      JobResume r;
      r.global_step = p.global_step();
      r.epoch = p.epoch();
      r.batches_in_epoch = p.batches_in_epoch();
      if (r.batches_in_epoch > 0) {
        for (const pb::PlanSegment& seg : p.plan_lineage()) {
          r.lineage.push_back({seg.world_size(), seg.batches()});
        }
      }
      const JobSchedule resumed = job_.set_resume(r);
      metrics_.set_job(resumed.world_size, resumed.max_train_steps, resumed.num_epochs);
    }
    for (const StoredRank& r : stored.ranks) {
      if (r.rank < 0 || r.rank >= world_size_) continue;
      RankState& s = ranks_[r.rank];
      s.registered = true;
      s.hostname = r.hostname;
      s.pid = r.pid;
      s.device = r.device;
      s.metrics_port = r.metrics_port;
      s.finished = r.finished;
      s.ok = r.ok;
      s.preempted = r.preempted;
      s.last_seen = now;  // leases restart: the workers had no one to talk to
      if (auto it = stored.progress.find(r.rank); it != stored.progress.end()) {
        s.global_step = it->second.global_step;
        s.samples = it->second.samples;
      }
    }
    for (const auto& [step, by_rank] : stored.pending_checkpoints) {
      for (const auto& [rank, p] : by_rank) {
        checkpoint_ranks_[step].insert(rank);
        if (checkpoint_paths_[step].empty() || rank == 0) checkpoint_paths_[step] = p;
      }
    }
    registration_complete_ = true;
  } else if (stored.state == GenerationState::kEnded ||
             (stored.state == GenerationState::kRunning && generation_ > 0)) {
    end_cause_ = stored.end_cause.empty() ? "rank_restarted" : stored.end_cause;
    end_detail_ = stored.end_detail.empty() ? "the coordinator restarted" : stored.end_detail;
    rendezvous_deadline_ = now + options_.rendezvous_timeout;
  }
  LF_INFO("restored job state from " << path << ": generation " << generation_ << ", world_size "
                                     << world_size_ << ", last committed step "
                                     << last_committed_step_);
}

bool CoordinatorService::restore_finished(const StoredJob& stored) {
  if (world_size_fixed_ && stored.world_size != world_size_) return false;
  const JobSchedule s = job_.set_world_size(stored.world_size);
  if (!world_size_fixed_) job_.clear_world_size();
  finished_before_ = finished_job_of(stored, s.max_train_steps);
  if (!finished_before_) return false;
  metrics_.set_job(s.world_size, s.max_train_steps, s.num_epochs);
  last_committed_step_ = finished_before_->global_step;
  last_committed_path_ = finished_before_->checkpoint;
  metrics_.checkpoint_committed(last_committed_step_);
  const double unknown = std::numeric_limits<double>::quiet_NaN();  // loss, lr: not stored
  metrics_.set_progress(last_committed_step_, 0, unknown, unknown, 0.0);
  rendezvous_deadline_ = Clock::now() + options_.rendezvous_timeout;
  LF_INFO("coordinator state " << store_->path() << ": " << describe(*finished_before_)
                               << "; exiting 0 unless a group registers within "
                               << seconds_text(options_.rendezvous_timeout)
                               << " (cluster.rendezvous_timeout_seconds), e.g. to --resume "
                                  "an older checkpoint");
  return true;
}

void CoordinatorService::leave_finished_record() {
  LF_INFO("a group registers on the finished job: starting a fresh job record in "
          << store_->path() << " (the checkpoints stay for --resume)");
  finished_before_.reset();
  last_committed_step_ = -1;
  last_committed_path_.clear();
  rendezvous_deadline_.reset();
  persist("a fresh job record", [](StateStore& st) { st.start_fresh_record(); });
}

// ---- helpers (mutex_ held) ---------------------------------------------------------------

template <class Fn>
void CoordinatorService::persist(const char* what, Fn&& fn) {
  if (store_ == nullptr) return;
  try {
    fn(*store_);
  } catch (const std::exception& e) {
    LF_ERROR("cannot record " << what << ": " << e.what());
  }
}

bool CoordinatorService::is_alive(const RankState& s, Clock::time_point now) const {
  return s.registered && !s.finished &&
         (s.in_register || now - s.last_seen <= options_.alive_window);
}

int CoordinatorService::count_registered() const {
  return static_cast<int>(
      std::count_if(ranks_.begin(), ranks_.end(), [](const RankState& s) { return s.registered; }));
}

int CoordinatorService::restart_budget() const {
  return launcher_max_restarts_.value_or(options_.max_restarts);
}

std::string CoordinatorService::restart_budget_key() const {
  return launcher_max_restarts_ ? "lorafleet-launch --max-restarts" : "cluster.max_restarts";
}

std::int64_t CoordinatorService::counted_restarts() const {
  std::int64_t n = 0;
  for (const auto& [cause, count] : restarts_) {
    if (cause != "preemption") n += count;
  }
  return n;
}

grpc::Status CoordinatorService::check_rank(int rank, const char* rpc) const {
  if (world_size_ == 0) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            std::string(rpc) + " from rank " + std::to_string(rank) +
                " before any rank registered (world_size unknown)"};
  }
  if (rank < 0 || rank >= world_size_) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            std::string(rpc) + ": rank " + std::to_string(rank) + " is outside [0, world_size " +
                std::to_string(world_size_) + ")"};
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::check_running_rank(int rank, const char* rpc) const {
  grpc::Status st = check_rank(rank, rpc);
  if (!st.ok()) return st;
  if (!registration_complete_) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            std::string(rpc) + " from rank " + std::to_string(rank) +
                " before all ranks registered (" + std::to_string(count_registered()) + " of " +
                std::to_string(world_size_) + ")"};
  }
  if (!ranks_[rank].registered) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            std::string(rpc) + ": rank " + std::to_string(rank) +
                " is not registered in generation " + std::to_string(generation_)};
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::check_generation(std::uint64_t generation, int rank,
                                                  const char* rpc) const {
  if (generation == 0) return grpc::Status::OK;  // a client that does not send it
  if (generation > generation_) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            std::string(rpc) + " from rank " + std::to_string(rank) + " carries generation " +
                std::to_string(generation) + ", but the newest generation is " +
                std::to_string(generation_)};
  }
  if (generation < generation_ || !registration_complete_) {
    const std::string why = generation < generation_ || count_registered() > 0
                                ? "generation " + std::to_string(generation) +
                                      " was superseded by " + std::to_string(generation + 1)
                                : "generation " + std::to_string(generation) + " ended (" +
                                      end_detail_ + "); waiting for generation " +
                                      std::to_string(generation + 1);
    return {grpc::StatusCode::ABORTED,
            std::string(rpc) + " from rank " + std::to_string(rank) + ": " + why};
  }
  return grpc::Status::OK;
}

void CoordinatorService::start_new_generation() {
  registration_complete_ = false;
  for (RankState& s : ranks_) s = RankState{};
  checkpoint_ranks_.clear();
  checkpoint_paths_.clear();
}

void CoordinatorService::complete_registration(Clock::time_point now) {
  registration_complete_ = true;
  ++generation_;
  for (RankState& s : ranks_) s.last_seen = now;
  std::string restart_cause;
  if (generation_ > 1) {
    restart_cause = end_cause_;
    const std::int64_t n = ++restarts_[restart_cause];
    metrics_.add_restarts(restart_cause);
    LF_WARN("restart: generation "
            << generation_ << " formed after generation " << generation_ - 1 << " ended ("
            << restart_cause << ": " << end_detail_ << "); restarts for " << restart_cause << ": "
            << n << ", counted against " << restart_budget_key() << " " << counted_restarts()
            << " of " << restart_budget());
  }
  end_cause_.clear();
  end_detail_.clear();
  rendezvous_deadline_.reset();
  checkpoint_ranks_.clear();
  checkpoint_paths_.clear();

  // What the group resumes from decides the schedule, so it is planned before the assignment.
  group_resume_status_ = plan_group_resume();
  if (!group_resume_status_.ok()) {
    finish_job(1, group_resume_status_.error_message());
    cv_.notify_all();
    return;
  }

  const JobSchedule s = job_.schedule();
  const JobConfig& c = job_.config();
  assignment_.Clear();
  assignment_.set_world_size(world_size_);
  assignment_.set_job_config_yaml(c.yaml_text);
  assignment_.set_job_config_name(c.source_name);
  assignment_.set_base_dir(base_dir_);
  assignment_.set_dataset_config_toml(c.dataset_config_text);
  assignment_.set_sample_prompts_text(c.sample_prompts_text);
  assignment_.set_shared_seed(job_.shared_seed());
  assignment_.set_max_train_steps(s.max_train_steps);
  assignment_.set_num_epochs(s.num_epochs);
  assignment_.set_generation(generation_);
  // Env-mode rendezvous: rank 0's store address and NCCL id, relayed to every rank.
  assignment_.set_rendezvous_address(ranks_[0].rendezvous_address);
  assignment_.set_nccl_unique_id(ranks_[0].nccl_unique_id);
  if (group_resume_) fill_resume_point(*group_resume_, assignment_.mutable_resume_point());
  // Requests before a restarted generation were done (or moot): it counts on from here. The
  // first generation takes the ones made while it registered.
  if (control_ != nullptr && generation_ > 1) {
    assignment_.set_sample_now_id(control_->requests().sample_now);
  }

  std::vector<StoredRank> stored;
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    const RankState& rs = ranks_[r];
    stored.push_back(
        {static_cast<int>(r), rs.hostname, rs.pid, rs.device, rs.metrics_port, false, true, false});
  }
  const std::string blob = assignment_.SerializeAsString();
  persist("the new generation", [&](StateStore& st) {
    st.record_generation_formed(generation_, world_size_, blob, stored, restart_cause);
  });
  metrics_.set_generation(generation_);
  LF_INFO("all " << world_size_ << " ranks registered: generation " << generation_
                 << ", shared seed " << job_.shared_seed());
  cv_.notify_all();
}

void CoordinatorService::end_generation(const std::string& cause, const std::string& detail,
                                        Clock::time_point now) {
  if (!registration_complete_ || done_) return;
  end_cause_ = cause;
  end_detail_ = detail;
  start_new_generation();
  rendezvous_deadline_ = now + options_.rendezvous_timeout;
  LF_WARN("generation " << generation_ << " ended (" << cause << "): " << detail
                        << "; waiting up to " << seconds_text(options_.rendezvous_timeout)
                        << " for generation " << generation_ + 1
                        << " to register (cluster.rendezvous_timeout_seconds)");
  persist("the end of the generation",
          [&](StateStore& st) { st.record_generation_ended(generation_, cause, detail); });
  cv_.notify_all();
}

void CoordinatorService::finish_job(int exit_code, const std::string& why, bool durable) {
  if (done_) return;
  done_ = true;
  if (control_ != nullptr) control_->job_ended();
  exit_code_ = exit_code;
  end_reason_ = why;
  if (exit_code == 0) {
    LF_INFO("job done: " << why);
  } else {
    LF_ERROR("job failed: " << why);
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      if (ranks_[r].finished && !ranks_[r].ok) {
        LF_ERROR("  rank " << r << " (" << ranks_[r].hostname << "): " << ranks_[r].error);
      }
    }
  }
  if (durable)
    persist("the end of the job", [&](StateStore& st) { st.record_job_done(exit_code, why); });
  cv_.notify_all();
}

void CoordinatorService::update_membership_metrics(Clock::time_point now) {
  int registered = 0;
  int alive = 0;
  int finished = 0;
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    const RankState& s = ranks_[r];
    if (s.registered) ++registered;
    if (is_alive(s, now)) ++alive;
    if (s.finished) ++finished;
    if (s.registered) {
      metrics_.set_rank_last_seen_age(
          static_cast<int>(r), std::chrono::duration<double>(now - s.last_seen).count());
    }
  }
  metrics_.set_workers(registered, alive, finished);
}

void CoordinatorService::update_progress_metrics() {
  const RankState* latest = nullptr;
  double samples_per_second = 0.0;
  for (const RankState& s : ranks_) {
    if (!s.registered) continue;
    if (latest == nullptr || s.global_step > latest->global_step) latest = &s;
    if (!s.finished) samples_per_second += s.samples_per_second;
  }
  if (latest == nullptr) return;
  metrics_.set_progress(latest->global_step, latest->epoch, latest->loss, latest->learning_rate,
                        samples_per_second);
}

void CoordinatorService::fill_register_response(int rank, pb::RegisterResponse* response) const {
  *response = assignment_;
  response->set_rank(rank);
}

std::string CoordinatorService::checkpoints_root() const {
  return (std::filesystem::path(job_.config().output.output_dir) / "checkpoints").string();
}

std::string CoordinatorService::group_resume_request(const std::string& request) const {
  if (request.empty() || request == "auto") return request;
  int restart_count = 0;
  for (const RankState& r : ranks_) restart_count = std::max(restart_count, r.restart_count);
  if (restart_count == 0) return request;
  const std::string root = checkpoints_root();
  const std::optional<CommittedCheckpoint> newest = find_latest_committed(root);
  if (!newest) return request;
  LF_INFO("--resume " << request << " is the command line of the group's first start, repeated "
                      << "by its supervisor (restart " << restart_count
                      << "): continuing from the newest committed checkpoint " << newest->dir
                      << " instead");
  return "auto";
}

void CoordinatorService::set_aside_abandoned_branch(const CheckpointPosition& pos) const {
  const std::string root = checkpoints_root();
  const std::optional<AbandonedCheckpoints> moved =
      set_aside_abandoned_checkpoints(root, pos.global_step, std::time(nullptr));
  if (!moved) return;
  LF_WARN("--resume " << pos.dir << " (global_step " << pos.global_step << ") abandons the "
                      << moved->steps.size() << " newer checkpoint(s) of " << root << " (steps "
                      << moved->steps.front() << ".." << moved->steps.back() << "): moved to "
                      << moved->folder << ", not deleted; --resume auto no longer picks them");
}

grpc::Status CoordinatorService::plan_group_resume() {
  group_resume_.reset();
  // Every rank must have asked for the same thing: one answer is planned for the group.
  std::map<std::string, std::string> ranks_by_request;
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    std::string& list = ranks_by_request[ranks_[r].resume_request];
    list += (list.empty() ? "" : ", ") + std::to_string(r);
  }
  if (ranks_by_request.size() > 1) {
    std::string detail;
    for (const auto& [request, ranks] : ranks_by_request) {
      detail += (detail.empty() ? "" : "; ") + std::string("ranks ") + ranks + ": " +
                (request.empty() ? std::string("no --resume") : "--resume " + request);
    }
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "the ranks asked to resume from different checkpoints (" + detail +
                "); start every rank with the same --resume"};
  }
  const std::string request = group_resume_request(ranks_by_request.begin()->first);
  try {
    std::optional<CheckpointPosition> pos =
        resolve_resume_request(request, job_.config().output.output_dir);
    JobSchedule s;
    if (!pos) {
      s = job_.set_world_size(world_size_);  // undoes an earlier generation's resume
      if (!request.empty()) LF_INFO("--resume auto: no checkpoint yet, starting fresh");
    } else {
      if (pos->shared_seed != job_.shared_seed()) {
        return {grpc::StatusCode::FAILED_PRECONDITION,
                pos->dir + ": checkpoint was trained with seed " +
                    std::to_string(pos->shared_seed) + ", the job has seed " +
                    std::to_string(job_.shared_seed())};
      }
      // The plan the checkpoint's last step came from, rebuilt from this job's data and
      // options: a different digest means they changed since.
      if (!pos->plan_digest.empty() && pos->plan_epoch >= 0 &&
          epoch_plan_digest(build_continued_epoch_plan(
              job_.dataset(), job_.plan_options(world_size_), pos->plan_epoch,
              pos->plan_lineage)) != pos->plan_digest) {
        return {grpc::StatusCode::FAILED_PRECONDITION,
                pos->dir + ": this job's plan of epoch " + std::to_string(pos->plan_epoch + 1) +
                    " differs from the one the checkpoint was trained on: the dataset (images, "
                    "captions) or an option that shapes the plan (seed, reg_selection, "
                    "num_repeats, flip_aug, random_crop, caption options, bucket options, "
                    "batch sizes) changed since; resume with the same data and config, or start "
                    "a new run in another output_dir"};
      }
      JobResume r;
      r.global_step = pos->global_step;
      r.epoch = pos->epoch;
      r.batches_in_epoch = pos->step_in_epoch;
      if (pos->step_in_epoch > 0) r.lineage = pos->plan_lineage;
      s = job_.set_world_size(world_size_);
      s = job_.set_resume(r);
      if (request != "auto") set_aside_abandoned_branch(*pos);  // only once the resume plans
      LF_INFO("the group resumes from " << pos->dir << " (written by " << pos->world_size
                                        << " ranks) at global_step " << pos->global_step
                                        << " on " << world_size_ << " ranks");
      group_resume_ = std::move(pos);
    }
    metrics_.set_job(s.world_size, s.max_train_steps, s.num_epochs);
  } catch (const std::exception& e) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "cannot resume (--resume " + request + "): " + e.what()};
  }
  return grpc::Status::OK;
}

// ---- RPCs --------------------------------------------------------------------------------

grpc::Status CoordinatorService::Register(grpc::ServerContext* context,
                                          const pb::RegisterRequest* request,
                                          pb::RegisterResponse* response) {
  if (grpc::Status st = auth_.check(*context, "Register"); !st.ok()) return st;
  metrics_.count_rpc("Register");
  const int rank = request->rank();
  std::unique_lock<std::mutex> lock(mutex_);
  // Kubernetes-native workers send 0: the job's world size (cluster.world_size / --world-size).
  const int requested_ws =
      request->world_size() == 0 && world_size_fixed_ ? world_size_ : request->world_size();
  if (done_ || shutting_down_) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "Register from rank " + std::to_string(rank) + ": the job has already ended"};
  }
  if (requested_ws < 1) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "Register from rank " + std::to_string(rank) + ": world_size must be >= 1, got " +
                std::to_string(requested_ws) +
                (requested_ws == 0 ? " (set cluster.world_size in the job config, or "
                                     "lorafleet-coordinator --world-size, for workers launched "
                                     "without mpirun)"
                                   : "")};
  }
  if (requested_ws > kMaxWorldSize) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "Register from rank " + std::to_string(rank) + ": world_size must be <= " +
                std::to_string(kMaxWorldSize) + ", got " + std::to_string(requested_ws)};
  }
  if (rank < 0 || rank >= requested_ws) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "Register: rank " + std::to_string(rank) + " is outside [0, world_size " +
                std::to_string(requested_ws) + ")"};
  }
  if (finished_before_) leave_finished_record();
  if (world_size_ == 0) {
    try {
      const JobSchedule s = job_.set_world_size(requested_ws);
      metrics_.set_job(s.world_size, s.max_train_steps, s.num_epochs);
    } catch (const std::exception& e) {
      return {grpc::StatusCode::FAILED_PRECONDITION,
              "cannot plan the job for world_size " + std::to_string(requested_ws) + ": " +
                  e.what()};
    }
    world_size_ = requested_ws;
    ranks_.assign(world_size_, RankState{});
    plans_recorded_.clear();
    persist("world_size", [&](StateStore& st) { st.set_world_size(world_size_); });
    LF_INFO("world_size " << world_size_ << " (from the registration of rank " << rank << ")");
  } else if (requested_ws != world_size_) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "rank " + std::to_string(rank) + " registered with world_size " +
                std::to_string(requested_ws) + ", but the job's world_size is " +
                std::to_string(world_size_) +
                (world_size_fixed_ ? " (--world-size or cluster.world_size)"
                 : generation_ > 0 ? " (of its running generations)"
                                   : " (from the first registration)")};
  }

  Clock::time_point now = Clock::now();
  if (ranks_[rank].registered && ranks_[rank].in_register) {
    const RankState& other = ranks_[rank];
    return {grpc::StatusCode::ALREADY_EXISTS,
            "rank " + std::to_string(rank) + " is already registering (host " + other.hostname +
                ", pid " + std::to_string(other.pid) +
                ") and waits for the other ranks; is "
                "another job using this coordinator?"};
  }
  if (registration_complete_) {
    // The rank's previous incarnation is gone (its supervisor restarted it): the group it
    // belonged to cannot go on without it.
    const std::string& given = request->restart_cause();
    const std::string cause = is_restart_cause(given) ? given : "rank_restarted";
    end_generation(cause,
                   "rank " + std::to_string(rank) + " re-registered" +
                       (given.empty() ? std::string() : " (restart cause: " + given + ")"),
                   now);
  }
  if (request->has_max_restarts()) launcher_max_restarts_ = request->max_restarts();
  if (generation_ > 0 && end_cause_ != "preemption" && counted_restarts() + 1 > restart_budget()) {
    const std::string msg =
        restart_budget_key() + " (" + std::to_string(restart_budget()) +
        ") exhausted: generation " + std::to_string(generation_) + " ended (" + end_cause_ + ": " +
        end_detail_ + ") after " + std::to_string(counted_restarts()) + " restarts; raise " +
        (launcher_max_restarts_ ? "lorafleet-launch --max-restarts (LF_MAX_RESTARTS)"
                                : "cluster.max_restarts in the job config") +
        " to allow more";
    finish_job(1, msg);
    return {grpc::StatusCode::FAILED_PRECONDITION, msg};
  }

  RankState& me = ranks_[rank];
  me = RankState{};
  me.registered = true;
  me.in_register = true;
  me.registration_id = next_registration_id_++;
  me.hostname = request->hostname();
  me.device = request->device();
  me.pid = request->pid();
  me.metrics_port = request->metrics_port();
  me.rendezvous_address = request->rendezvous_address();
  me.nccl_unique_id = request->nccl_unique_id();
  me.resume_request = request->resume_point().checkpoint();
  me.restart_count = request->restart_count();
  me.last_seen = now;
  const std::uint64_t my_id = me.registration_id;
  const int registered = count_registered();
  LF_INFO("rank " << rank << " registered: host " << me.hostname << " pid " << me.pid << " device "
                  << me.device << " (" << registered << "/" << world_size_ << " of generation "
                  << generation_ + 1 << ")");
  if (registered == world_size_) complete_registration(now);
  update_membership_metrics(now);

  // Wait for the others: until the client's deadline or registration_timeout, whichever first.
  const auto client_left = context->deadline() - std::chrono::system_clock::now();
  auto wait_for = options_.registration_timeout;
  if (client_left < wait_for) {
    wait_for = std::max(std::chrono::milliseconds(0),
                        std::chrono::duration_cast<std::chrono::milliseconds>(client_left));
  }
  const Clock::time_point deadline = now + wait_for;
  auto mine = [&] { return ranks_[rank].registration_id == my_id; };
  while (!registration_complete_ && !shutting_down_ && !done_ && mine()) {
    if (context->IsCancelled()) break;
    now = Clock::now();
    if (now >= deadline) break;
    // Short slices so a client that went away is noticed.
    cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(100)));
  }
  if (registration_complete_ && mine()) {
    ranks_[rank].in_register = false;
    ranks_[rank].last_seen = Clock::now();
    if (!group_resume_status_.ok()) return group_resume_status_;
    fill_register_response(rank, response);
    return grpc::Status::OK;
  }
  if (!mine()) {
    // The generation this call was forming ended or failed meanwhile (e.g. another restart).
    if (shutting_down_) return {grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down"};
    if (done_) return {grpc::StatusCode::FAILED_PRECONDITION, "the job has ended"};
    return {grpc::StatusCode::ABORTED, "Register of rank " + std::to_string(rank) +
                                           ": generation " + std::to_string(generation_) +
                                           " ended while it formed; register again"};
  }

  // Not complete: withdraw this rank so a retry can register again.
  const std::string missing = unregistered_ranks(ranks_);
  const int others = count_registered() - 1;
  const int ws = world_size_;
  ranks_[rank] = RankState{};
  if (others == 0 && !world_size_fixed_ && generation_ == 0) {
    world_size_ = 0;
    ranks_.clear();
    job_.clear_world_size();
    metrics_.set_job(0, 0, 0);
    persist("world_size", [&](StateStore& st) { st.set_world_size(0); });
  }
  update_membership_metrics(Clock::now());
  if (shutting_down_) return {grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down"};
  if (done_) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "Register from rank " + std::to_string(rank) + ": the job has ended"};
  }
  if (context->IsCancelled()) {
    LF_WARN("rank " << rank << " gave up waiting for registration (client cancelled)");
    return {grpc::StatusCode::CANCELLED, "Register cancelled by the client"};
  }
  const std::string msg = "registration of rank " + std::to_string(rank) + " timed out after " +
                          seconds_text(wait_for) + ": " + std::to_string(others) + " of the " +
                          std::to_string(ws - 1) + " other ranks registered (missing ranks: " +
                          missing + ")";
  LF_WARN(msg);
  return {grpc::StatusCode::DEADLINE_EXCEEDED, msg};
}

grpc::Status CoordinatorService::GetDataset(grpc::ServerContext* context,
                                            const pb::GetDatasetRequest*,
                                            pb::DatasetManifest* response) {
  if (grpc::Status st = auth_.check(*context, "GetDataset"); !st.ok()) return st;
  metrics_.count_rpc("GetDataset");
  // The manifest does not depend on world_size; it is served at any time.
  *response = manifest_;
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::GetEpochPlan(grpc::ServerContext* context,
                                              const pb::GetEpochPlanRequest* request,
                                              pb::EpochPlan* response) {
  if (grpc::Status st = auth_.check(*context, "GetEpochPlan"); !st.ok()) return st;
  metrics_.count_rpc("GetEpochPlan");
  const int epoch = request->epoch();
  int world_size = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!registration_complete_) {
      return {grpc::StatusCode::FAILED_PRECONDITION,
              "GetEpochPlan(" + std::to_string(epoch) + ") before all ranks registered (" +
                  std::to_string(count_registered()) + " of " +
                  (world_size_ > 0 ? std::to_string(world_size_) : std::string("?")) + ")"};
    }
    world_size = world_size_;
  }
  std::shared_ptr<const EpochPlan> plan;
  try {
    if (request->world_size() > 0) {
      // The full plan for another world size, e.g. the one a checkpoint was trained on.
      to_proto(job_.full_epoch_plan(epoch, request->world_size()), response);
      return grpc::Status::OK;
    }
    plan = job_.epoch_plan(epoch);
  } catch (const std::out_of_range& e) {
    return {grpc::StatusCode::INVALID_ARGUMENT, std::string("GetEpochPlan: ") + e.what()};
  } catch (const std::invalid_argument& e) {
    return {grpc::StatusCode::INVALID_ARGUMENT, std::string("GetEpochPlan: ") + e.what()};
  } catch (const std::exception& e) {
    return {grpc::StatusCode::INTERNAL, std::string("GetEpochPlan: ") + e.what()};
  }
  to_proto(*plan, response);
  {
    // Once per epoch (every rank asks): a restarted coordinator checks its plans against these.
    std::lock_guard<std::mutex> lock(mutex_);
    if (world_size == world_size_ && plans_recorded_.insert(epoch).second) {
      const std::string digest = epoch_plan_digest(*plan);
      persist("the epoch plan", [&](StateStore& st) { st.record_plan(epoch, world_size, digest); });
    }
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ReportProgress(grpc::ServerContext* context,
                                                const pb::ProgressReport* request,
                                                pb::ProgressAck* response) {
  if (grpc::Status st = auth_.check(*context, "ReportProgress"); !st.ok()) return st;
  metrics_.count_rpc("ReportProgress");
  std::lock_guard<std::mutex> lock(mutex_);
  const int rank = request->rank();
  // A report without a generation (an older client) belongs to the newest one.
  const std::uint64_t g = request->generation() != 0 ? request->generation() : generation_;
  if (grpc::Status st = check_generation(g, rank, "ReportProgress"); !st.ok()) {
    // Answered, not refused: the heartbeat of a superseded group learns it must stop.
    response->set_stop(true);
    response->set_stop_reason(st.error_message());
    return grpc::Status::OK;
  }
  if (grpc::Status st = check_running_rank(rank, "ReportProgress"); !st.ok()) return st;
  RankState& s = ranks_[rank];
  const Clock::time_point now = Clock::now();
  metrics_.add_samples(request->samples() - s.samples);
  s.last_seen = now;
  s.stall_warned = false;
  s.global_step = request->global_step();
  s.epoch = request->epoch();
  s.loss = request->loss();
  s.learning_rate = request->learning_rate();
  s.samples = std::max(s.samples, request->samples());
  s.samples_per_second = request->samples_per_second();
  s.step_seconds = request->timings().step_seconds();
  // Rank 0's reports only: every rank reports the same global loss, and a slower rank's report
  // of an earlier step would read as a re-run and drop the later points.
  if (rank == 0 && s.global_step > 0) {
    history_.add({s.global_step, request->loss(), request->learning_rate()});
  }
  if (request->validation_step() > 0 && request->validation_step() != validation_step_) {
    validation_step_ = request->validation_step();
    validation_loss_ = request->validation_loss();
    validation_history_.add({validation_step_, validation_loss_, 0.0});
    metrics_.set_validation_loss(validation_loss_);
  }
  progress_dirty_ = true;
  metrics_.set_rank_progress(rank, s.global_step, s.samples_per_second,
                             request->timings().step_seconds(),
                             request->timings().allreduce_seconds(),
                             request->timings().data_wait_seconds());
  update_progress_metrics();
  update_membership_metrics(now);
  if (done_ || shutting_down_) {
    response->set_stop(true);
    response->set_stop_reason(done_ && !shutting_down_ ? "the job has ended"
                                                       : "the coordinator is shutting down");
  }
  fill_operator_requests(response);
  return grpc::Status::OK;
}

void CoordinatorService::fill_operator_requests(pb::ProgressAck* ack) const {
  if (control_ == nullptr) return;
  const OperatorRequests r = control_->requests();
  ack->set_operator_stop(r.stop);
  ack->set_operator_cancel(r.cancel);
  ack->set_sample_now_id(r.sample_now);
  ack->set_operator_reason(r.reason);
}

void CoordinatorService::finish_cancelled(const std::string& how) {
  const std::string reason = control_ != nullptr ? control_->requests().reason : "cancel";
  std::string checkpoint = last_committed_step_ >= 0 ? "the checkpoint of global_step " +
                                                           std::to_string(last_committed_step_) +
                                                           " stays the resume point"
                                                     : "no checkpoint was committed";
  finish_job(kExitCancelled, "cancelled (" + reason + "; " + how + "); " + checkpoint);
}

void CoordinatorService::on_cancel_requested() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_) return;
  if (!registration_complete_) finish_cancelled("no generation was training");
}

void CoordinatorService::on_stop_requested() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_ || generation_ > 0 || registration_complete_) return;
  finish_job(0, "stopped before any rank trained (" +
                    (control_ != nullptr ? control_->requests().reason : std::string("stop")) +
                    "): nothing to checkpoint");
}

grpc::Status CoordinatorService::CommitCheckpoint(grpc::ServerContext* context,
                                                  const pb::CheckpointReport* request,
                                                  pb::CheckpointAck* response) {
  if (grpc::Status st = auth_.check(*context, "CommitCheckpoint"); !st.ok()) return st;
  metrics_.count_rpc("CommitCheckpoint");
  std::lock_guard<std::mutex> lock(mutex_);
  const int rank = request->rank();
  const std::int64_t step = request->global_step();
  if (grpc::Status st = check_generation(request->generation(), rank, "CommitCheckpoint");
      !st.ok()) {
    return st;
  }
  if (grpc::Status st = check_running_rank(rank, "CommitCheckpoint"); !st.ok()) return st;
  if (step < 0) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "CommitCheckpoint from rank " + std::to_string(rank) +
                ": global_step must be >= 0, got " + std::to_string(step)};
  }
  ranks_[rank].last_seen = Clock::now();
  if (committed_steps_.count(step) > 0) {
    response->set_committed(true);  // a retry after the commit
    return grpc::Status::OK;
  }
  std::set<int>& reported = checkpoint_ranks_[step];
  reported.insert(rank);
  std::string& path = checkpoint_paths_[step];
  if (path.empty() || rank == 0) path = request->path();  // rank 0's file names the checkpoint
  LF_DEBUG("checkpoint step " << step << ": rank " << rank << " durable (" << reported.size()
                              << "/" << world_size_ << ")");
  if (static_cast<int>(reported.size()) < world_size_) {
    persist("a checkpoint report",
            [&](StateStore& st) { st.record_checkpoint_report(step, rank, request->path()); });
    response->set_committed(false);
    return grpc::Status::OK;
  }
  // Durable before acknowledged: a restarted coordinator must know every commit it confirmed.
  if (store_ != nullptr) {
    try {
      store_->record_commit(step, path);
    } catch (const std::exception& e) {
      reported.erase(rank);
      LF_ERROR("cannot record the commit of checkpoint step " << step << ": " << e.what());
      return {grpc::StatusCode::UNAVAILABLE,
              std::string("cannot record the checkpoint commit: ") + e.what()};
    }
  }
  LF_INFO("checkpoint step " << step << " committed: " << path);
  committed_steps_.insert(step);
  if (step >= last_committed_step_) last_committed_path_ = path;
  last_committed_step_ = std::max(last_committed_step_, step);
  metrics_.checkpoint_committed(last_committed_step_);
  // Older pending steps can no longer complete in lockstep training.
  checkpoint_ranks_.erase(checkpoint_ranks_.begin(), checkpoint_ranks_.upper_bound(step));
  checkpoint_paths_.erase(checkpoint_paths_.begin(), checkpoint_paths_.upper_bound(step));
  response->set_committed(true);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Finish(grpc::ServerContext* context,
                                        const pb::FinishRequest* request, pb::FinishAck*) {
  if (grpc::Status st = auth_.check(*context, "Finish"); !st.ok()) return st;
  metrics_.count_rpc("Finish");
  std::lock_guard<std::mutex> lock(mutex_);
  const int rank = request->rank();
  const std::uint64_t g = request->generation();
  if (g != 0 && g == generation_ && !registration_complete_ && !done_) {
    // The rest of a generation that already ended (its other ranks stopping): nothing changes.
    LF_INFO("rank " << rank << " of ended generation " << g << " finished ("
                    << (request->preempted() ? "preempted"
                        : request->ok()      ? "ok"
                                             : "failed")
                    << ")");
    return grpc::Status::OK;
  }
  if (!registration_complete_ && !done_ && !request->ok() && request->permanent() &&
      check_rank(rank, "Finish").ok()) {
    // Bad input before the group formed (a rank's exit 3 while the others wait in Register):
    // the group can never form with it, so the job ends now instead of at the rendezvous
    // timeout.
    finish_job(kExitBadInput,
               "rank " + std::to_string(rank) +
                   " stopped on bad input before its group formed (exit 3; a restart would "
                   "fail the same way): " +
                   request->error());
    return grpc::Status::OK;
  }
  if (grpc::Status st = check_generation(g, rank, "Finish"); !st.ok()) return st;
  if (grpc::Status st = check_running_rank(rank, "Finish"); !st.ok()) return st;
  RankState& s = ranks_[rank];
  const Clock::time_point now = Clock::now();
  s.last_seen = now;
  if (s.finished) return grpc::Status::OK;  // a retried Finish
  s.finished = true;
  s.ok = request->ok();
  s.preempted = request->preempted();
  s.stopped = request->stopped();
  s.cancelled = request->cancelled();
  s.error = request->error();
  s.global_step = std::max(s.global_step, request->global_step());
  persist("a rank's finish",
          [&](StateStore& st) { st.record_rank_finished(rank, s.ok, s.preempted); });
  update_progress_metrics();
  if (s.cancelled) {
    LF_WARN("rank " << rank << " exits on the operator's cancel at global_step " << s.global_step);
    finish_cancelled("rank " + std::to_string(rank) + " exited at global_step " +
                     std::to_string(s.global_step));
  } else if (!s.ok && request->permanent()) {
    // Bad input (the worker exits 3): a restarted group would fail the same way, so the job
    // ends now, recorded as done like a group that never re-forms: the fixed config (another
    // job id) then starts without removing the state, and the checkpoints stay for --resume.
    finish_job(
        kExitBadInput,
        "rank " + std::to_string(rank) + " (host " + s.hostname +
            ") stopped on bad input (exit 3; a restart would fail the same way): " + s.error);
  } else if (!s.ok) {
    // A failing worker may not know its step (it reports 0): use the last one it reported.
    LF_ERROR("rank " << rank << " (" << s.hostname << ") failed at global_step "
                     << s.global_step << ": " << s.error);
    end_generation("worker_failed",
                   "rank " + std::to_string(rank) + " (host " + s.hostname +
                       ") failed at "
                       "global_step " +
                       std::to_string(s.global_step) + ": " + s.error,
                   now);
  } else if (s.preempted) {
    LF_WARN("rank " << rank << " was preempted at global_step " << s.global_step);
    end_generation("preemption",
                   "rank " + std::to_string(rank) + " was preempted at global_step " +
                       std::to_string(s.global_step),
                   now);
  } else {
    LF_INFO("rank " << rank << " finished at global_step " << request->global_step());
    const bool all =
        std::all_of(ranks_.begin(), ranks_.end(), [](const RankState& r) { return r.finished; });
    if (all && s.stopped) {
      finish_job(0, "stopped at global_step " + std::to_string(s.global_step) + " (" +
                        (control_ != nullptr ? control_->requests().reason : "SIGINT") +
                        "): checkpoint committed, LoRA written; --resume continues from it");
    } else if (all) {
      finish_job(0, "all " + std::to_string(world_size_) + " ranks of generation " +
                        std::to_string(generation_) + " finished");
    }
  }
  update_membership_metrics(now);
  return grpc::Status::OK;
}

// ---- job end and background checks -------------------------------------------------------

int CoordinatorService::wait_until_done() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return done_; });
  return exit_code_;
}

std::optional<int> CoordinatorService::wait_until_done_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [this] { return done_; })) return std::nullopt;
  return exit_code_;
}

void CoordinatorService::shutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  shutting_down_ = true;
  if (!done_ && generation_ == 0 && count_registered() == 0) {
    done_ = true;  // nothing ran: no failure to report
    exit_code_ = 1;
  }
  if (!done_) finish_job(1, "stopped before all ranks finished", /*durable=*/false);
  cv_.notify_all();
}

std::int64_t CoordinatorService::last_committed_step() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_committed_step_;
}

std::uint64_t CoordinatorService::generation() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return generation_;
}

int CoordinatorService::registered_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return count_registered();
}

std::string CoordinatorService::end_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return end_reason_;
}

bool CoordinatorService::generation_running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return registration_complete_;
}

std::int64_t CoordinatorService::restarts(const std::string& cause) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = restarts_.find(cause);
  return it == restarts_.end() ? 0 : it->second;
}

void CoordinatorService::tick_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_ticker_) {
    cv_.wait_for(lock, options_.tick);
    if (stop_ticker_) break;
    const Clock::time_point now = Clock::now();
    update_membership_metrics(now);
    if (done_) continue;
    // Ranks that never heard the cancel (wedged, or between heartbeats for long) are not
    // waited for.
    if (control_ != nullptr && control_->cancel_overdue(now, kCancelWait)) {
      finish_cancelled("no rank reported its exit within " + seconds_text(kCancelWait));
      continue;
    }
    if (registration_complete_) {
      for (std::size_t r = 0; r < ranks_.size(); ++r) {
        RankState& s = ranks_[r];
        if (!s.registered || s.finished) continue;
        if (now - s.last_seen >= options_.worker_timeout) {
          end_generation("worker_lost",
                         "rank " + std::to_string(r) + " (host " + s.hostname + ", pid " +
                             std::to_string(s.pid) + ") silent for " +
                             seconds_text(options_.worker_timeout) + " (last global_step " +
                             std::to_string(s.global_step) +
                             "): presumed lost (coordinator.worker_timeout_seconds)",
                         now);
          break;
        }
        if (s.stall_warned) continue;
        if (now - s.last_seen >= options_.stall_warning) {
          s.stall_warned = true;
          LF_WARN("rank " << r << " (host " << s.hostname << ", pid " << s.pid
                          << ") silent for " << seconds_text(options_.stall_warning)
                          << " (last global_step " << s.global_step << ")");
        }
      }
    } else if (rendezvous_deadline_ && now >= *rendezvous_deadline_) {
      if (finished_before_) {
        finish_job(0,
                   describe(*finished_before_) + "; no group registered within " +
                       seconds_text(options_.rendezvous_timeout) +
                       " (cluster.rendezvous_timeout_seconds)",
                   /*durable=*/false);  // the record stays as the job's own end left it
        continue;
      }
      const std::string missing = unregistered_ranks(ranks_);
      finish_job(1, "generation " + std::to_string(generation_ + 1) + " did not form within " +
                        seconds_text(options_.rendezvous_timeout) +
                        " (cluster.rendezvous_timeout_seconds): missing ranks " + missing +
                        " (generation " + std::to_string(generation_) + " ended: " + end_detail_ +
                        ")");
      continue;
    }
    if (progress_dirty_ && store_ != nullptr && registration_complete_) {
      // One batched write a tick, outside mutex_ so no RPC waits on the fsync.
      std::map<int, StoredProgress> batch;
      for (std::size_t r = 0; r < ranks_.size(); ++r) {
        if (ranks_[r].registered)
          batch[static_cast<int>(r)] = {ranks_[r].global_step, ranks_[r].samples};
      }
      progress_dirty_ = false;
      lock.unlock();
      try {
        store_->record_progress(batch);
      } catch (const std::exception& e) {
        LF_ERROR("cannot record progress: " << e.what());
      }
      lock.lock();
    }
  }
}

}  // namespace lf
