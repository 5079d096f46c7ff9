// StateStore over the SQLite C API. WAL mode lets the ticker's progress batches and the RPC
// handlers' event writes append without rewriting the database; synchronous=FULL makes every
// commit survive a power loss, not only a process kill. That costs one fsync per transaction,
// which is harmless at this write rate (events plus one progress batch a second) and matters:
// once a checkpoint commit is acknowledged, workers prune older checkpoints
// (keep_last_n_checkpoints), so a database that forgot the commit could point at deleted files.
#include "coordinator/state_store.h"

#include <sqlite3.h>

#include <filesystem>
#include <stdexcept>
#include <utility>

#include "common/io/sha256.h"
#include "common/util/log.h"

namespace lf {
namespace {

// A prepared statement, finalized on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) {
      throw std::runtime_error(std::string("cannot prepare \"") + sql +
                               "\": " + sqlite3_errmsg(db));
    }
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, std::int64_t v) {
    check(sqlite3_bind_int64(stmt_, i, v));
    return *this;
  }
  Stmt& bind(int i, const std::string& v) {
    check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind_blob(int i, const std::string& v) {
    check(sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  // true while a row is available.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw std::runtime_error(sqlite3_errmsg(db_));
  }
  void run() {
    while (step()) {
    }
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  std::int64_t i64(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::string text(int col) const {
    const void* p = sqlite3_column_blob(stmt_, col);
    const int n = sqlite3_column_bytes(stmt_, col);
    return p == nullptr ? std::string() : std::string(static_cast<const char*>(p), n);
  }

 private:
  void check(int rc) const {
    if (rc != SQLITE_OK) throw std::runtime_error(sqlite3_errmsg(db_));
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// One row of `job` (id = 1) holds the scalar state; the other tables hold lists.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS job (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  job_id TEXT NOT NULL,
  created_unix INTEGER NOT NULL,
  world_size INTEGER NOT NULL DEFAULT 0,
  generation INTEGER NOT NULL DEFAULT 0,
  generation_state TEXT NOT NULL DEFAULT 'none',
  end_cause TEXT NOT NULL DEFAULT '',
  end_detail TEXT NOT NULL DEFAULT '',
  assignment BLOB,
  last_committed_step INTEGER NOT NULL DEFAULT -1,
  last_committed_path TEXT NOT NULL DEFAULT '',
  done INTEGER NOT NULL DEFAULT 0,
  exit_code INTEGER NOT NULL DEFAULT 0,
  done_reason TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS ranks (
  rank INTEGER PRIMARY KEY,
  generation INTEGER NOT NULL,
  hostname TEXT NOT NULL,
  pid INTEGER NOT NULL,
  device TEXT NOT NULL,
  metrics_port INTEGER NOT NULL,
  finished INTEGER NOT NULL DEFAULT 0,
  ok INTEGER NOT NULL DEFAULT 1,
  preempted INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS progress (
  rank INTEGER PRIMARY KEY,
  global_step INTEGER NOT NULL,
  samples INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS epoch_plans (
  epoch INTEGER NOT NULL,
  world_size INTEGER NOT NULL,
  digest TEXT NOT NULL,
  PRIMARY KEY (epoch, world_size));
CREATE TABLE IF NOT EXISTS pending_checkpoints (
  step INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  path TEXT NOT NULL,
  PRIMARY KEY (step, rank));
CREATE TABLE IF NOT EXISTS restarts (
  cause TEXT PRIMARY KEY,
  count INTEGER NOT NULL);
)sql";

const char* state_name(GenerationState s) {
  switch (s) {
    case GenerationState::kRunning: return "running";
    case GenerationState::kEnded: return "ended";
    case GenerationState::kNone: break;
  }
  return "none";
}

GenerationState state_from(const std::string& s) {
  if (s == "running") return GenerationState::kRunning;
  if (s == "ended") return GenerationState::kEnded;
  return GenerationState::kNone;
}

}  // namespace

std::string StateStore::job_id_for(const std::string& config_text, std::uint64_t seed) {
  return sha256_hex(config_text + "\n--lorafleet-seed " + std::to_string(seed));
}

void StateStore::fail(const std::string& what) const {
  throw std::runtime_error("coordinator state " + path_ + ": " + what);
}

void StateStore::exec(const char* sql) const {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err != nullptr ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    fail(msg);
  }
}

template <class Fn>
void StateStore::transaction(Fn&& fn) const {
  // IMMEDIATE takes the write lock up front, so a busy database waits in busy_timeout here
  // rather than failing half way through.
  exec("BEGIN IMMEDIATE");
  try {
    fn();
  } catch (const std::exception& e) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    fail(e.what());
  }
  exec("COMMIT");
}

StateStore::StateStore(const std::string& path, const std::string& job_id) : path_(path) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) fail("cannot create " + parent.string() + ": " + ec.message());
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    const std::string msg = db_ != nullptr ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    fail("cannot open: " + msg);
  }
  try {
    // Another process holding the write lock (a second coordinator on the same output_dir)
    // makes writes wait up to 5 s, then fail with a message rather than hang.
    sqlite3_busy_timeout(db_, 5000);
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=FULL");
    exec("PRAGMA foreign_keys=ON");
    std::lock_guard<std::mutex> lock(mutex_);
    transaction([&] {
      exec(kSchema);
      Stmt version(db_, "SELECT version FROM schema_version");
      if (version.step()) {
        if (version.i64(0) != kSchemaVersion) {
          throw std::runtime_error("schema version " + std::to_string(version.i64(0)) +
                                   ", this coordinator reads version " +
                                   std::to_string(kSchemaVersion) +
                                   " (remove the file to start the job afresh)");
        }
      } else {
        Stmt(db_, "INSERT INTO schema_version (version) VALUES (?)").bind(1, kSchemaVersion).run();
      }
      Stmt job(db_, "SELECT job_id, done FROM job WHERE id = 1");
      bool fresh = true;
      if (job.step()) {
        const std::string stored_id = job.text(0);
        const bool done = job.i64(1) != 0;
        if (!done && stored_id != job_id) {
          throw std::runtime_error(
              "holds the state of another job (config sha256 " + stored_id.substr(0, 12) +
              "..., this config " + job_id.substr(0, 12) +
              "...) that has not finished; use another output.output_dir, or remove the file "
              "to abandon that job");
        }
        // The same job, finished or not, is kept for load(): the service decides whether a
        // finished one stays finished (start_fresh_record otherwise). Another job's finished
        // record gives way to this one.
        if (stored_id == job_id) fresh = false;
      }
      if (fresh) reset_record(job_id);
      resumed_ = !fresh;
    });
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

void StateStore::reset_record(const std::string& job_id) {
  for (const char* t :
       {"job", "ranks", "progress", "epoch_plans", "pending_checkpoints", "restarts"}) {
    exec((std::string("DELETE FROM ") + t).c_str());
  }
  Stmt(db_, "INSERT INTO job (id, job_id, created_unix) VALUES (1, ?, strftime('%s'))")
      .bind(1, job_id)
      .run();
}

void StateStore::start_fresh_record() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string job_id;
  transaction([&] {
    Stmt job(db_, "SELECT job_id FROM job WHERE id = 1");
    if (!job.step()) fail("no job record");
    job_id = job.text(0);
    reset_record(job_id);
  });
  resumed_ = false;
}

StateStore::~StateStore() {
  if (db_ != nullptr) sqlite3_close(db_);
}

StoredJob StateStore::load() const {
  std::lock_guard<std::mutex> lock(mutex_);
  StoredJob j;
  try {
    Stmt job(db_,
             "SELECT job_id, world_size, generation, generation_state, end_cause, end_detail, "
             "assignment, last_committed_step, last_committed_path, done, exit_code, "
             "done_reason FROM job WHERE id = 1");
    if (!job.step()) fail("no job record");
    j.job_id = job.text(0);
    j.world_size = static_cast<int>(job.i64(1));
    j.generation = static_cast<std::uint64_t>(job.i64(2));
    j.state = state_from(job.text(3));
    j.end_cause = job.text(4);
    j.end_detail = job.text(5);
    j.assignment = job.text(6);
    j.last_committed_step = job.i64(7);
    j.last_committed_path = job.text(8);
    j.done = job.i64(9) != 0;
    j.exit_code = static_cast<int>(job.i64(10));
    j.done_reason = job.text(11);

    Stmt ranks(db_,
               "SELECT rank, hostname, pid, device, metrics_port, finished, ok, preempted "
               "FROM ranks ORDER BY rank");
    while (ranks.step()) {
      StoredRank r;
      r.rank = static_cast<int>(ranks.i64(0));
      r.hostname = ranks.text(1);
      r.pid = static_cast<int>(ranks.i64(2));
      r.device = ranks.text(3);
      r.metrics_port = static_cast<int>(ranks.i64(4));
      r.finished = ranks.i64(5) != 0;
      r.ok = ranks.i64(6) != 0;
      r.preempted = ranks.i64(7) != 0;
      j.ranks.push_back(r);
    }
    Stmt progress(db_, "SELECT rank, global_step, samples FROM progress");
    while (progress.step()) {
      j.progress[static_cast<int>(progress.i64(0))] = {progress.i64(1), progress.i64(2)};
    }
    Stmt plans(db_, "SELECT epoch, world_size, digest FROM epoch_plans ORDER BY world_size, epoch");
    while (plans.step()) {
      j.plans.push_back(
          {static_cast<int>(plans.i64(0)), static_cast<int>(plans.i64(1)), plans.text(2)});
    }
    Stmt pending(db_, "SELECT step, rank, path FROM pending_checkpoints");
    while (pending.step()) {
      j.pending_checkpoints[pending.i64(0)][static_cast<int>(pending.i64(1))] = pending.text(2);
    }
    Stmt restarts(db_, "SELECT cause, count FROM restarts");
    while (restarts.step()) j.restarts[restarts.text(0)] = restarts.i64(1);
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (what.rfind("coordinator state ", 0) == 0) throw;
    fail(what);
  }
  return j;
}

void StateStore::set_world_size(int world_size) {
  std::lock_guard<std::mutex> lock(mutex_);
  transaction(
      [&] { Stmt(db_, "UPDATE job SET world_size = ? WHERE id = 1").bind(1, world_size).run(); });
}

void StateStore::record_generation_formed(std::uint64_t generation, int world_size,
                                          const std::string& assignment,
                                          const std::vector<StoredRank>& ranks,
                                          const std::string& restart_cause) {
  std::lock_guard<std::mutex> lock(mutex_);
  transaction([&] {
    Stmt(db_,
         "UPDATE job SET generation = ?, world_size = ?, generation_state = 'running', "
         "end_cause = '', end_detail = '', assignment = ? WHERE id = 1")
        .bind(1, static_cast<std::int64_t>(generation))
        .bind(2, world_size)
        .bind_blob(3, assignment)
        .run();
    exec("DELETE FROM ranks");
    exec("DELETE FROM progress");
    exec("DELETE FROM pending_checkpoints");
    Stmt insert(db_,
                "INSERT INTO ranks (rank, generation, hostname, pid, device, metrics_port, "
                "finished, ok, preempted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    for (const StoredRank& r : ranks) {
      insert.bind(1, r.rank)
          .bind(2, static_cast<std::int64_t>(generation))
          .bind(3, r.hostname)
          .bind(4, r.pid)
          .bind(5, r.device)
          .bind(6, r.metrics_port)
          .bind(7, r.finished ? 1 : 0)
          .bind(8, r.ok ? 1 : 0)
          .bind(9, r.preempted ? 1 : 0)
          .run();
    }
    if (!restart_cause.empty()) {
      Stmt(db_,
           "INSERT INTO restarts (cause, count) VALUES (?, 1) "
           "ON CONFLICT (cause) DO UPDATE SET count = count + 1")
          .bind(1, restart_cause)
          .run();
    }
  });
}

void StateStore::record_generation_ended(std::uint64_t generation, const std::string& cause,
                                         const std::string& detail) {
  std::lock_guard<std::mutex> lock(mutex_);
  transaction([&] {
    Stmt(db_,
         "UPDATE job SET generation = ?, generation_state = ?, end_cause = ?, end_detail = ? "
         "WHERE id = 1")
        .bind(1, static_cast<std::int64_t>(generation))
        .bind(2, std::string(state_name(GenerationState::kEnded)))
        .bind(3, cause)
        .bind(4, detail)
        .run();
  });
}

void StateStore::record_rank_finished(int rank, bool ok, bool preempted) {
  std::lock_guard<std::mutex> lock(mutex_);
  transaction([&] {
    Stmt(db_, "UPDATE ranks SET finished = 1, ok = ?, preempted = ? WHERE rank = ?")
        .bind(1, ok ? 1 : 0)
        .bind(2, preempted ? 1 : 0)
        .bind(3, rank)
        .run();
  });
}

void StateStore::record_plan(int epoch, int world_size, const std::string& digest) {
  std::lock_guard<std::mutex> lock(mutex_);
  transaction([&] {
    Stmt(db_, "INSERT OR REPLACE INTO epoch_plans (epoch, world_size, digest) VALUES (?, ?, ?)")
        .bind(1, epoch)
        .bind(2, world_size)
        .bind(3, digest)
        .run();
  });
}

void StateStore::record_checkpoint_report(std::int64_t step, int rank, const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  transaction([&] {
    Stmt(db_, "INSERT OR REPLACE INTO pending_checkpoints (step, rank, path) VALUES (?, ?, ?)")
        .bind(1, step)
        .bind(2, rank)
        .bind(3, path)
        .run();
  });
}

void StateStore::record_commit(std::int64_t step, const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  transaction([&] {
    Stmt(db_, "UPDATE job SET last_committed_step = ?, last_committed_path = ? WHERE id = 1")
        .bind(1, step)
        .bind(2, path)
        .run();
    Stmt(db_, "DELETE FROM pending_checkpoints WHERE step <= ?").bind(1, step).run();
  });
}

void StateStore::record_progress(const std::map<int, StoredProgress>& progress) {
  if (progress.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  transaction([&] {
    Stmt upsert(db_,
                "INSERT OR REPLACE INTO progress (rank, global_step, samples) VALUES (?, ?, ?)");
    for (const auto& [rank, p] : progress) {
      upsert.bind(1, rank).bind(2, p.global_step).bind(3, p.samples).run();
    }
  });
}

void StateStore::record_job_done(int exit_code, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  transaction([&] {
    Stmt(db_, "UPDATE job SET done = 1, exit_code = ?, done_reason = ? WHERE id = 1")
        .bind(1, exit_code)
        .bind(2, reason)
        .run();
  });
}

}  // namespace lf
