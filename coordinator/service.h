// CoordinatorService: the lorafleet.v1.Coordinator gRPC service (synchronous API). It checks
// every call's job token, translates messages, holds the one mutex, and drives the plain
// classes that decide: Membership (generations, rank slots, leases, restarts),
// GroupResume (where a formed group starts), CheckpointCommits (which steps every rank made
// durable); it records their transitions in the StateStore, exports metrics and ends the job.
// Handlers run on gRPC's thread pool; blocking happens only in Register, in Rendezvous
// (outside the mutex) and wait_until_done*.
//
// RPCs that carry an older generation (or the ended one) are refused with ABORTED; progress
// reports get stop=true instead. The job is done when every rank of a generation finished ok.
// With a StateStore, every transition is durable and a restarted coordinator continues where it
// stopped.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/rendezvous/key_value_store.h"
#include "coordinator/auth.h"
#include "coordinator/checkpoint_commits.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/finished_job.h"
#include "coordinator/group_resume.h"
#include "coordinator/job.h"
#include "coordinator/membership.h"
#include "coordinator/operator_control.h"
#include "coordinator/progress_history.h"
#include "coordinator/state_store.h"
#include "lorafleet/v1/control.pb.h"
#include "lorafleet/v1/coordinator.grpc.pb.h"

namespace lf {

// "1.5 s": a duration for messages.
std::string seconds_text(std::chrono::milliseconds d);

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
  // The running generation's rendezvous store (coordinator/rendezvous_handler.h), for ranks of
  // that generation only: ABORTED for another generation, FAILED_PRECONDITION while none runs.
  // GET and WAIT block outside the service's mutex.
  grpc::Status Rendezvous(grpc::ServerContext* context,
                          const lorafleet::v1::RendezvousRequest* request,
                          lorafleet::v1::RendezvousResponse* response) override;

  // GetDataset without the copy (CoordinatorEndpoint serves bytes serialized once): the job-token
  // check and the count, then the manifest (immutable, served at any time). Thread-safe.
  grpc::Status dataset_manifest(grpc::ServerContext* context,
                                const lorafleet::v1::DatasetManifest** manifest);
  // GetEpochPlan without the conversion (CoordinatorEndpoint serves the bytes it serialized once
  // per plan): the same checks (job token, registration, epoch) and errors, the same record of
  // the plan's digest, and the plan GetEpochPlan converts: the current schedule's (shared with
  // CoordinatorJob's cache), or for request.world_size() > 0 a full plan of that world size
  // built for this call. Thread-safe.
  grpc::Status find_epoch_plan(grpc::ServerContext* context,
                               const lorafleet::v1::GetEpochPlanRequest& request,
                               std::shared_ptr<const EpochPlan>* plan);

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

  // All helpers below require mutex_ held.
  // A gRPC status for a Membership check: OK for nullopt.
  static grpc::Status status_of(const std::optional<Refusal>& refusal);
  // The barrier completed: the generation is formed (restart counted, group resume planned,
  // assignment fixed and stored, leases started).
  void complete_registration(Clock::time_point now);
  // Ends the running generation (no-op otherwise): its ranks are dropped, RPCs carrying it are
  // refused, and the next generation must register within rendezvous_timeout.
  void end_generation(const std::string& cause, const std::string& detail, Clock::time_point now);
  void restore(const StoredJob& stored);
  // restore() of a generation that was running: its assignment, slots and pending commits.
  void restore_running_generation(const StoredJob& stored, Clock::time_point now);
  // A finished job's record (finished_job.h): the service reports it (status, metrics) and ends
  // with exit 0 unless a group registers within rendezvous_timeout (a --resume of an older
  // checkpoint, or the job run again), which starts a fresh record. false (nothing changed)
  // for a record that is not a finished job.
  bool restore_finished(const StoredJob& stored);
  // The first Register after restore_finished: the job is run again on a fresh record.
  void leave_finished_record();
  // Runs a StateStore write; a failure is logged (the job goes on without durability for it).
  template <class Fn>
  void persist(const char* what, Fn&& fn) {
    if (store_ == nullptr) return;
    try {
      fn(*store_);
    } catch (const std::exception& e) {
      log_persist_failure(what, e);
    }
  }
  static void log_persist_failure(const char* what, const std::exception& e);
  // Ends the job. durable=false (shutdown by signal) leaves the stored job resumable.
  void finish_job(int exit_code, const std::string& why, bool durable = true);
  void update_membership_metrics(Clock::time_point now);
  void update_progress_metrics();
  void fill_register_response(int rank, lorafleet::v1::RegisterResponse* response) const;
  // Once per complete registration: GroupResume::plan for the registered ranks' requests,
  // then the job's metrics. Sets group_resume_; on a refusal returns FAILED_PRECONDITION with
  // its reason (the job then ends with exit 3).
  grpc::Status plan_group_resume();
  // Register's first half: the world size, the restart budget and the rank's slot; a refusal,
  // or the registration id the call then waits with.
  grpc::Status admit(const lorafleet::v1::RegisterRequest& request, Clock::time_point now,
                     std::uint64_t* registration_id);
  // Register's second half, after waiting: the answer for a call that did not complete.
  grpc::Status registration_failed(grpc::ServerContext* context, int rank,
                                   std::uint64_t registration_id, std::chrono::milliseconds waited);
  // The ticker's checks: an operator's overdue cancel, leases, stalls, the rendezvous deadline.
  void check_liveness(Clock::time_point now);
  // A rank's Finish of the running generation (checked already).
  void rank_finished(int rank, const lorafleet::v1::FinishRequest& request, Clock::time_point now);
  // A fresh rendezvous store for the generation just formed (the previous one closed).
  void open_rendezvous_store();
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
  GroupResume group_resume_planner_;
  const Clock::time_point started_at_ = Clock::now();

  mutable std::mutex mutex_;
  Membership members_;
  CheckpointCommits commits_;
  ProgressHistory history_;           // loss and lr by step, for the status
  ProgressHistory validation_history_;  // validation loss by step (learning_rate unused)
  std::int64_t validation_step_ = 0;    // the latest validation's step, 0 = none
  double validation_loss_ = 0.0;
  std::condition_variable cv_;        // registration progress and job end
  // The RegisterResponse of the running generation without the rank (complete_registration).
  lorafleet::v1::RegisterResponse assignment_;
  std::set<int> plans_recorded_;  // epochs whose plan digest is stored (this world_size)
  bool progress_dirty_ = false;   // rank progress changed since the last batch write
  // What the current generation resumes from (nullopt: fresh), and why it cannot start.
  std::optional<CheckpointPosition> group_resume_;
  grpc::Status group_resume_status_;
  // The running generation's rendezvous store (env-mode Gloo groups form through it): a fresh
  // one per generation, closed when it ends so that waiting ranks return.
  std::shared_ptr<KeyValueStore> rendezvous_;
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
