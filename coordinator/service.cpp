// CoordinatorService: the gRPC side of the coordinator (see header). Every handler checks the
// token, then takes mutex_ for its whole body except plan building, which CoordinatorJob
// serializes on its own, and the rendezvous store's blocking calls. Membership, GroupResume and
// CheckpointCommits decide; this file translates, records the transitions in the StateStore and
// exports metrics. Progress reaches the store only through the ticker's batched write (~1/s),
// outside mutex_, so a report never waits on an fsync. The restore of a stored job is
// service_restore.cpp, the status snapshot service_status.cpp.
#include "coordinator/service.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <utility>

#include "common/util/exit_codes.h"
#include "common/util/log.h"
#include "coordinator/rendezvous_handler.h"
#include "proto/proto_convert.h"

namespace lf {
namespace pb = lorafleet::v1;

std::string seconds_text(std::chrono::milliseconds d) {
  std::ostringstream os;
  os << static_cast<double>(d.count()) / 1000.0 << " s";
  return os.str();
}

namespace {

// How long a cancel waits for a rank to report its exit: two worker heartbeats (5 s each) and
// a margin.
constexpr std::chrono::milliseconds kCancelWait = std::chrono::seconds(15);

bool is_restart_cause(const std::string& cause) {
  const auto& causes = CoordinatorMetrics::kRestartCauses;
  return std::find(causes.begin(), causes.end(), cause) != causes.end();
}

MembershipOptions membership_options(const ServiceOptions& o) {
  MembershipOptions m;
  m.alive_window = o.alive_window;
  m.stall_warning = o.stall_warning;
  m.worker_timeout = o.worker_timeout;
  m.rendezvous_timeout = o.rendezvous_timeout;
  m.max_restarts = o.max_restarts;
  return m;
}

// The slot a Register call asks for.
Membership::Rank registrant(const pb::RegisterRequest& r) {
  Membership::Rank me;
  me.hostname = r.hostname();
  me.device = r.device();
  me.pid = r.pid();
  me.metrics_port = r.metrics_port();
  me.nccl_unique_id = r.nccl_unique_id();
  me.resume_request = r.resume_point().checkpoint();
  me.restart_count = r.restart_count();
  return me;
}

}  // namespace

CoordinatorService::CoordinatorService(CoordinatorJob& job, CoordinatorMetrics& metrics,
                                       const ServiceOptions& options, StateStore* store,
                                       OperatorControl* control)
    : job_(job),
      metrics_(metrics),
      options_(options),
      auth_(options.job_token),
      store_(store),
      control_(control),
      group_resume_planner_(job),
      members_(membership_options(options)) {
  base_dir_ = options_.base_dir.empty() ? std::filesystem::current_path().string()
                                        : std::filesystem::absolute(options_.base_dir).string();
  to_proto(job_.dataset(), &manifest_);
  if (options_.world_size > 0) {
    const JobSchedule s = job_.set_world_size(options_.world_size);
    members_.fix_world_size(options_.world_size);
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

// ---- helpers (mutex_ held) ---------------------------------------------------------------

grpc::Status CoordinatorService::status_of(const std::optional<Refusal>& refusal) {
  if (!refusal) return grpc::Status::OK;
  switch (refusal->code) {
    case Refusal::Code::kInvalidArgument:
      return {grpc::StatusCode::INVALID_ARGUMENT, refusal->message};
    case Refusal::Code::kAborted: return {grpc::StatusCode::ABORTED, refusal->message};
    case Refusal::Code::kFailedPrecondition: break;
  }
  return {grpc::StatusCode::FAILED_PRECONDITION, refusal->message};
}

void CoordinatorService::log_persist_failure(const char* what, const std::exception& e) {
  LF_ERROR("cannot record " << what << ": " << e.what());
}

void CoordinatorService::complete_registration(Clock::time_point now) {
  const std::string restart_cause = members_.complete_registration(now);
  if (!restart_cause.empty()) metrics_.add_restarts(restart_cause);
  commits_.drop_pending();
  // What the group resumes from decides the schedule, so it is planned before the assignment.
  group_resume_status_ = plan_group_resume();
  if (!group_resume_status_.ok()) {
    // Bad input (a foreign, changed or missing checkpoint, ranks asking different things): a
    // restarted group would be refused the same way.
    finish_job(kExitBadInput, group_resume_status_.error_message());
    cv_.notify_all();
    return;
  }
  const JobSchedule s = job_.schedule();
  const JobConfig& c = job_.config();
  assignment_.Clear();
  assignment_.set_world_size(members_.world_size());
  assignment_.set_job_config_yaml(c.yaml_text);
  assignment_.set_job_config_name(c.source_name);
  assignment_.set_base_dir(base_dir_);
  assignment_.set_dataset_config_toml(c.dataset_config_text);
  assignment_.set_sample_prompts_text(c.sample_prompts_text);
  assignment_.set_shared_seed(job_.shared_seed());
  assignment_.set_max_train_steps(s.max_train_steps);
  assignment_.set_num_epochs(s.num_epochs);
  assignment_.set_generation(members_.generation());
  // Env mode on GPUs: rank 0's NCCL id, relayed to every rank. Gloo ranks meet in the
  // generation's rendezvous store instead.
  assignment_.set_nccl_unique_id(members_.rank(0).nccl_unique_id);
  open_rendezvous_store();
  if (group_resume_) to_proto(*group_resume_, assignment_.mutable_resume_point());
  // Requests before a restarted generation were done (or moot): it counts on from here. The
  // first generation takes the ones made while it registered.
  if (control_ != nullptr && members_.generation() > 1) {
    assignment_.set_sample_now_id(control_->requests().sample_now);
  }
  std::vector<StoredRank> stored;
  for (int r = 0; r < members_.world_size(); ++r) {
    const Membership::Rank& rs = members_.rank(r);
    stored.push_back({r, rs.hostname, rs.pid, rs.device, rs.metrics_port, false, true, false});
  }
  const std::string blob = assignment_.SerializeAsString();
  persist("the new generation", [&](StateStore& st) {
    st.record_generation_formed(members_.generation(), members_.world_size(), blob, stored,
                                restart_cause);
  });
  metrics_.set_generation(members_.generation());
  LF_INFO("all " << members_.world_size() << " ranks registered: generation "
                 << members_.generation() << ", shared seed " << job_.shared_seed());
  cv_.notify_all();
}

void CoordinatorService::end_generation(const std::string& cause, const std::string& detail,
                                        Clock::time_point now) {
  if (done_ || !members_.end_generation(cause, detail, now)) return;
  commits_.drop_pending();
  if (rendezvous_) rendezvous_->close();  // ranks still waiting in it learn it is over
  rendezvous_.reset();
  LF_WARN("generation " << members_.generation() << " ended (" << cause << "): " << detail
                        << "; waiting up to " << seconds_text(options_.rendezvous_timeout)
                        << " for generation " << members_.generation() + 1
                        << " to register (cluster.rendezvous_timeout_seconds)");
  persist("the end of the generation", [&](StateStore& st) {
    st.record_generation_ended(members_.generation(), cause, detail);
  });
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
    for (int r = 0; r < members_.world_size(); ++r) {
      const Membership::Rank& s = members_.rank(r);
      if (s.finished && !s.ok) LF_ERROR("  rank " << r << " (" << s.hostname << "): " << s.error);
    }
  }
  if (durable) {
    persist("the end of the job", [&](StateStore& st) { st.record_job_done(exit_code, why); });
  }
  cv_.notify_all();
}

void CoordinatorService::update_membership_metrics(Clock::time_point now) {
  int registered = 0, alive = 0, finished = 0;
  for (int r = 0; r < members_.world_size(); ++r) {
    const Membership::Rank& s = members_.rank(r);
    registered += s.registered;
    alive += members_.is_alive(r, now);
    finished += s.finished;
    if (s.registered) {
      metrics_.set_rank_last_seen_age(r, std::chrono::duration<double>(now - s.last_seen).count());
    }
  }
  metrics_.set_workers(registered, alive, finished);
}

void CoordinatorService::update_progress_metrics() {
  const Membership::Rank* latest = nullptr;
  double samples_per_second = 0.0;
  for (const Membership::Rank& s : members_.ranks()) {
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

grpc::Status CoordinatorService::plan_group_resume() {
  std::vector<RankResumeRequest> requests;
  for (const Membership::Rank& r : members_.ranks()) {
    requests.push_back({r.resume_request, r.restart_count});
  }
  try {
    group_resume_ = group_resume_planner_.plan(requests);
  } catch (const std::exception& e) {
    group_resume_.reset();
    return {grpc::StatusCode::FAILED_PRECONDITION, e.what()};
  }
  const JobSchedule s = job_.schedule();
  metrics_.set_job(s.world_size, s.max_train_steps, s.num_epochs);
  return grpc::Status::OK;
}

// ---- registration ------------------------------------------------------------------------

grpc::Status CoordinatorService::admit(const pb::RegisterRequest& request, Clock::time_point now,
                                       std::uint64_t* registration_id) {
  const int rank = request.rank();
  // Kubernetes-native workers send 0: the job's world size (cluster.world_size / --world-size).
  const int ws = request.world_size() == 0 && members_.world_size_fixed() ? members_.world_size()
                                                                          : request.world_size();
  if (done_ || shutting_down_) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "Register from rank " + std::to_string(rank) + ": the job has already ended"};
  }
  if (ws < 1) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "Register from rank " + std::to_string(rank) + ": world_size must be >= 1, got " +
                std::to_string(ws) +
                (ws == 0 ? " (set cluster.world_size in the job config, or lorafleet-coordinator "
                           "--world-size, for workers launched without mpirun)"
                         : "")};
  }
  if (ws > kMaxWorldSize) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "Register from rank " + std::to_string(rank) + ": world_size must be <= " +
                std::to_string(kMaxWorldSize) + ", got " + std::to_string(ws)};
  }
  if (rank < 0 || rank >= ws) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "Register: rank " + std::to_string(rank) +
                                                    " is outside [0, world_size " +
                                                    std::to_string(ws) + ")"};
  }
  if (finished_before_) leave_finished_record();
  if (members_.world_size() == 0) {
    try {
      const JobSchedule s = job_.set_world_size(ws);
      metrics_.set_job(s.world_size, s.max_train_steps, s.num_epochs);
    } catch (const std::exception& e) {
      return {grpc::StatusCode::FAILED_PRECONDITION,
              "cannot plan the job for world_size " + std::to_string(ws) + ": " + e.what()};
    }
    members_.set_world_size(ws);
    plans_recorded_.clear();
    persist("world_size", [&](StateStore& st) { st.set_world_size(ws); });
    LF_INFO("world_size " << ws << " (from the registration of rank " << rank << ")");
  } else if (ws != members_.world_size()) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "rank " + std::to_string(rank) + " registered with world_size " + std::to_string(ws) +
                ", but the job's world_size is " + std::to_string(members_.world_size()) +
                (members_.world_size_fixed() ? " (--world-size or cluster.world_size)"
                 : members_.generation() > 0 ? " (of its running generations)"
                                             : " (from the first registration)")};
  }
  const Membership::Rank& held = members_.rank(rank);
  if (held.registered && held.in_register) {
    return {grpc::StatusCode::ALREADY_EXISTS,
            "rank " + std::to_string(rank) + " is already registering (host " + held.hostname +
                ", pid " + std::to_string(held.pid) +
                ") and waits for the other ranks; is another job using this coordinator?"};
  }
  if (members_.running()) {
    // The rank's previous incarnation is gone (its supervisor restarted it): the group it
    // belonged to cannot go on without it.
    const std::string& given = request.restart_cause();
    end_generation(is_restart_cause(given) ? given : "rank_restarted",
                   "rank " + std::to_string(rank) + " re-registered" +
                       (given.empty() ? std::string() : " (restart cause: " + given + ")"),
                   now);
  }
  if (request.has_max_restarts()) members_.set_launcher_budget(request.max_restarts());
  if (members_.next_restart_exceeds_budget()) {
    const std::string msg = members_.restart_budget_key() + " (" +
                            std::to_string(members_.restart_budget()) + ") exhausted: generation " +
                            std::to_string(members_.generation()) + " ended (" +
                            members_.end_cause() + ": " + members_.end_detail() + ") after " +
                            std::to_string(members_.counted_restarts()) + " restarts; raise " +
                            members_.restart_budget_hint() + " to allow more";
    finish_job(1, msg);
    return {grpc::StatusCode::FAILED_PRECONDITION, msg};
  }
  *registration_id = members_.register_rank(rank, registrant(request), now);
  const Membership::Rank& me = members_.rank(rank);
  LF_INFO("rank " << rank << " registered: host " << me.hostname << " pid " << me.pid << " device "
                  << me.device << " (" << members_.registered_count() << "/"
                  << members_.world_size() << " of generation " << members_.generation() + 1
                  << ")");
  if (members_.registered_count() == members_.world_size()) complete_registration(now);
  update_membership_metrics(now);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::registration_failed(grpc::ServerContext* context, int rank,
                                                     std::uint64_t registration_id,
                                                     std::chrono::milliseconds waited) {
  if (!members_.holds(rank, registration_id)) {
    // The generation this call was forming ended or failed meanwhile (e.g. another restart).
    if (shutting_down_) return {grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down"};
    if (done_) return {grpc::StatusCode::FAILED_PRECONDITION, "the job has ended"};
    return {grpc::StatusCode::ABORTED, "Register of rank " + std::to_string(rank) +
                                           ": generation " + std::to_string(members_.generation()) +
                                           " ended while it formed; register again"};
  }
  // Not complete: withdraw this rank so a retry can register again.
  const std::string missing = members_.missing_ranks();
  const int others = members_.registered_count() - 1;
  const int ws = members_.world_size();
  members_.withdraw(rank);
  if (others == 0 && !members_.world_size_fixed() && members_.generation() == 0) {
    members_.clear_world_size();
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
                          seconds_text(waited) + ": " + std::to_string(others) + " of the " +
                          std::to_string(ws - 1) +
                          " other ranks registered (missing ranks: " + missing + ")";
  LF_WARN(msg);
  return {grpc::StatusCode::DEADLINE_EXCEEDED, msg};
}

grpc::Status CoordinatorService::Register(grpc::ServerContext* context,
                                          const pb::RegisterRequest* request,
                                          pb::RegisterResponse* response) {
  if (grpc::Status st = auth_.check(*context, "Register"); !st.ok()) return st;
  metrics_.count_rpc("Register");
  const int rank = request->rank();
  std::unique_lock<std::mutex> lock(mutex_);
  Clock::time_point now = Clock::now();
  std::uint64_t my_id = 0;
  if (grpc::Status st = admit(*request, now, &my_id); !st.ok()) return st;

  // Wait for the others: until the client's deadline or registration_timeout, whichever first.
  const auto client_left = context->deadline() - std::chrono::system_clock::now();
  auto wait_for = options_.registration_timeout;
  if (client_left < wait_for) {
    wait_for = std::max(std::chrono::milliseconds(0),
                        std::chrono::duration_cast<std::chrono::milliseconds>(client_left));
  }
  const Clock::time_point deadline = now + wait_for;
  while (!members_.running() && !shutting_down_ && !done_ && members_.holds(rank, my_id)) {
    if (context->IsCancelled()) break;
    now = Clock::now();
    if (now >= deadline) break;
    // Short slices so a client that went away is noticed.
    cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(100)));
  }
  if (members_.running() && members_.holds(rank, my_id)) {
    Membership::Rank& me = members_.rank(rank);
    me.in_register = false;
    me.last_seen = Clock::now();
    if (!group_resume_status_.ok()) return group_resume_status_;
    fill_register_response(rank, response);
    return grpc::Status::OK;
  }
  return registration_failed(context, rank, my_id, wait_for);
}

// ---- dataset and plans -------------------------------------------------------------------

grpc::Status CoordinatorService::dataset_manifest(grpc::ServerContext* context,
                                                  const pb::DatasetManifest** manifest) {
  if (grpc::Status st = auth_.check(*context, "GetDataset"); !st.ok()) return st;
  metrics_.count_rpc("GetDataset");
  // The manifest does not depend on world_size; it is served at any time.
  *manifest = &manifest_;
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::GetDataset(grpc::ServerContext* context,
                                            const pb::GetDatasetRequest*,
                                            pb::DatasetManifest* response) {
  const pb::DatasetManifest* manifest = nullptr;
  if (grpc::Status st = dataset_manifest(context, &manifest); !st.ok()) return st;
  *response = *manifest;
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::find_epoch_plan(grpc::ServerContext* context,
                                                 const pb::GetEpochPlanRequest& request,
                                                 std::shared_ptr<const EpochPlan>* plan) {
  if (grpc::Status st = auth_.check(*context, "GetEpochPlan"); !st.ok()) return st;
  metrics_.count_rpc("GetEpochPlan");
  const int epoch = request.epoch();
  int world_size = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!members_.running() && members_.generation() > 0) {
      // The asker's generation ended (a peer failed, or it was restored ended after a
      // coordinator restart) while it waited for the plan: ABORTED, as for the reports, so the
      // worker exits 75 and its group restarts, instead of FAILED_PRECONDITION's exit 3.
      // (Register blocks until its generation runs, so no rank of a forming one asks.)
      return {grpc::StatusCode::ABORTED,
              "GetEpochPlan(" + std::to_string(epoch) + "): generation " +
                  std::to_string(members_.generation()) + " ended; the group must register again"};
    }
    if (!members_.running()) {
      return {grpc::StatusCode::FAILED_PRECONDITION,
              "GetEpochPlan(" + std::to_string(epoch) + ") before all ranks registered (" +
                  std::to_string(members_.registered_count()) + " of " +
                  (members_.world_size() > 0 ? std::to_string(members_.world_size())
                                             : std::string("?")) +
                  ")"};
    }
    world_size = members_.world_size();
  }
  try {
    if (request.world_size() > 0) {
      // The full plan for another world size, e.g. the one a checkpoint was trained on.
      *plan = std::make_shared<const EpochPlan>(job_.full_epoch_plan(epoch, request.world_size()));
      return grpc::Status::OK;
    }
    *plan = job_.epoch_plan(epoch);
  } catch (const std::out_of_range& e) {
    return {grpc::StatusCode::INVALID_ARGUMENT, std::string("GetEpochPlan: ") + e.what()};
  } catch (const std::invalid_argument& e) {
    return {grpc::StatusCode::INVALID_ARGUMENT, std::string("GetEpochPlan: ") + e.what()};
  } catch (const std::exception& e) {
    return {grpc::StatusCode::INTERNAL, std::string("GetEpochPlan: ") + e.what()};
  }
  {
    // Once per epoch (every rank asks): a restarted coordinator checks its plans against these.
    std::lock_guard<std::mutex> lock(mutex_);
    if (world_size == members_.world_size() && plans_recorded_.insert(epoch).second) {
      const std::string digest = epoch_plan_digest(**plan);
      persist("the epoch plan", [&](StateStore& st) { st.record_plan(epoch, world_size, digest); });
    }
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::GetEpochPlan(grpc::ServerContext* context,
                                              const pb::GetEpochPlanRequest* request,
                                              pb::EpochPlan* response) {
  std::shared_ptr<const EpochPlan> plan;
  if (grpc::Status st = find_epoch_plan(context, *request, &plan); !st.ok()) return st;
  to_proto(*plan, response);
  return grpc::Status::OK;
}

// ---- the rendezvous store ----------------------------------------------------------------

void CoordinatorService::open_rendezvous_store() {
  if (rendezvous_) rendezvous_->close();
  // Gloo's full-mesh rendezvous keeps a few keys per rank; this leaves ample room while bounding
  // what one (authenticated but misbehaving) worker can make the coordinator hold.
  rendezvous_ =
      std::make_shared<KeyValueStore>(1024 + 64 * static_cast<std::size_t>(members_.world_size()));
}

grpc::Status CoordinatorService::Rendezvous(grpc::ServerContext* context,
                                            const pb::RendezvousRequest* request,
                                            pb::RendezvousResponse* response) {
  if (grpc::Status st = auth_.check(*context, "Rendezvous"); !st.ok()) return st;
  metrics_.count_rpc("Rendezvous");
  std::shared_ptr<KeyValueStore> store;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const int rank = request->rank();
    if (request->generation() == 0) {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "Rendezvous from rank " + std::to_string(rank) + " carries no generation"};
    }
    if (grpc::Status st =
            status_of(members_.check_generation(request->generation(), rank, "Rendezvous"));
        !st.ok()) {
      return st;
    }
    if (grpc::Status st = status_of(members_.check_running_rank(rank, "Rendezvous")); !st.ok()) {
      return st;
    }
    members_.rank(rank).last_seen = Clock::now();
    store = rendezvous_;
  }
  if (store == nullptr) {
    return {grpc::StatusCode::FAILED_PRECONDITION, "Rendezvous: no generation is running"};
  }
  return serve_rendezvous(*store, *request, response);
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
  if (!done_ && members_.generation() == 0 && members_.registered_count() == 0) {
    done_ = true;  // nothing ran: no failure to report
    exit_code_ = 1;
  }
  if (!done_) finish_job(1, "stopped before all ranks finished", /*durable=*/false);
  cv_.notify_all();
}

std::int64_t CoordinatorService::last_committed_step() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return commits_.last_committed_step();
}

std::uint64_t CoordinatorService::generation() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return members_.generation();
}

int CoordinatorService::registered_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return members_.registered_count();
}

std::string CoordinatorService::end_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return end_reason_;
}

bool CoordinatorService::generation_running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return members_.running();
}

std::int64_t CoordinatorService::restarts(const std::string& cause) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return members_.restarts(cause);
}

void CoordinatorService::check_liveness(Clock::time_point now) {
  // Ranks that never heard the cancel (wedged, or between heartbeats for long) are not waited
  // for.
  if (control_ != nullptr && control_->cancel_overdue(now, kCancelWait)) {
    finish_cancelled("no rank reported its exit within " + seconds_text(kCancelWait));
    return;
  }
  if (members_.running()) {
    if (const std::optional<int> lost = members_.expired_lease(now)) {
      const Membership::Rank& s = members_.rank(*lost);
      end_generation("worker_lost",
                     "rank " + std::to_string(*lost) + " (host " + s.hostname + ", pid " +
                         std::to_string(s.pid) + ") silent for " +
                         seconds_text(options_.worker_timeout) + " (last global_step " +
                         std::to_string(s.global_step) +
                         "): presumed lost (coordinator.worker_timeout_seconds)",
                     now);
      return;
    }
    for (int r : members_.newly_stalled(now)) {
      const Membership::Rank& s = members_.rank(r);
      LF_WARN("rank " << r << " (host " << s.hostname << ", pid " << s.pid << ") silent for "
                      << seconds_text(options_.stall_warning) << " (last global_step "
                      << s.global_step << ")");
    }
    return;
  }
  const auto deadline = members_.rendezvous_deadline();
  if (!deadline || now < *deadline) return;
  if (finished_before_) {
    finish_job(0,
               describe(*finished_before_) + "; no group registered within " +
                   seconds_text(options_.rendezvous_timeout) +
                   " (cluster.rendezvous_timeout_seconds)",
               /*durable=*/false);  // the record stays as the job's own end left it
    return;
  }
  finish_job(1, "generation " + std::to_string(members_.generation() + 1) +
                    " did not form within " + seconds_text(options_.rendezvous_timeout) +
                    " (cluster.rendezvous_timeout_seconds): missing ranks " +
                    members_.missing_ranks() + " (generation " +
                    std::to_string(members_.generation()) + " ended: " + members_.end_detail() +
                    ")");
}

void CoordinatorService::tick_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_ticker_) {
    cv_.wait_for(lock, options_.tick);
    if (stop_ticker_) break;
    const Clock::time_point now = Clock::now();
    update_membership_metrics(now);
    if (done_) continue;
    check_liveness(now);
    if (done_ || !progress_dirty_ || store_ == nullptr || !members_.running()) continue;
    // One batched write a tick, outside mutex_ so no RPC waits on the fsync.
    std::map<int, StoredProgress> batch;
    for (int r = 0; r < members_.world_size(); ++r) {
      const Membership::Rank& s = members_.rank(r);
      if (s.registered) batch[r] = {s.global_step, s.samples};
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

}  // namespace lf
