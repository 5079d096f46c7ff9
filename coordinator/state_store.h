// StateStore: the coordinator's durable job state, one SQLite database in WAL mode at
// <output_dir>/coordinator/state.sqlite. A coordinator killed mid-job and restarted with the same
// config reads it back (load()) and carries on with the same generation, schedule, last committed
// checkpoint and restart counters, so workers that kept training are not disturbed.
//
// Every write is one transaction. Writes come from RPC handlers on rare events (registration,
// plans, checkpoints, finish) and from the ticker for progress (batched, ~1/s), never per
// progress report. All methods are thread-safe (one connection behind a mutex).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

struct sqlite3;

namespace lf {

// One rank of the current generation as it registered.
struct StoredRank {
  int rank = 0;
  std::string hostname;
  int pid = 0;
  std::string device;
  int metrics_port = 0;
  bool finished = false;
  bool ok = true;
  bool preempted = false;
};

struct StoredProgress {
  std::int64_t global_step = 0;
  std::int64_t samples = 0;
};

struct StoredPlan {
  int epoch = 0;
  int world_size = 0;
  std::string digest;  // epoch_plan_digest
};

// Where the generation stands.
enum class GenerationState {
  kNone,     // no generation formed yet (registering generation 1)
  kRunning,  // `generation` formed and trains
  kEnded,    // `generation` ended (failure, lost rank, preemption); the next one registers
};

// Everything load() returns; default-constructed for a fresh job.
struct StoredJob {
  std::string job_id;            // sha256 hex of the job config text + seed
  int world_size = 0;            // 0 until known
  std::uint64_t generation = 0;  // the newest formed generation, 0 before the first
  GenerationState state = GenerationState::kNone;
  std::string end_cause;                   // kEnded: restart cause label (e.g. "worker_failed")
  std::string end_detail;                  // kEnded: human-readable reason
  std::string assignment;                  // serialized RegisterResponse template of `generation`
  std::vector<StoredRank> ranks;           // the generation's registrations, by rank
  std::map<int, StoredProgress> progress;  // by rank, latest batched write
  std::vector<StoredPlan> plans;           // plans issued, by (epoch, world_size)
  std::int64_t last_committed_step = -1;
  std::string last_committed_path;
  // Checkpoint reports of `generation` not yet committed: step -> rank -> path.
  std::map<std::int64_t, std::map<int, std::string>> pending_checkpoints;
  std::map<std::string, std::int64_t> restarts;  // cause label -> count
  bool done = false;
  int exit_code = 0;
  std::string done_reason;  // done: why the job ended (record_job_done)
};

class StateStore {
 public:
  // The schema version this code writes; older databases are refused (no migration yet).
  static constexpr int kSchemaVersion = 1;

  // The identity of a job: sha256 hex of its config text and seed.
  static std::string job_id_for(const std::string& config_text, std::uint64_t seed);

  // Opens (creating it and its directory when missing) the database at `path` for job `job_id`.
  // A database of the same job is kept for load(), finished or not (the service then keeps a
  // finished job finished, or calls start_fresh_record); one of another job that finished (any
  // exit code) is reset to a fresh record. Throws std::runtime_error naming `path` when the file
  // holds another job that has not finished, has another schema version, or cannot be
  // opened/written.
  StateStore(const std::string& path, const std::string& job_id);
  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  const std::string& path() const { return path_; }
  // Whether the constructor found state of this job to restore (not a fresh record).
  bool resumed() const { return resumed_; }
  // Replaces the kept record by a fresh one of the same job (a finished job run again).
  void start_fresh_record();

  // The whole stored state. Throws std::runtime_error naming the path on SQLite errors.
  StoredJob load() const;

  // Writers: each is one transaction; throw std::runtime_error naming the path on failure.
  void set_world_size(int world_size);
  // A generation formed: replaces the ranks, clears progress and pending checkpoints, stores
  // the response template and, when restart_cause is non-empty, counts one restart of it.
  void record_generation_formed(std::uint64_t generation, int world_size,
                                const std::string& assignment, const std::vector<StoredRank>& ranks,
                                const std::string& restart_cause);
  // The running generation ended; `cause` is the restart label the next generation counts.
  void record_generation_ended(std::uint64_t generation, const std::string& cause,
                               const std::string& detail);
  void record_rank_finished(int rank, bool ok, bool preempted);
  void record_plan(int epoch, int world_size, const std::string& digest);
  void record_checkpoint_report(std::int64_t step, int rank, const std::string& path);
  // A checkpoint committed: last committed (step, path); pending reports up to step dropped.
  void record_commit(std::int64_t step, const std::string& path);
  // Latest progress per rank (rank -> values), in one transaction.
  void record_progress(const std::map<int, StoredProgress>& progress);
  void record_job_done(int exit_code, const std::string& reason);

 private:
  // Runs fn inside BEGIN IMMEDIATE ... COMMIT (ROLLBACK when it throws). mutex_ held.
  template <class Fn>
  void transaction(Fn&& fn) const;
  void exec(const char* sql) const;  // mutex_ held
  void reset_record(const std::string& job_id);  // mutex_ held, inside a transaction
  [[noreturn]] void fail(const std::string& what) const;

  std::string path_;
  bool resumed_ = false;
  mutable std::mutex mutex_;
  sqlite3* db_ = nullptr;
};

}  // namespace lf
