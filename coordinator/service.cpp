// CoordinatorService: registration barrier with deadlines, generations, per-rank progress and
// liveness, checkpoint commit counting and job completion. Every handler takes mutex_ for its
// whole body except plan building, which CoordinatorJob serializes on its own.
#include "coordinator/service.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "common/util/log.h"
#include "proto/proto_convert.h"

namespace lf {
namespace pb = lorafleet::v1;

static std::string seconds_text(std::chrono::milliseconds d) {
  std::ostringstream os;
  os << static_cast<double>(d.count()) / 1000.0 << " s";
  return os.str();
}

CoordinatorService::CoordinatorService(CoordinatorJob& job, CoordinatorMetrics& metrics,
                                       const ServiceOptions& options)
    : job_(job), metrics_(metrics), options_(options) {
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

// ---- helpers (mutex_ held) ---------------------------------------------------------------

bool CoordinatorService::is_alive(const RankState& s, Clock::time_point now) const {
  return s.registered && !s.finished &&
         (s.in_register || now - s.last_seen <= options_.alive_window);
}

int CoordinatorService::count_registered() const {
  return static_cast<int>(
      std::count_if(ranks_.begin(), ranks_.end(), [](const RankState& s) { return s.registered; }));
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

void CoordinatorService::start_new_generation() {
  registration_complete_ = false;
  for (RankState& s : ranks_) s = RankState{};
  checkpoint_ranks_.clear();
  checkpoint_paths_.clear();
  failure_deadline_.reset();
}

void CoordinatorService::finish_job(int exit_code, const std::string& why) {
  if (done_) return;
  done_ = true;
  exit_code_ = exit_code;
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
  const JobSchedule s = job_.schedule();
  const JobConfig& c = job_.config();
  response->set_rank(rank);
  response->set_world_size(world_size_);
  response->set_job_config_yaml(c.yaml_text);
  response->set_job_config_name(c.source_name);
  response->set_base_dir(base_dir_);
  response->set_dataset_config_toml(c.dataset_config_text);
  response->set_shared_seed(job_.shared_seed());
  response->set_max_train_steps(s.max_train_steps);
  response->set_num_epochs(s.num_epochs);
  response->set_generation(generation_);
  if (!ranks_.empty()) {  // env-mode rendezvous: rank 0's store address and NCCL id, relayed
    response->set_rendezvous_address(ranks_[0].rendezvous_address);
    response->set_nccl_unique_id(ranks_[0].nccl_unique_id);
  }
}

// ---- RPCs --------------------------------------------------------------------------------

grpc::Status CoordinatorService::Register(grpc::ServerContext* context,
                                          const pb::RegisterRequest* request,
                                          pb::RegisterResponse* response) {
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
  if (rank < 0 || rank >= requested_ws) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "Register: rank " + std::to_string(rank) + " is outside [0, world_size " +
                std::to_string(requested_ws) + ")"};
  }
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
    LF_INFO("world_size " << world_size_ << " (from the registration of rank " << rank << ")");
  } else if (requested_ws != world_size_) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "rank " + std::to_string(rank) + " registered with world_size " +
                std::to_string(requested_ws) + ", but the job's world_size is " +
                std::to_string(world_size_) +
                (world_size_fixed_ ? " (--world-size)" : " (from the first registration)")};
  }

  Clock::time_point now = Clock::now();
  RankState& me = ranks_[rank];
  if (me.registered && is_alive(me, now)) {
    return {grpc::StatusCode::ALREADY_EXISTS,
            "rank " + std::to_string(rank) + " is already registered (host " + me.hostname +
                ", pid " + std::to_string(me.pid) + ") and alive; is another job using this "
                "coordinator?"};
  }
  if (registration_complete_) {
    // A restarted job: allowed only once no rank of the running generation is alive.
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      if (is_alive(ranks_[r], now)) {
        return {grpc::StatusCode::FAILED_PRECONDITION,
                "rank " + std::to_string(rank) + " cannot join: generation " +
                    std::to_string(generation_) + " is still running (rank " + std::to_string(r) +
                    " was seen within " + seconds_text(options_.alive_window) + ")"};
      }
    }
    LF_WARN("rank " << rank << " re-registered and no rank of generation " << generation_
                    << " is alive: starting registration of generation " << generation_ + 1);
    start_new_generation();
  }

  me = RankState{};
  me.registered = true;
  me.in_register = true;
  me.hostname = request->hostname();
  me.device = request->device();
  me.pid = request->pid();
  me.metrics_port = request->metrics_port();
  me.rendezvous_address = request->rendezvous_address();
  me.nccl_unique_id = request->nccl_unique_id();
  me.last_seen = now;
  const int registered = count_registered();
  LF_INFO("rank " << rank << " registered: host " << me.hostname << " pid " << me.pid
                  << " device " << me.device << " (" << registered << "/" << world_size_ << ")");
  if (registered == world_size_) {
    registration_complete_ = true;
    ++generation_;
    for (RankState& s : ranks_) s.last_seen = now;
    LF_INFO("all " << world_size_ << " ranks registered: generation " << generation_
                   << ", shared seed " << job_.shared_seed());
    cv_.notify_all();
  }
  update_membership_metrics(now);

  // Wait for the others: until the client's deadline or registration_timeout, whichever first.
  const auto client_left = context->deadline() - std::chrono::system_clock::now();
  auto wait_for = options_.registration_timeout;
  if (client_left < wait_for) {
    wait_for = std::max(std::chrono::milliseconds(0),
                        std::chrono::duration_cast<std::chrono::milliseconds>(client_left));
  }
  const Clock::time_point deadline = now + wait_for;
  while (!registration_complete_ && !shutting_down_ && !done_) {
    if (context->IsCancelled()) break;
    now = Clock::now();
    if (now >= deadline) break;
    // Short slices so a client that went away is noticed.
    cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(100)));
  }
  if (registration_complete_ && ranks_[rank].registered) {
    ranks_[rank].in_register = false;
    ranks_[rank].last_seen = Clock::now();
    fill_register_response(rank, response);
    return grpc::Status::OK;
  }

  // Not complete: withdraw this rank so a retry can register again.
  std::string missing;
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    if (!ranks_[r].registered) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  }
  const int others = count_registered() - 1;
  const int ws = world_size_;
  ranks_[rank] = RankState{};
  if (others == 0 && !world_size_fixed_) {
    world_size_ = 0;
    ranks_.clear();
    job_.clear_world_size();
    metrics_.set_job(0, 0, 0);
  }
  update_membership_metrics(Clock::now());
  if (shutting_down_ || done_) {
    return {grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down"};
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

grpc::Status CoordinatorService::GetDataset(grpc::ServerContext*, const pb::GetDatasetRequest*,
                                            pb::DatasetManifest* response) {
  // The manifest does not depend on world_size; it is served at any time.
  *response = manifest_;
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::GetEpochPlan(grpc::ServerContext*,
                                              const pb::GetEpochPlanRequest* request,
                                              pb::EpochPlan* response) {
  const int epoch = request->epoch();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!registration_complete_) {
      return {grpc::StatusCode::FAILED_PRECONDITION,
              "GetEpochPlan(" + std::to_string(epoch) + ") before all ranks registered (" +
                  std::to_string(count_registered()) + " of " +
                  (world_size_ > 0 ? std::to_string(world_size_) : std::string("?")) + ")"};
    }
  }
  std::shared_ptr<const EpochPlan> plan;
  try {
    plan = job_.epoch_plan(epoch);
  } catch (const std::out_of_range& e) {
    return {grpc::StatusCode::INVALID_ARGUMENT, std::string("GetEpochPlan: ") + e.what()};
  } catch (const std::exception& e) {
    return {grpc::StatusCode::INTERNAL, std::string("GetEpochPlan: ") + e.what()};
  }
  to_proto(*plan, response);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ReportProgress(grpc::ServerContext*,
                                                const pb::ProgressReport* request,
                                                pb::ProgressAck* response) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int rank = request->rank();
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
  metrics_.set_rank_progress(rank, s.global_step, s.samples_per_second,
                             request->timings().step_seconds(),
                             request->timings().allreduce_seconds(),
                             request->timings().data_wait_seconds());
  update_progress_metrics();
  update_membership_metrics(now);
  response->set_stop(done_ || shutting_down_ || failure_deadline_.has_value());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::CommitCheckpoint(grpc::ServerContext*,
                                                  const pb::CheckpointReport* request,
                                                  pb::CheckpointAck* response) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int rank = request->rank();
  const std::int64_t step = request->global_step();
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
    response->set_committed(false);
    return grpc::Status::OK;
  }
  LF_INFO("checkpoint step " << step << " committed: " << path);
  committed_steps_.insert(step);
  last_committed_step_ = std::max(last_committed_step_, step);
  metrics_.checkpoint_committed(last_committed_step_);
  // Older pending steps can no longer complete in lockstep training.
  checkpoint_ranks_.erase(checkpoint_ranks_.begin(), checkpoint_ranks_.upper_bound(step));
  checkpoint_paths_.erase(checkpoint_paths_.begin(), checkpoint_paths_.upper_bound(step));
  response->set_committed(true);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Finish(grpc::ServerContext*, const pb::FinishRequest* request,
                                        pb::FinishAck*) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int rank = request->rank();
  if (grpc::Status st = check_running_rank(rank, "Finish"); !st.ok()) return st;
  RankState& s = ranks_[rank];
  const Clock::time_point now = Clock::now();
  s.last_seen = now;
  if (s.finished) return grpc::Status::OK;  // a retried Finish
  s.finished = true;
  s.ok = request->ok();
  s.error = request->error();
  s.global_step = std::max(s.global_step, request->global_step());
  if (s.ok) {
    LF_INFO("rank " << rank << " finished at global_step " << request->global_step());
  } else {
    // A failing worker may not know its step (it reports 0): use the last one it reported.
    LF_ERROR("rank " << rank << " (" << s.hostname << ") failed at global_step "
                     << s.global_step << ": " << s.error);
    if (!failure_deadline_) {
      failure_deadline_ = now + options_.failure_grace;
      LF_WARN("asking the other ranks to stop; the job ends when they finish or in "
              << seconds_text(options_.failure_grace));
    }
  }
  update_progress_metrics();
  update_membership_metrics(now);
  int finished = 0;
  bool all_ok = true;
  for (const RankState& r : ranks_) {
    if (r.finished) ++finished;
    if (r.finished && !r.ok) all_ok = false;
  }
  if (finished == world_size_) {
    finish_job(all_ok ? 0 : 1, "all " + std::to_string(world_size_) + " ranks finished" +
                                   (all_ok ? "" : ", some with errors"));
  }
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
  if (!done_) finish_job(1, "stopped before all ranks finished");
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

void CoordinatorService::tick_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_ticker_) {
    cv_.wait_for(lock, options_.tick);
    if (stop_ticker_) break;
    const Clock::time_point now = Clock::now();
    update_membership_metrics(now);
    if (done_) continue;
    if (registration_complete_) {
      for (std::size_t r = 0; r < ranks_.size(); ++r) {
        RankState& s = ranks_[r];
        if (!s.registered || s.finished) continue;
        if (now - s.last_seen >= options_.worker_timeout) {
          finish_job(1, "rank " + std::to_string(r) + " (host " + s.hostname + ", pid " +
                            std::to_string(s.pid) + ") silent for " +
                            seconds_text(options_.worker_timeout) + " (last global_step " +
                            std::to_string(s.global_step) +
                            "): presumed dead (coordinator.worker_timeout_seconds)");
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
    }
    if (failure_deadline_ && now >= *failure_deadline_) {
      std::string running;
      for (std::size_t r = 0; r < ranks_.size(); ++r) {
        if (!ranks_[r].finished) running += (running.empty() ? "" : ", ") + std::to_string(r);
      }
      finish_job(1, "a rank failed and ranks " + running + " did not finish within " +
                        seconds_text(options_.failure_grace));
    }
  }
}

}  // namespace lf
