// SimulatedFleet: N worker ranks in one process against a real coordinator, talking to it as
// lorafleet-worker does (worker/rpc/coordinator_client.cpp): Register (the blocking barrier),
// GetDataset, GetEpochPlan per epoch, a ProgressReport after every step (one in flight per rank,
// newer ones coalesced) and a heartbeat after heartbeat_seconds without one, CommitCheckpoint
// every checkpoint_every steps and Finish, each with "authorization: Bearer <token>" and each
// rank on a TCP connection of its own.
//
// Why one event loop and not a thread per rank: the ranks are asynchronous gRPC calls
// (GenericStub + one CompletionQueue) driven by one thread with a timer queue, so 512 ranks
// cost the load generator one thread instead of 1024 (a blocked Register and a heartbeat sender
// each), and the coordinator under test gets the machine's cores instead of competing with a
// thousand client threads. Plans and manifests arrive as raw bytes: each distinct payload is
// parsed once (for its epoch_plan_digest), not once per rank. Not thread-safe.
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/coordinator_load/latency_stats.h"

namespace lf::load {

struct FleetOptions {
  int ranks = 512;
  std::string token;          // the job token ("" sends none)
  double step_seconds = 1.0;  // one lockstep training step of the group
  // Ranks leave a step's gradient allreduce this far apart (uniform in [0, skew)), so the
  // reports of one step arrive as a burst of that width.
  double step_skew_seconds = 0.02;
  double heartbeat_seconds = 5.0;     // CoordinatorClient's kHeartbeat
  int steps = 60;                     // training steps before the lease phase
  int checkpoint_every = 20;          // CommitCheckpoint from every rank after these steps
  double status_poll_seconds = 0.05;  // JobControl.GetStatus polls of the lease phase
  std::uint64_t seed = 1;             // the skews
};

// What every rank got from Register, GetDataset and the first GetEpochPlan.
struct StartResult {
  double seconds = 0.0;                  // first Register sent -> every rank has its first plan
  double barrier_release_seconds = 0.0;  // last Register sent -> last Register answered
  int registered = 0;                    // Register answered OK
  int distinct_ranks = 0;                // distinct RegisterResponse.rank, each the rank asked for
  std::set<std::uint64_t> generations;   // RegisterResponse.generation over the ranks
  std::int64_t register_response_bytes = 0;  // largest
  std::int64_t manifest_bytes = 0;           // largest DatasetManifest
};

// The training phase: steps, reports, heartbeats, commits, the plans of later epochs.
struct TrainResult {
  double seconds = 0.0;
  std::int64_t reports = 0;  // ProgressReport sent after a step
  // Step reports merged into a later one (a rank's report was still in flight, as
  // CoordinatorClient keeps only the newest): reports + coalesced = ranks x steps.
  std::int64_t coalesced = 0;
  std::int64_t heartbeats = 0;             // ProgressReport repeated after heartbeat_seconds
  std::set<std::int64_t> committed_steps;  // steps a CheckpointAck said committed
  std::int64_t stop_acks = 0;              // ProgressAck.stop while training (none expected)
};

// A rank goes silent; how long until the coordinator ends its generation.
struct LeaseResult {
  // The victim's last RPC sent -> the first JobControl.GetStatus answer whose state is no longer
  // "running" (an upper bound by one poll).
  double detect_seconds = 0.0;
  // The victim's last RPC sent -> every other rank's heartbeat answered stop=true.
  double all_told_seconds = 0.0;
  std::string state;  // JobStatus.state then ("restarting")
  // The lowest global_step of any rank in the first status answer (the last training step when
  // every rank's last report arrived).
  std::int64_t lowest_step_reported = -1;
  std::string end_reason;  // JobStatus.end_reason then
};

class SimulatedFleet {
 public:
  // One channel per rank to `address` (not connected yet) plus one for JobControl.
  SimulatedFleet(const std::string& address, const FleetOptions& options);
  ~SimulatedFleet();  // cancels calls still in flight

  // Connects every rank's channel; returns the seconds it took. Throws std::runtime_error naming
  // the rank that did not connect within `timeout`.
  double connect(std::chrono::seconds timeout);
  // Every rank registers at once (restart_count / restart_cause as lorafleet-launch sets them)
  // and, as its answer comes, fetches the dataset and epoch 0's plan. Throws std::runtime_error
  // when not every rank has its plan within `timeout`.
  StartResult start(int restart_count, const std::string& restart_cause,
                    std::chrono::seconds timeout);
  // options.steps lockstep steps from now (one report per rank each, heartbeats, commits every
  // checkpoint_every steps, the next epoch's plan at each epoch's end); returns once every call
  // has been answered. Throws std::runtime_error after `timeout`.
  TrainResult train(std::chrono::seconds timeout);
  // `victim` sends nothing more; the others heartbeat on. Throws std::runtime_error when the
  // generation still runs, or a rank was not told to stop, after `timeout`.
  LeaseResult expire_lease(int victim, std::chrono::seconds timeout);
  // Every rank reports Finish(ok); returns the seconds until all were answered.
  double finish(std::chrono::seconds timeout);

  const LatencyStats& latencies() const { return stats_; }
  // epoch -> the distinct epoch_plan_digest values the ranks were served, and how many answers.
  const std::map<int, std::set<std::string>>& plan_digests() const { return plan_digests_; }
  const std::map<int, int>& plans_served() const { return plans_served_; }
  std::int64_t largest_plan_bytes() const { return largest_plan_bytes_; }
  int plan_batches() const { return plan_batches_; }           // global batches of epoch 0's plan
  std::int64_t plan_samples() const { return plan_samples_; }  // samples of epoch 0's plan
  int first_batch_samples() const { return first_batch_samples_; }
  // The first failed calls ("Method rank R: CODE: message"), at most 10.
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  using Clock = std::chrono::steady_clock;
  enum class Rpc { kRegister, kGetDataset, kGetEpochPlan, kReport, kCommit, kFinish, kStatus };
  struct Call;
  struct Rank;
  struct Timer {
    Clock::time_point at;
    std::uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Timer& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  void send(int rank, Rpc rpc, std::int64_t arg, const std::string& request);
  void on_answer(Call& call);
  void on_register(Call& call, const std::string& bytes);
  void on_plan(Call& call, const std::string& bytes);
  void on_report(Call& call, const std::string& bytes);
  void send_register(int rank, int restart_count, const std::string& restart_cause);
  void send_plan_request(int rank, int epoch);
  void send_report(int rank, bool heartbeat);
  void send_commit(int rank, std::int64_t step);
  void send_status();
  void on_step(int rank, std::int64_t step);
  void schedule_heartbeat(int rank);
  void at(Clock::time_point when, std::function<void()> fn);
  // Serves answers and timers until `done` holds; throws std::runtime_error naming `what`
  // when `timeout` passes first.
  void run_until(const std::function<bool()>& done, std::chrono::seconds timeout,
                 const std::string& what);
  int count_ranks(const std::function<bool(const Rank&)>& pred) const;

  FleetOptions options_;
  grpc::CompletionQueue cq_;
  std::vector<Rank> ranks_;
  std::unique_ptr<grpc::GenericStub> control_stub_;
  std::shared_ptr<grpc::Channel> control_channel_;
  std::unordered_map<Call*, std::unique_ptr<Call>> in_flight_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  std::uint64_t timer_seq_ = 0;
  std::mt19937_64 rng_;
  LatencyStats stats_;
  std::vector<std::string> failures_;

  // Plans: distinct payloads -> their digest, digests and answers by epoch.
  std::unordered_map<std::string, std::string> digest_of_payload_;
  std::map<int, std::set<std::string>> plan_digests_;
  std::map<int, int> plans_served_;
  std::int64_t largest_plan_bytes_ = 0;
  int plan_batches_ = 0;
  std::int64_t plan_samples_ = 0;
  int first_batch_samples_ = 0;

  StartResult start_;
  std::set<int> answered_ranks_;  // RegisterResponse.rank == the rank asked for
  Clock::time_point last_register_answer_{};
  TrainResult train_;
  std::int64_t steps_due_ = 0;  // step events not yet fired
  bool polling_ = false;        // the lease phase polls GetStatus
  bool status_in_flight_ = false;
  std::string status_state_;
  bool first_status_running_ = false;  // the lease phase began on a running generation
  std::int64_t first_status_lowest_step_ = -1;
  std::string status_end_reason_;
  Clock::time_point status_changed_at_{};
};

}  // namespace lf::load
