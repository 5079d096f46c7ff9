// CoordinatorService: the lorafleet.v1.Coordinator gRPC service (synchronous API). It owns the
// job's membership (registration barrier, generations), progress and liveness per rank,
// checkpoint commits and the end of the job. Handlers run on gRPC's thread pool; all state is
// guarded by one mutex, and blocking happens only in Register and wait_until_done*.
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

#include "coordinator/coordinator_metrics.h"
#include "coordinator/job.h"
#include "lorafleet/v1/coordinator.grpc.pb.h"

namespace lf {

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
  // A registered, unfinished rank silent for this long is presumed dead: the job ends with
  // exit code 1 (workers heartbeat every 5 s, so only a dead or wedged rank is this quiet).
  std::chrono::milliseconds worker_timeout = std::chrono::seconds(120);
  // After a rank reports failure, the job ends when all ranks have finished or after this long,
  // whichever is first (the other ranks usually die with it and never call Finish).
  std::chrono::milliseconds failure_grace = std::chrono::seconds(30);
  // Period of the background refresh of time-based metrics and checks.
  std::chrono::milliseconds tick = std::chrono::seconds(1);
  // Sent to workers as base_dir; empty means the coordinator's current directory (absolute).
  std::string base_dir;
};

class CoordinatorService final : public lorafleet::v1::Coordinator::Service {
 public:
  // Builds the dataset manifest once. With options.world_size > 0 it also computes the
  // schedule (throws std::invalid_argument as CoordinatorJob::set_world_size). Starts the
  // background ticker thread. `job` and `metrics` must outlive the service.
  CoordinatorService(CoordinatorJob& job, CoordinatorMetrics& metrics,
                     const ServiceOptions& options);
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

  // Blocks until the job is done (all ranks finished, or a failure's grace period ran out, or
  // shutdown()); returns the exit code: 0 when every rank finished ok, else 1. Thread-safe.
  int wait_until_done();
  // As wait_until_done, but gives up after `timeout` and returns std::nullopt.
  std::optional<int> wait_until_done_for(std::chrono::milliseconds timeout);
  // Ends the job from outside (signal): blocked Register calls return UNAVAILABLE, waiters wake
  // with exit code 1 unless the job had already finished (logged as a failure once any rank
  // had registered). Idempotent, thread-safe.
  void shutdown();

  // Introspection for logs and tests (thread-safe snapshots).
  std::int64_t last_committed_step() const;
  std::uint64_t generation() const;
  int registered_count() const;

 private:
  using Clock = std::chrono::steady_clock;

  struct RankState {
    bool registered = false;
    bool finished = false;
    bool ok = true;
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
  };

  // All helpers below require mutex_ held.
  grpc::Status check_rank(int rank, const char* rpc) const;
  grpc::Status check_running_rank(int rank, const char* rpc) const;
  bool is_alive(const RankState& s, Clock::time_point now) const;
  int count_registered() const;
  void start_new_generation();
  void finish_job(int exit_code, const std::string& why);
  void update_membership_metrics(Clock::time_point now);
  void update_progress_metrics();
  void fill_register_response(int rank, lorafleet::v1::RegisterResponse* response) const;
  void tick_loop();

  CoordinatorJob& job_;
  CoordinatorMetrics& metrics_;
  ServiceOptions options_;
  std::string base_dir_;
  lorafleet::v1::DatasetManifest manifest_;  // immutable after construction

  mutable std::mutex mutex_;
  std::condition_variable cv_;        // registration progress and job end
  int world_size_ = 0;                // 0 until known
  bool world_size_fixed_ = false;     // from options: never cleared
  bool registration_complete_ = false;
  std::uint64_t generation_ = 0;      // 1 for the first complete registration
  std::vector<RankState> ranks_;      // size world_size_
  // Pending checkpoint commits of this generation: step -> reporting ranks, and paths.
  std::map<std::int64_t, std::set<int>> checkpoint_ranks_;
  std::map<std::int64_t, std::string> checkpoint_paths_;
  std::set<std::int64_t> committed_steps_;
  std::int64_t last_committed_step_ = -1;
  std::optional<Clock::time_point> failure_deadline_;
  bool done_ = false;
  bool shutting_down_ = false;
  bool stop_ticker_ = false;
  int exit_code_ = 0;
  std::thread ticker_;
};

}  // namespace lf
