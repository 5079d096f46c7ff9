// CoordinatorService: the lorafleet.v1.Coordinator gRPC service (synchronous API). It owns the
// job's membership (registration barrier, generations), progress and liveness per rank,
// checkpoint commits and the end of the job. Handlers run on gRPC's thread pool; all state is
// guarded by one mutex, and blocking happens only in Register and wait_until_done*.
//
// Generations: registering -> running (complete_registration) -> ended (a rank failed, went
// silent, was preempted or re-registered) -> registering the next one, within
// rendezvous_timeout. RPCs that carry an older generation (or the ended one) are refused with
// ABORTED; progress reports get stop=true instead. A new generation after an earlier one counts
// a restart of the cause that ended it; more than max_restarts (preemptions excepted) fail the
// job. The job is done when every rank of a generation finished ok. With a StateStore, every
// such transition is durable and a restarted coordinator continues where it stopped.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/auth.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/finished_job.h"
#include "coordinator/job.h"
#include "coordinator/operator_control.h"
#include "coordinator/progress_history.h"
#include "coordinator/resume_point.h"
#include "coordinator/state_store.h"
#include "lorafleet/v1/control.pb.h"
#include "lorafleet/v1/coordinator.grpc.pb.h"

namespace lf {

// The largest world_size a Register may ask for: far beyond any LoRA job, small enough that the
// per-rank state of a bogus request (a broken or malicious worker) stays a few megabytes.
inline constexpr int kMaxWorldSize = 65536;

struct ServiceOptions {
  // > 0 fixes world_size up front; 0 takes it from the first Register.
  int world_size = 0;
  // A Register waits at most this long (or until the client's deadline, if sooner) for the
  // other ranks; then it fails with DEADLINE_EXCEEDED and the rank is unregistered.
  std::chrono::milliseconds registration_timeout = std::chrono::seconds(300);
  // A rank counts as alive when it sent any message within this window.
  std::chrono::milliseconds alive_window = std::chrono::seconds(30);
  // A rank silent for this long is reported (WARN, once per silence) by the stall inspector.
  std::chrono::milliseconds stall_warning = std::chrono::seconds(60);
  // A registered, unfinished rank silent for this long (its lease) is presumed lost: the
  // generation ends (workers heartbeat every 5 s, so only a dead or wedged rank is this quiet).
  std::chrono::milliseconds worker_timeout = std::chrono::seconds(120);
  // After a generation ended, the next one must complete registration within this long, or the
  // job fails naming the missing ranks (cluster.rendezvous_timeout_seconds).
  std::chrono::milliseconds rendezvous_timeout = std::chrono::seconds(300);
  // Restarts (new generations after an earlier one) other than preemptions allowed before the
  // job fails (cluster.max_restarts).
  int max_restarts = 3;
  // Period of the background refresh of time-based metrics and checks.
  std::chrono::milliseconds tick = std::chrono::seconds(1);
  // Sent to workers as base_dir; empty means the coordinator's current directory (absolute).
  std::string base_dir;
  // Every RPC must carry "authorization: Bearer <job_token>"; "" accepts every call. Set by
  // CoordinatorServer from resolve_job_token (see coordinator/auth.h).
  std::string job_token;
};

class CoordinatorService final : public lorafleet::v1::Coordinator::Service {
 public:
  // Builds the dataset manifest once. With options.world_size > 0 it also computes the
  // schedule (throws std::invalid_argument as CoordinatorJob::set_world_size). Starts the
  // background ticker thread. `job`, `metrics` and `store` must outlive the service. With a
  // store that holds this job's state (store->resumed()), the service restores it: world_size
  // and schedule, the running generation (its ranks registered, leases restarted now), last
  // committed checkpoint and restart counters; throws std::runtime_error naming the store's
  // path when the stored state does not fit the job (world_size, epoch plans). store may be
  // null: nothing is persisted. `control` (may be null: no operator requests) holds what
  // lorafleet.v1.JobControl was asked; it is sent to the workers with every ProgressAck.
  CoordinatorService(CoordinatorJob& job, CoordinatorMetrics& metrics,
                     const ServiceOptions& options, StateStore* store = nullptr,
                     OperatorControl* control = nullptr);
  ~CoordinatorService() override;

  grpc::Status Register(grpc::ServerContext* context,
                        const lorafleet::v1::RegisterRequest* request,
                        lorafleet::v1::RegisterResponse* response) override;
  grpc::Status GetDataset(grpc::ServerContext* context,
                          const lorafleet::v1::GetDatasetRequest* request,
                          lorafleet::v1::DatasetManifest* response) override;
  grpc::Status GetEpochPlan(grpc::ServerContext* context,
                            const lorafleet::v1::GetEpochPlanRequest* request,
                            lorafleet::v1::EpochPlan* response) override;
  grpc::Status ReportProgress(grpc::ServerContext* context,
                              const lorafleet::v1::ProgressReport* request,
                              lorafleet::v1::ProgressAck* response) override;
  grpc::Status CommitCheckpoint(grpc::ServerContext* context,
                                const lorafleet::v1::CheckpointReport* request,
                                lorafleet::v1::CheckpointAck* response) override;
  grpc::Status Finish(grpc::ServerContext* context, const lorafleet::v1::FinishRequest* request,
                      lorafleet::v1::FinishAck* response) override;

  // Blocks until the job is done (all ranks of a generation finished ok, or the job failed:
  // rendezvous timeout, max_restarts exhausted; or shutdown()); returns the exit code: 0 when
  // every rank finished ok, else 1. Thread-safe.
  int wait_until_done();
  // As wait_until_done, but gives up after `timeout` and returns std::nullopt.
  std::optional<int> wait_until_done_for(std::chrono::milliseconds timeout);
  // Ends the job from outside (signal): blocked Register calls return UNAVAILABLE, waiters wake
  // with exit code 1 unless the job had already finished (logged as a failure once any rank
  // had registered). The stored state is left resumable: a coordinator restarted on it
  // continues the job. Idempotent, thread-safe.
  void shutdown();

  // Introspection for logs and tests (thread-safe snapshots).
  std::int64_t last_committed_step() const;
  std::uint64_t generation() const;
  int registered_count() const;
  // Whether the newest generation is formed and running (not registering, not ended).
  bool generation_running() const;
  // Why the job ended ("" while it runs).
  std::string end_reason() const;
  // Restarts counted for `cause` (a CoordinatorMetrics::kRestartCauses label).
  std::int64_t restarts(const std::string& cause) const;

  // Where the job stands, for lorafleet.v1.JobControl.GetStatus and the status page
  // (service_status.cpp). Thread-safe.
  void fill_status(lorafleet::v1::JobStatus* status) const;
  // An operator asked to cancel (after OperatorControl::request_cancel): with no generation
  // training, the job ends now with kExitCancelled; otherwise the ranks learn it from their
  // next heartbeat and the job ends when the first reports it exits (or, when none does, after
  // two heartbeat periods). Thread-safe.
  void on_cancel_requested();
  // An operator asked to stop (after OperatorControl::request_stop): before the first
  // generation formed nothing has trained, and the job ends now with exit 0; otherwise the
  // ranks stop after the next step they agree on. Thread-safe.
  void on_stop_requested();

 private:
  using Clock = std::chrono::steady_clock;

  struct RankState {
    bool registered = false;
    bool finished = false;
    bool ok = true;
    bool preempted = false;
    bool stopped = false;               // finished after an operator's stop
    bool cancelled = false;             // exited on an operator's cancel
    std::uint64_t registration_id = 0;  // which Register call holds this slot
    std::string error;
    std::string hostname;
    std::string device;
    int pid = 0;
    int metrics_port = 0;
    std::string rendezvous_address;  // rank 0 in env mode: relayed to every rank
    std::string nccl_unique_id;
    Clock::time_point last_seen{};
    bool in_register = false;  // blocked in Register: alive however long it waits
    bool stall_warned = false;
    std::int64_t global_step = 0;
    int epoch = 0;
    double loss = 0.0;
    double learning_rate = 0.0;
    std::int64_t samples = 0;
    double samples_per_second = 0.0;
    double step_seconds = 0.0;   // the last step's wall time, for the ETA
    std::string resume_request;  // RegisterRequest.resume_point.checkpoint: "", "auto" or a path
    int restart_count = 0;       // RegisterRequest.restart_count (lorafleet-launch's restarts)
  };

  // All helpers below require mutex_ held.
  grpc::Status check_rank(int rank, const char* rpc) const;
  grpc::Status check_running_rank(int rank, const char* rpc) const;
  // OK when `generation` is 0 (not sent) or the running one; else ABORTED naming it.
  grpc::Status check_generation(std::uint64_t generation, int rank, const char* rpc) const;
  // The barrier completed: the generation is formed (restart counted, assignment fixed and
  // stored, leases started).
  void complete_registration(Clock::time_point now);
  // Ends the running generation (no-op otherwise): its ranks are dropped, RPCs carrying it are
  // refused, and the next generation must register within rendezvous_timeout.
  void end_generation(const std::string& cause, const std::string& detail, Clock::time_point now);
  void restore(const StoredJob& stored);
  // A finished job's record (finished_job.h): the service reports it (status, metrics) and ends
  // with exit 0 unless a group registers within rendezvous_timeout (a --resume of an older
  // checkpoint, or the job run again), which starts a fresh record. false (nothing changed)
  // for a record that is not a finished job.
  bool restore_finished(const StoredJob& stored);
  // The first Register after restore_finished: the job is run again on a fresh record.
  void leave_finished_record();
  // Runs a StateStore write; a failure is logged (the job goes on without durability for it).
  template <class Fn>
  void persist(const char* what, Fn&& fn);
  std::int64_t counted_restarts() const;  // all causes but preemption
  // The job's one restart budget: lorafleet-launch --max-restarts when the group's supervisor
  // was given one (RegisterRequest.max_restarts), else cluster.max_restarts; and its name.
  int restart_budget() const;
  std::string restart_budget_key() const;
  bool is_alive(const RankState& s, Clock::time_point now) const;
  int count_registered() const;
  void start_new_generation();
  // Ends the job. durable=false (shutdown by signal) leaves the stored job resumable.
  void finish_job(int exit_code, const std::string& why, bool durable = true);
  void update_membership_metrics(Clock::time_point now);
  void update_progress_metrics();
  void fill_register_response(int rank, lorafleet::v1::RegisterResponse* response) const;
  // Once per complete registration: resolves the ranks' common --resume request to a
  // checkpoint (or a fresh run), checks that this job's plan of the checkpoint's epoch is the
  // one it trained on, and replans the rest of the job for this world size (set_resume). Sets
  // group_resume_; on failure returns FAILED_PRECONDITION (ranks asking different things, a
  // missing or foreign checkpoint, a changed plan) and the job cannot start.
  grpc::Status plan_group_resume();
  // The group's one --resume request. An explicit path repeated by a supervisor's restart
  // (restart_count > 0: lorafleet-launch runs the command line it first ran) reads as "auto"
  // when a committed checkpoint exists, so a restart continues where the job stands.
  std::string group_resume_request(const std::string& request) const;
  std::string checkpoints_root() const;  // <output_dir>/checkpoints
  // After an explicit --resume of `pos`: the newer checkpoints of the abandoned branch are
  // moved aside (common/checkpoint/abandoned_checkpoints.h). Throws std::runtime_error.
  void set_aside_abandoned_branch(const CheckpointPosition& pos) const;
  void tick_loop();
  // An operator's cancel reached the ranks (or timed out): ends the job with kExitCancelled.
  void finish_cancelled(const std::string& how);
  // Fills the operator's requests into a heartbeat answer.
  void fill_operator_requests(lorafleet::v1::ProgressAck* ack) const;

  CoordinatorJob& job_;
  CoordinatorMetrics& metrics_;
  ServiceOptions options_;
  JobTokenAuth auth_;  // first check of every handler
  std::string base_dir_;
  lorafleet::v1::DatasetManifest manifest_;  // immutable after construction
  StateStore* store_ = nullptr;
  OperatorControl* control_ = nullptr;
  const Clock::time_point started_at_ = Clock::now();

  mutable std::mutex mutex_;
  ProgressHistory history_;           // loss and lr by step, for the status
  ProgressHistory validation_history_;  // validation loss by step (learning_rate unused)
  std::int64_t validation_step_ = 0;    // the latest validation's step, 0 = none
  double validation_loss_ = 0.0;
  std::condition_variable cv_;        // registration progress and job end
  int world_size_ = 0;                // 0 until known
  bool world_size_fixed_ = false;     // from options: never cleared
  bool registration_complete_ = false;
  std::uint64_t generation_ = 0;  // newest formed generation: 1 for the first
  // The RegisterResponse of generation_ without the rank (set in complete_registration).
  lorafleet::v1::RegisterResponse assignment_;
  std::vector<RankState> ranks_;      // size world_size_
  std::uint64_t next_registration_id_ = 1;
  // Set while generation_ > 0 has ended and the next one registers.
  std::string end_cause_;  // restart cause label the next generation counts
  std::string end_detail_;
  std::optional<Clock::time_point> rendezvous_deadline_;
  std::map<std::string, std::int64_t> restarts_;  // cause label -> count
  std::optional<int> launcher_max_restarts_;      // the latest RegisterRequest.max_restarts
  std::set<int> plans_recorded_;  // epochs whose plan digest is stored (this world_size)
  bool progress_dirty_ = false;   // ranks_ progress changed since the last batch write
  // Pending checkpoint commits of this generation: step -> reporting ranks, and paths.
  std::map<std::int64_t, std::set<int>> checkpoint_ranks_;
  std::map<std::int64_t, std::string> checkpoint_paths_;
  std::set<std::int64_t> committed_steps_;
  std::int64_t last_committed_step_ = -1;
  std::string last_committed_path_;  // its directory (rank 0's report)
  // What the current generation resumes from (nullopt: fresh), and why it cannot start.
  std::optional<CheckpointPosition> group_resume_;
  grpc::Status group_resume_status_;
  // Set while the state recorded a finished job and no group has registered since.
  std::optional<FinishedJob> finished_before_;
  bool done_ = false;
  bool shutting_down_ = false;
  bool stop_ticker_ = false;
  int exit_code_ = 0;
  std::string end_reason_;
  std::thread ticker_;
};

}  // namespace lf
