// The chaos run (see header).
#include "tests/integration/chaos_run.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/integration/child_process.h"
#include "tests/integration/process_util.h"
#include "tests/integration/tiny_job_config.h"

namespace fs = std::filesystem;

namespace lf::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string fixed(double v, int decimals = 1) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(decimals);
  os << v;
  return os.str();
}

// The text of `path` from byte `offset` on.
std::string text_since(const std::string& path, std::size_t offset) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::size_t file_size_or_0(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  return ec ? 0 : static_cast<std::size_t>(size);
}

std::string tail(const std::string& text, std::size_t n = 6000) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

// The digits at text[at...] as a number; -1 when there are none.
std::int64_t number_at(const std::string& text, std::size_t at) {
  std::int64_t n = -1;
  for (; at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])); ++at) {
    n = (n < 0 ? 0 : n * 10) + (text[at] - '0');
  }
  return n;
}

// How often `key` occurs in `text`.
int count_of(const std::string& text, const std::string& key) {
  int n = 0;
  for (std::size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) ++n;
  return n;
}

// The number after the last `key` in `text`; -1 when absent.
std::int64_t number_after_last(const std::string& text, const std::string& key) {
  const std::size_t at = text.rfind(key);
  return at == std::string::npos ? -1 : number_at(text, at + key.size());
}

// The newest global_step in `text`, lines of rank 0's --sample-log (one JSON object per trained
// sample, flushed after each step); -1 when there is none.
std::int64_t newest_step(const std::string& text) {
  const std::string key = "\"global_step\":";
  std::int64_t best = -1;
  for (std::size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
    best = std::max(best, number_at(text, at + key.size()));
  }
  return best;
}

// The step of the checkpoint in the last "resumed from <dir>/step-N at global_step ..." line of
// `text`; -1 when there is no such line (a fresh start).
std::int64_t resumed_step(const std::string& text) {
  const std::size_t line = text.rfind("resumed from ");
  if (line == std::string::npos) return -1;
  const std::size_t name = text.find("/step-", line);
  const std::size_t eol = text.find('\n', line);
  if (name == std::string::npos || name > eol) {
    throw std::runtime_error("cannot read the checkpoint step from '" +
                             text.substr(line, eol - line) + "'");
  }
  return number_at(text, name + 6);
}

// Tears checkpoint `dir` as `f` says; returns what it did.
std::string tear_checkpoint(const fs::path& dir, const PlannedFault& f) {
  switch (f.tear) {
    case TearKind::kTruncateLora: {
      const fs::path lora = dir / "lora.safetensors";
      const std::uintmax_t size = fs::file_size(lora);
      fs::resize_file(lora, size / 2);
      return "lora.safetensors cut from " + std::to_string(size) + " to " +
             std::to_string(size / 2) + " bytes";
    }
    case TearKind::kDeleteRankRng: {
      const fs::path rng = dir / "rng" / ("rank-" + std::to_string(f.rank) + ".safetensors");
      if (!fs::remove(rng)) throw std::runtime_error("cannot tear: " + rng.string() + " missing");
      return "rng/" + rng.filename().string() + " removed";
    }
    case TearKind::kDeleteCommitted:
      if (!fs::remove(dir / "COMMITTED")) {
        throw std::runtime_error("cannot tear: " + (dir / "COMMITTED").string() + " missing");
      }
      return "COMMITTED removed";
  }
  return "";
}

// One job under lorafleet-launch --nproc world_size with its coordinator, in work_dir/<name>:
// config.yaml, out/, launcher.log, coordinator_<n>.log. Everything it started is killed when it
// goes away.
class JobUnderTest {
 public:
  JobUnderTest(const ChaosOptions& o, const TinyJobYaml& base, const std::string& name,
               int max_restarts, Clock::time_point deadline);
  ~JobUnderTest();
  void start();
  // Waits until the running group has printed step >= `step` since it started; returns the
  // newest step it printed.
  std::int64_t wait_for_step(std::int64_t step, const std::string& why);
  // Injects `f` (waiting for its step, or for the group's processes when it is early) and, with
  // `then_train`, waits until the group trains again.
  InjectedFault inject(const PlannedFault& f, Clock::time_point t0, bool then_train);
  // A late fault: after the job's last step, to whichever workers are still running.
  InjectedFault inject_late(const PlannedFault& f, Clock::time_point t0);
  int wait_launcher_exit();
  int wait_coordinator_exit();
  std::string launcher_log() const { return read_file(launcher_log_); }
  std::string coordinator_log() const { return coordinator_ ? coordinator_->log() : ""; }
  std::string lora() const { return (fs::path(out_dir_) / "e2e.safetensors").string(); }
  int coordinator_starts() const { return coordinator_starts_; }

 private:
  void start_coordinator();
  // rank -> pid of the running group's workers; waits until all world_size of them run.
  std::map<int, pid_t> group();
  // Waits for the launcher's next "restarted N ranks (restart K)"; the group's lines start
  // after it.
  void wait_for_restart();
  void tear_newest_checkpoint(const PlannedFault& f, InjectedFault& r);
  // SIGKILL, down_ms, start again on the same config; it must restore the job's state.
  void restart_coordinator(const PlannedFault& f, InjectedFault& r);
  // Polls `done` until it holds; throws naming `what` at the deadline or when the launcher
  // exits meanwhile.
  void wait_for(const std::function<bool()>& done, const std::string& what);

  const ChaosOptions& o_;
  std::string dir_, config_, out_dir_, launcher_log_;
  std::string sample_log_;  // rank 0's --sample-log file: the steps it trained
  int port_ = 0;            // the coordinator's
  int max_restarts_ = 0;
  Clock::time_point deadline_;
  std::unique_ptr<ChildProcess> coordinator_;
  std::unique_ptr<ChildProcess> launcher_;
  int coordinator_starts_ = 0;
  int group_restarts_ = 0;      // the launcher's restarts so far
  std::size_t mark_ = 0;        // launcher log offset where the running group's lines start
  std::size_t steps_mark_ = 0;  // sample log offset where the running group's steps start
};

JobUnderTest::JobUnderTest(const ChaosOptions& o, const TinyJobYaml& base, const std::string& name,
                           int max_restarts, Clock::time_point deadline)
    : o_(o), max_restarts_(max_restarts), deadline_(deadline) {
  dir_ = (fs::path(o.work_dir) / name).string();
  fs::create_directories(dir_);
  out_dir_ = dir_ + "/out";
  launcher_log_ = dir_ + "/launcher.log";
  sample_log_ = dir_ + "/samples.rank0.jsonl";
  TinyJobYaml job = base;
  job.output_dir = out_dir_;
  port_ = job.coord_port = free_port();
  config_ = dir_ + "/config.yaml";
  std::ofstream(config_) << tiny_job_yaml(job);
}

JobUnderTest::~JobUnderTest() {
  // Workers too (they may be SIGSTOPped): they die with the launcher, but not a moment later.
  if (launcher_ && launcher_->running()) {
    for (pid_t p : child_pids(launcher_->pid())) kill(p, SIGKILL);
  }
  launcher_.reset();
  coordinator_.reset();
}

void JobUnderTest::start_coordinator() {
  ++coordinator_starts_;
  const std::string log = dir_ + "/coordinator_" + std::to_string(coordinator_starts_) + ".log";
  coordinator_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{o_.programs.coordinator, "--config", config_}, log);
  if (!coordinator_->wait_for_log("serving lorafleet.v1.Coordinator", o_.wait_limit)) {
    throw std::runtime_error(
        "coordinator " + std::to_string(coordinator_starts_) + " did not start serving (" +
        (coordinator_->running() ? "within " + std::to_string(o_.wait_limit.count()) + " s"
                                 : "exit " + std::to_string(*coordinator_->wait(milliseconds(0)))) +
        ")");
  }
}

void JobUnderTest::start() {
  start_coordinator();
  const std::string address = "127.0.0.1:" + std::to_string(port_);
  const std::vector<std::string> argv = {o_.programs.launch,
                                         "--nproc",
                                         std::to_string(o_.world_size),
                                         "--max-restarts",
                                         std::to_string(max_restarts_),
                                         "--restart-backoff",
                                         "0.2",
                                         "--restart-backoff-max",
                                         "1",
                                         "--",
                                         o_.programs.worker,
                                         "--coordinator",
                                         address,
                                         "--no-progress-bar",
                                         "--sample-log",
                                         dir_ + "/samples"};
  // Fixed timestamps in the LoRA metadata, so the two runs' files can be compared byte for byte.
  launcher_ = std::make_unique<ChildProcess>(
      argv, launcher_log_,
      std::vector<std::pair<std::string, std::string>>{{"SOURCE_DATE_EPOCH", "1700000000"}});
}

void JobUnderTest::wait_for(const std::function<bool()>& done, const std::string& what) {
  const Clock::time_point until = std::min(Clock::now() + o_.wait_limit, deadline_);
  while (!done()) {
    if (!launcher_->running() && !done()) {
      throw std::runtime_error("lorafleet-launch exited with " +
                               std::to_string(*launcher_->wait(milliseconds(0))) +
                               " while waiting for " + what);
    }
    if (Clock::now() >= until) {
      throw std::runtime_error(
          "timed out waiting for " + what + " (" +
          (until == deadline_
               ? "the run's time limit"
               : "the wait limit of " + std::to_string(o_.wait_limit.count()) + " s") +
          ")");
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
}

std::int64_t JobUnderTest::wait_for_step(std::int64_t step, const std::string& why) {
  std::int64_t seen = -1;
  wait_for(
      [&] {
        seen = newest_step(text_since(sample_log_, steps_mark_));
        return seen >= step;
      },
      "step " + std::to_string(step) + " (" + why + ")");
  return seen;
}

std::map<int, pid_t> JobUnderTest::group() {
  std::map<int, pid_t> ranks;
  wait_for(
      [&] {
        ranks.clear();
        for (pid_t p : child_pids(launcher_->pid())) {
          if (const auto rank = process_env(p, "LF_RANK")) ranks[std::stoi(*rank)] = p;
        }
        return static_cast<int>(ranks.size()) == o_.world_size;
      },
      "the group's " + std::to_string(o_.world_size) + " worker processes");
  return ranks;
}

void JobUnderTest::wait_for_restart() {
  ++group_restarts_;
  const std::string line = "restarted " + std::to_string(o_.world_size) + " ranks (restart " +
                           std::to_string(group_restarts_) + ")";
  std::size_t at = std::string::npos;
  wait_for(
      [&] {
        at = text_since(launcher_log_, mark_).find(line);
        return at != std::string::npos;
      },
      "lorafleet-launch's '" + line + "'");
  mark_ += at + line.size();
  // The old group is gone (the launcher restarts after reaping all of it); the new one has not
  // trained yet.
  steps_mark_ = file_size_or_0(sample_log_);
}

void JobUnderTest::tear_newest_checkpoint(const PlannedFault& f, InjectedFault& r) {
  const std::map<int, pid_t> ranks = group();
  // Frozen, the group neither writes nor commits while its newest checkpoint is torn.
  for (const auto& [rank, pid] : ranks) {
    kill(pid, SIGSTOP);
    r.targets.push_back(pid);
  }
  wait_for(
      [&] {
        return std::all_of(r.targets.begin(), r.targets.end(),
                           [](pid_t pid) { return process_state(pid) == 'T'; });
      },
      "the group to stop (SIGSTOP)");
  const std::string root = out_dir_ + "/checkpoints";
  const std::string newest = newest_committed_checkpoint(root);
  if (newest.empty()) {
    r.detail = "no committed checkpoint yet to tear";  // an early fault at the job's start
  } else {
    r.torn_step = number_at(newest, 5);
    r.detail = newest + ": " + tear_checkpoint(fs::path(root) / newest, f);
  }
  for (pid_t pid : r.targets) kill(pid, SIGKILL);
  wait_for_restart();
}

void JobUnderTest::restart_coordinator(const PlannedFault& f, InjectedFault& r) {
  r.targets = {coordinator_->pid()};
  coordinator_->kill_group();
  std::this_thread::sleep_for(milliseconds(f.down_ms));
  start_coordinator();
  if (coordinator_->log().find("restored job state from " + out_dir_) == std::string::npos) {
    throw std::runtime_error("the restarted coordinator did not restore the job's state");
  }
  // The same group trains on: its next steps count from here.
  mark_ = file_size_or_0(launcher_log_);
  steps_mark_ = file_size_or_0(sample_log_);
}

InjectedFault JobUnderTest::inject_late(const PlannedFault& f, Clock::time_point t0) {
  InjectedFault r;
  r.planned = f;
  r.seen_step = wait_for_step(o_.steps, describe(f));
  std::this_thread::sleep_for(milliseconds(f.delay_ms));
  r.at_seconds = seconds_since(t0);
  // The group may be exiting: whatever is left is signalled, nothing is waited for.
  for (pid_t pid : child_pids(launcher_->pid())) {
    const std::optional<std::string> rank = process_env(pid, "LF_RANK");
    if (!rank || (f.kind == FaultKind::kKillWorker && std::stoi(*rank) != f.rank)) continue;
    kill(pid, f.kind == FaultKind::kKillWorker ? SIGKILL : SIGTERM);
    r.targets.push_back(pid);
  }
  r.detail = r.targets.empty() ? "the worker(s) had exited" : "";
  return r;
}

InjectedFault JobUnderTest::inject(const PlannedFault& f, Clock::time_point t0, bool then_train) {
  if (f.late) return inject_late(f, t0);
  InjectedFault r;
  r.planned = f;
  if (f.early) {
    group();  // the processes exist; they may not have trained yet
    r.seen_step = newest_step(text_since(sample_log_, steps_mark_));
  } else {
    r.seen_step = wait_for_step(f.step, describe(f));
  }
  if (f.early) {
    // `delay_ms`, or until the group trains its next step if that comes first: on an idle
    // machine a restarted tiny job can train its remaining steps and end within the 5 s an
    // early delay may draw, leaving no group to meet the fault.
    const Clock::time_point until = Clock::now() + milliseconds(f.delay_ms);
    while (Clock::now() < until &&
           newest_step(text_since(sample_log_, steps_mark_)) <= r.seen_step) {
      std::this_thread::sleep_for(milliseconds(10));
    }
  } else {
    std::this_thread::sleep_for(milliseconds(f.delay_ms));
  }
  r.at_seconds = seconds_since(t0);
  const Clock::time_point injected_at = Clock::now();
  switch (f.kind) {
    case FaultKind::kKillWorker: {
      const pid_t pid = group().at(f.rank);
      r.targets = {pid};
      kill(pid, SIGKILL);
      wait_for_restart();
      break;
    }
    case FaultKind::kTerminateGroup:
      for (const auto& [rank, pid] : group()) {
        kill(pid, SIGTERM);  // as the kubelet does to every pod of a preempted group
        r.targets.push_back(pid);
      }
      wait_for_restart();
      break;
    case FaultKind::kKillCoordinator: restart_coordinator(f, r); break;
    case FaultKind::kTornCheckpoint: tear_newest_checkpoint(f, r); break;
  }
  if (!then_train) {
    r.detail += std::string(r.detail.empty() ? "" : "; ") + "the next fault comes early";
    return r;
  }
  wait_for_step(0, "training again after " + std::string(fault_name(f.kind)));
  r.recovery_seconds = seconds_since(injected_at);
  if (f.kind == FaultKind::kTornCheckpoint && r.torn_step >= 0) {
    // Rank 0 logs "resumed from <dir> at global_step N" before the group's first step.
    r.resumed_step = resumed_step(text_since(launcher_log_, mark_));
    r.detail += r.resumed_step < 0 ? "; the group started afresh"
                                   : "; the group resumed step " + std::to_string(r.resumed_step);
  }
  return r;
}

int JobUnderTest::wait_launcher_exit() {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline_ - Clock::now());
  const std::optional<int> code = launcher_->wait(std::max(milliseconds(0), left));
  if (!code) throw std::runtime_error("lorafleet-launch did not exit within the run's time limit");
  return *code;
}

int JobUnderTest::wait_coordinator_exit() {
  const std::optional<int> code = coordinator_->wait(o_.wait_limit);
  if (!code) {
    throw std::runtime_error("the coordinator did not exit within " +
                             std::to_string(o_.wait_limit.count()) + " s of the workers");
  }
  return *code;
}

// Runs `body` on `job`; a failure is rethrown with the tails of the job's logs.
template <class Fn>
void with_logs(const std::string& name, JobUnderTest& job, Fn&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    throw std::runtime_error(name + " run: " + e.what() +
                             "\n--- lorafleet-launch log (tail) ---\n" + tail(job.launcher_log()) +
                             "\n--- coordinator log (tail) ---\n" + tail(job.coordinator_log()));
  }
}

std::string fault_line(std::size_t i, std::size_t n, const InjectedFault& f) {
  std::ostringstream os;
  os << "[chaos] fault " << i + 1 << "/" << n << " at " << fixed(f.at_seconds) << " s, step "
     << f.seen_step << ": " << describe(f.planned) << "; pid";
  for (pid_t p : f.targets) os << " " << p;
  if (!f.detail.empty()) os << "; " << f.detail;
  if (f.recovery_seconds >= 0) os << "; training again after " << fixed(f.recovery_seconds) << " s";
  return os.str();
}

}  // namespace

ChaosResult run_chaos(const ChaosOptions& o, std::ostream& log) {
  ChaosResult r;
  const Clock::time_point deadline = Clock::now() + o.time_limit;
  try {
    const std::vector<PlannedFault> plan =
        plan_faults(o.seed, o.faults, o.steps, o.save_every, o.world_size, o.late_faults);
    log << "[chaos] seed " << o.seed << ": " << o.faults << " faults in " << o.steps << " steps on "
        << o.world_size << " ranks, a checkpoint every " << o.save_every << " steps, in "
        << o.work_dir << std::endl;
    for (std::size_t i = 0; i < plan.size(); ++i) {
      log << "[chaos] plan " << i + 1 << "/" << plan.size() << ": " << describe(plan[i]) << "\n";
    }
    fs::remove_all(o.work_dir);
    TinyJobYaml base;
    base.dir = o.work_dir + "/job";
    base.checkpoint = lay_out_tiny_job(base.dir, o.demo_dir, o.programs.make_checkpoint);
    base.vocab = o.vocab;
    base.max_steps = static_cast<int>(o.steps);
    base.save_every = o.save_every;
    // Pruning runs too, as in a long real job; the newest 3 leave an older one to resume when
    // the newest is torn.
    base.output_extra = "  keep_last_n_checkpoints: 3\n";
    base.cluster = "  world_size: " + std::to_string(o.world_size) +
                   "\n  collective_timeout: 10\n  preempt_grace_seconds: 20\n"
                   "  rendezvous_timeout_seconds: 60\n";
    // The launcher's budget: exactly the faults that cost one (a preemption does not).
    const int budget = static_cast<int>(std::count_if(plan.begin(), plan.end(), [](const auto& f) {
      return f.kind == FaultKind::kKillWorker || f.kind == FaultKind::kTornCheckpoint;
    }));
    {
      JobUnderTest ref(o, base, "reference", budget, deadline);
      const Clock::time_point t = Clock::now();
      with_logs("the reference", ref, [&] {
        ref.start();
        r.reference_exit = ref.wait_launcher_exit();
        if (const int c = ref.wait_coordinator_exit(); r.reference_exit != 0 || c != 0) {
          throw std::runtime_error("exit " + std::to_string(r.reference_exit) +
                                   ", coordinator exit " + std::to_string(c));
        }
      });
      r.reference_seconds = seconds_since(t);
      r.reference_lora = ref.lora();
      log << "[chaos] reference run: " << fixed(r.reference_seconds) << " s" << std::endl;
    }
    JobUnderTest job(o, base, "chaos", budget, deadline);
    const Clock::time_point t0 = Clock::now();
    with_logs("the chaos", job, [&] {
      job.start();
      for (std::size_t i = 0; i < plan.size(); ++i) {
        const bool then_train = i + 1 == plan.size() || !plan[i + 1].early;
        r.injected.push_back(job.inject(plan[i], t0, then_train));
        log << fault_line(i, plan.size(), r.injected.back()) << std::endl;
      }
      r.launcher_exit = job.wait_launcher_exit();
      r.coordinator_exit = job.wait_coordinator_exit();
    });
    r.chaos_seconds = seconds_since(t0);
    r.coordinator_starts = job.coordinator_starts();
    const std::string launcher = job.launcher_log();
    r.launcher_restarts = count_of(
        job.launcher_log(), "restarted " + std::to_string(o.world_size) + " ranks (restart ");
    r.final_generation =
        static_cast<int>(number_after_last(job.coordinator_log(), " ranks of generation "));
    r.chaos_lora = job.lora();
    const std::string a = read_file(r.reference_lora);
    r.lora_identical = !a.empty() && a == read_file(r.chaos_lora);
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

std::vector<std::string> chaos_failures(const ChaosOptions& o, const ChaosResult& r) {
  if (!r.error.empty()) return {r.error};
  std::vector<std::string> out;
  auto expect = [&out](bool ok, const std::string& what) {
    if (!ok) out.push_back(what);
  };
  int worker_faults = 0;
  int early_worker_faults = 0;  // may come before their group formed: no generation ends then
  int late_faults = 0;          // may come after the job's end: no restart then
  int coordinator_faults = 0;
  for (const InjectedFault& f : r.injected) {
    (f.planned.kind == FaultKind::kKillCoordinator ? coordinator_faults : worker_faults) += 1;
    if (f.planned.early && f.planned.kind != FaultKind::kKillCoordinator) ++early_worker_faults;
    if (f.planned.late) ++late_faults;
    expect(f.planned.kind != FaultKind::kTornCheckpoint || f.resumed_step < f.torn_step,
           "after tearing step " + std::to_string(f.torn_step) + " the group resumed step " +
               std::to_string(f.resumed_step) + ", not an older checkpoint");
  }
  expect(
      static_cast<int>(r.injected.size()) == o.faults,
      std::to_string(r.injected.size()) + " of " + std::to_string(o.faults) + " faults injected");
  expect(r.reference_exit == 0,
         "the reference's lorafleet-launch exited " + std::to_string(r.reference_exit));
  expect(r.launcher_exit == 0, "lorafleet-launch exited " + std::to_string(r.launcher_exit));
  expect(r.coordinator_exit == 0,
         "the last coordinator exited " + std::to_string(r.coordinator_exit));
  expect(r.coordinator_starts == 1 + coordinator_faults,
         std::to_string(r.coordinator_starts) + " coordinator starts, expected " +
             std::to_string(1 + coordinator_faults));
  expect(r.launcher_restarts >= worker_faults - late_faults && r.launcher_restarts <= worker_faults,
         "lorafleet-launch restarted the group " + std::to_string(r.launcher_restarts) +
             " times, expected " + std::to_string(worker_faults - late_faults) + ".." +
             std::to_string(worker_faults) +
             " (one per worker fault, but a late one may come after the job's end)");
  const int min_generation = 1 + worker_faults - early_worker_faults - late_faults;
  expect(r.final_generation >= min_generation && r.final_generation <= worker_faults + 1,
         "the job ended in generation " + std::to_string(r.final_generation) + ", expected " +
             std::to_string(min_generation) + ".." + std::to_string(worker_faults + 1) +
             " (one per worker fault, but an early one may come before its group formed and a "
             "late one after the job's end)");
  expect(r.lora_identical, r.chaos_lora + " differs from the uninterrupted run's " +
                               r.reference_lora + " (" +
                               std::to_string(read_file(r.chaos_lora).size()) + " vs " +
                               std::to_string(read_file(r.reference_lora).size()) + " bytes)");
  return out;
}

std::string chaos_summary(const ChaosOptions& o, const ChaosResult& r) {
  std::map<std::string, int> kinds;
  for (const InjectedFault& f : r.injected) ++kinds[fault_name(f.planned.kind)];
  std::ostringstream os;
  os << "[chaos] seed " << o.seed << ", " << r.injected.size() << "/" << o.faults << " faults (";
  for (auto it = kinds.begin(); it != kinds.end(); ++it) {
    os << (it == kinds.begin() ? "" : ", ") << it->first << " " << it->second;
  }
  os << ") in " << o.steps << " steps on " << o.world_size << " ranks: reference "
     << fixed(r.reference_seconds) << " s, chaos " << fixed(r.chaos_seconds) << " s, "
     << r.launcher_restarts << " group restarts, generation " << r.final_generation << ", "
     << r.coordinator_starts << " coordinator starts, LoRA "
     << (r.lora_identical ? "identical" : "DIFFERENT") << ": "
     << (chaos_failures(o, r).empty() ? "PASSED" : "FAILED");
  return os.str();
}

}  // namespace lf::test
