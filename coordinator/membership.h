// Membership: who belongs to the job's current generation, and how generations follow each
// other (torchelastic's rendezvous rounds, here counted by the coordinator):
//
//   registering -> running (complete_registration) -> ended (a rank failed, went silent, was
//   preempted or re-registered) -> registering the next one, within rendezvous_timeout.
//
// It keeps each rank's slot (registration, lease, last reported progress), checks which calls a
// rank may make in which generation, counts restarts by cause against the job's one restart
// budget (cluster.max_restarts, or lorafleet-launch --max-restarts when the group's supervisor
// has one), and finds expired leases. A plain class: no gRPC, no locking, no persistence
// (CoordinatorService translates its refusals into gRPC statuses, holds the lock and records
// each transition in the StateStore).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lf {

// Why a rank's call is not taken; CoordinatorService answers it with the gRPC status of the
// same name.
struct Refusal {
  enum class Code { kInvalidArgument, kFailedPrecondition, kAborted };
  Code code;
  std::string message;
};

struct MembershipOptions {
  // A rank counts as alive when it sent any message within this window.
  std::chrono::milliseconds alive_window = std::chrono::seconds(30);
  // A rank silent for this long is reported once per silence (newly_stalled).
  std::chrono::milliseconds stall_warning = std::chrono::seconds(60);
  // A registered, unfinished rank silent for this long (its lease) is presumed lost.
  std::chrono::milliseconds worker_timeout = std::chrono::seconds(120);
  // After a generation ended, the next one must form within this long.
  std::chrono::milliseconds rendezvous_timeout = std::chrono::seconds(300);
  // Restarts (preemptions excepted) the job allows (cluster.max_restarts).
  int max_restarts = 3;
};

class Membership {
 public:
  using Clock = std::chrono::steady_clock;

  // One rank's slot in the generation that is registering or running.
  struct Rank {
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
    std::string nccl_unique_id;  // rank 0 in env mode on GPUs: relayed to every rank
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

  explicit Membership(const MembershipOptions& options);

  // ---- world size
  int world_size() const { return world_size_; }  // 0 until known
  bool world_size_fixed() const { return world_size_fixed_; }
  // Fixed up front (--world-size / cluster.world_size): never cleared.
  void fix_world_size(int world_size);
  // Taken from the first registration (ranks slots made); clear_world_size forgets it again.
  void set_world_size(int world_size);
  void clear_world_size();

  // ---- generations
  std::uint64_t generation() const { return generation_; }  // newest formed: 1 for the first
  bool running() const { return running_; }                 // generation() formed, not ended
  const std::string& end_cause() const { return end_cause_; }
  const std::string& end_detail() const { return end_detail_; }
  // While the next generation registers after one ended: when it must have formed by.
  std::optional<Clock::time_point> rendezvous_deadline() const { return rendezvous_deadline_; }
  // Sets (or clears) the deadline by which the next generation must form.
  void set_rendezvous_deadline(std::optional<Clock::time_point> deadline);

  // ---- checks of a rank's call (nullopt: allowed)
  // INVALID_ARGUMENT outside [0, world_size), FAILED_PRECONDITION while world_size is unknown.
  std::optional<Refusal> check_rank(int rank, const char* rpc) const;
  // check_rank, and the generation running with `rank` registered in it.
  std::optional<Refusal> check_running_rank(int rank, const char* rpc) const;
  // OK for `generation` 0 (not sent) or the running one; FAILED_PRECONDITION for one newer than
  // the newest; ABORTED for an older or ended one (the rank must stop).
  std::optional<Refusal> check_generation(std::uint64_t generation, int rank,
                                          const char* rpc) const;

  // ---- registration
  // Takes `rank`'s slot for a new Register call (the slot's earlier content is dropped) and
  // returns the call's registration id. The caller checked rank and world_size.
  std::uint64_t register_rank(int rank, Rank info, Clock::time_point now);
  // Whether `rank`'s slot is still held by registration `id` (not withdrawn or superseded).
  bool holds(int rank, std::uint64_t id) const;
  // Frees `rank`'s slot (its Register call gave up).
  void withdraw(int rank);
  int registered_count() const;
  // "0, 3": the ranks not registered in the generation that registers; past 16 of them,
  // "0, 1, ..., 15, ... (N in total)", so a world_size of thousands gives a short line.
  std::string missing_ranks() const;

  // ---- transitions
  // Every rank registered: the next generation is formed and running, leases start now. Counts
  // a restart of the cause that ended the previous generation (none for the first) and returns
  // that cause ("" for the first generation).
  std::string complete_registration(Clock::time_point now);
  // Ends the running generation (false, nothing changed, when none runs): its slots are
  // cleared, calls carrying it are refused, and the next one must form within
  // rendezvous_timeout.
  bool end_generation(const std::string& cause, const std::string& detail, Clock::time_point now);

  // ---- restarts
  // lorafleet-launch --max-restarts of the registering group's supervisor (RegisterRequest).
  void set_launcher_budget(std::optional<int> max_restarts);
  // The job's one budget: the launcher's when it gave one, else cluster.max_restarts; and the
  // name of what sets it, for messages.
  int restart_budget() const;
  std::string restart_budget_key() const;
  // The key a user raises to allow more.
  std::string restart_budget_hint() const;
  std::int64_t counted_restarts() const;  // all causes but preemption
  std::int64_t restarts(const std::string& cause) const;
  const std::map<std::string, std::int64_t>& restarts_by_cause() const { return restarts_; }
  // Whether forming the next generation would exceed the budget (a preemption never does).
  bool next_restart_exceeds_budget() const;

  // ---- leases
  bool is_alive(int rank, Clock::time_point now) const;
  // The first registered, unfinished rank of the running generation whose lease expired.
  std::optional<int> expired_lease(Clock::time_point now) const;
  // Ranks silent for stall_warning that were not reported yet in this silence (marked now).
  std::vector<int> newly_stalled(Clock::time_point now);

  // ---- slots
  Rank& rank(int r) { return ranks_.at(static_cast<std::size_t>(r)); }
  const Rank& rank(int r) const { return ranks_.at(static_cast<std::size_t>(r)); }
  const std::vector<Rank>& ranks() const { return ranks_; }
  bool all_finished() const;

  // ---- restore (a coordinator restarted on its durable state)
  // The counters and the newest generation as they were.
  void restore_counters(std::uint64_t generation, const std::map<std::string, std::int64_t>& n);
  // That generation still runs with these ranks (leases restart at `now`).
  void restore_running(Clock::time_point now);
  // That generation had ended (or stopped with the coordinator): the next one registers.
  void restore_ended(const std::string& cause, const std::string& detail, Clock::time_point now);

 private:
  MembershipOptions options_;
  int world_size_ = 0;
  bool world_size_fixed_ = false;
  bool running_ = false;
  std::uint64_t generation_ = 0;
  std::vector<Rank> ranks_;  // size world_size_
  std::uint64_t next_registration_id_ = 1;
  // Set while generation_ > 0 has ended and the next one registers.
  std::string end_cause_;  // restart cause label the next generation counts
  std::string end_detail_;
  std::optional<Clock::time_point> rendezvous_deadline_;
  std::map<std::string, std::int64_t> restarts_;  // cause label -> count
  std::optional<int> launcher_max_restarts_;      // the latest RegisterRequest.max_restarts
};

}  // namespace lf
