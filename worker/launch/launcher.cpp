// lorafleet-launch (see header).
#include "worker/launch/launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/util/exit_codes.h"
#include "common/util/log.h"

namespace lf {
namespace {

std::atomic<int> g_signal{0};
extern "C" void on_signal(int sig) { g_signal.store(sig); }

using Clock = std::chrono::steady_clock;

struct Member {
  pid_t pid = -1;
  int rank = 0;
  bool done = false;
  int status = 0;
};

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    return std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

int code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

pid_t spawn(const LaunchOptions& o, int rank, int restart_count, const std::string& cause) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    throw std::runtime_error(std::string("lorafleet-launch: fork failed: ") + std::strerror(errno));
  }
  if (pid > 0) {
    // Also here, not only in the child: a kill(-pid) right after fork must reach the group.
    setpgid(pid, pid);
    return pid;
  }
  // Child: its own process group, so a terminal's Ctrl-C reaches the launcher only; and it dies
  // with the launcher, so a SIGKILLed supervisor leaves no orphans training on.
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  if (o.nproc > 0) {
    setenv("LF_RANK", std::to_string(rank).c_str(), 1);
    setenv("LF_LOCAL_RANK", std::to_string(rank).c_str(), 1);
    setenv("LF_WORLD_SIZE", std::to_string(o.nproc).c_str(), 1);
    setenv("LF_LAUNCHER", "env", 1);
  }
  setenv("LF_RESTART_COUNT", std::to_string(restart_count).c_str(), 1);
  setenv("LF_RESTART_CAUSE", cause.c_str(), 1);
  // The one budget: the workers hand it to the coordinator (RegisterRequest.max_restarts).
  if (o.max_restarts) setenv("LF_MAX_RESTARTS", std::to_string(*o.max_restarts).c_str(), 1);
  // Every start continues from the last committed checkpoint, if there is one (an explicit
  // --resume on the member's command line wins over the variable).
  setenv("LF_RESUME", "auto", /*overwrite=*/0);
  std::vector<char*> argv;
  for (const std::string& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  std::fprintf(stderr, "lorafleet-launch: cannot run %s: %s\n", argv[0], std::strerror(errno));
  _exit(127);
}

// Sends `sig` to every running member's process group.
void signal_all(std::vector<Member>& members, int sig) {
  for (Member& m : members) {
    if (!m.done && m.pid > 0) kill(-m.pid, sig);
  }
}

// Reaps members without blocking; returns true when every member is done.
bool reap(std::vector<Member>& members) {
  bool all = true;
  for (Member& m : members) {
    if (m.done) continue;
    int status = 0;
    const pid_t r = waitpid(m.pid, &status, WNOHANG);
    if (r == m.pid) {
      m.done = true;
      m.status = status;
    } else {
      all = false;
    }
  }
  return all;
}

// Stops the remaining members: SIGTERM (they may commit a checkpoint), SIGKILL after the grace.
// Sends `sig` (SIGTERM: preemption, SIGINT: an operator's stop) and SIGKILLs whatever is left
// after the grace.
void stop_group(std::vector<Member>& members, double grace_seconds, int sig = SIGTERM) {
  signal_all(members, sig);
  const auto deadline = Clock::now() + std::chrono::duration<double>(grace_seconds);
  while (!reap(members)) {
    if (Clock::now() >= deadline) {
      signal_all(members, SIGKILL);
      while (!reap(members)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

double restart_backoff(const LaunchOptions& o, int k) {
  return std::min(o.backoff_max_seconds, o.backoff_seconds * std::pow(2.0, std::max(0, k - 1)));
}

int run_launcher(const LaunchOptions& o) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  set_log_role("launch");

  int failures = 0;  // restarts charged to max_restarts
  int restarts = 0;  // all restarts
  std::string cause;         // why the group last failed, for the log
  std::string member_cause;  // ... as the members get it (LF_RESTART_CAUSE)
  while (true) {
    const int n = std::max(1, o.nproc);
    std::vector<Member> members(n);
    for (int r = 0; r < n; ++r) {
      members[r].rank = r;
      members[r].pid = spawn(o, r, restarts, member_cause);
    }
    LF_INFO((restarts == 0 ? "started " : "restarted ")
            << (o.nproc > 0 ? std::to_string(n) + " ranks" : o.command[0])
            << (restarts == 0 ? "" : " (restart " + std::to_string(restarts) + ")"));
    // Wait for the first member to end (or a signal).
    const Member* first_bad = nullptr;
    while (true) {
      if (g_signal.load() != 0) break;
      const bool all = reap(members);
      for (const Member& m : members) {
        if (!m.done || (WIFEXITED(m.status) && WEXITSTATUS(m.status) == 0)) continue;
        // Reaped together, a member that lost its peer (exit 75) is the consequence of one
        // that died (e.g. SIGKILL): the cause is the other one.
        const bool peer_lost = code_of(m.status) == kExitPeerLost;
        if (first_bad == nullptr || (code_of(first_bad->status) == kExitPeerLost && !peer_lost)) {
          first_bad = &m;
        }
      }
      if (first_bad != nullptr || all) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (const int sig = g_signal.load(); sig != 0) {
      // Ctrl-C (SIGINT) is an operator's stop: the workers commit a checkpoint and exit 0.
      // SIGTERM is a preemption: they commit one and exit 143.
      const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
      LF_WARN("signal " << sig << ": forwarding " << name
                        << " to the group and waiting for its checkpoint");
      stop_group(members, o.stop_grace_seconds, sig == SIGINT ? SIGINT : SIGTERM);
      // All members done with 0: the job ended as the signal came, or stopped on SIGINT.
      const bool all_ok = std::all_of(members.begin(), members.end(), [](const Member& m) {
        return WIFEXITED(m.status) && WEXITSTATUS(m.status) == 0;
      });
      return all_ok ? 0 : kExitPreempted;
    }
    if (first_bad == nullptr) {
      LF_INFO("all " << n << " members finished"
                     << (restarts > 0 ? " after " + std::to_string(restarts) + " restart(s)" : ""));
      return 0;
    }
    const int code = code_of(first_bad->status);
    cause = (o.nproc > 0 ? "rank " + std::to_string(first_bad->rank) + " " : o.command[0] + " ") +
            describe_status(first_bad->status);
    LF_WARN(cause << "; stopping the rest of the group");
    stop_group(members, o.stop_grace_seconds);
    if (code == kExitBadInput || code == kExitCancelled || code == 126 || code == 127) {
      // 3: bad input or a refusal by the coordinator; 4: an operator cancelled the job;
      // 126/127: the command cannot be run.
      LF_ERROR(cause << ": restarting cannot help; giving up"
                     << (code == kExitBadInput && failures > 0 && !o.max_restarts
                             ? " (bad input, or the coordinator refused the group because the "
                               "job's restart budget cluster.max_restarts is spent: the workers' "
                               "log says which; raise cluster.max_restarts in the job config)"
                             : ""));
      return code;
    }
    const bool preempted = code == kExitPreempted;
    if (!preempted) ++failures;
    // The coordinator counts a restart against the same budget unless its cause is the label
    // "preemption" (a group preempted before its ranks could report it, e.g. while loading,
    // re-registers with nothing else to tell it apart from a failure).
    member_cause = preempted ? "preemption" : cause;
    if (o.max_restarts && failures > *o.max_restarts) {
      LF_ERROR("lorafleet-launch --max-restarts (" << *o.max_restarts
                                                   << ") exhausted; last failure: " << cause
                                                   << "; raise --max-restarts (LF_MAX_RESTARTS)");
      return code == 0 ? 1 : code;
    }
    ++restarts;
    const double wait = preempted ? 0.0 : restart_backoff(o, failures);
    LF_WARN("restart " << restarts << (preempted ? " (preemption, not counted)" : "")
                       << ": failures " << failures << " of "
                       << (o.max_restarts ? std::to_string(*o.max_restarts) +
                                                " (lorafleet-launch --max-restarts)"
                                          : std::string("the coordinator's cluster.max_restarts"))
                       << ", in " << wait << " s, from the last committed checkpoint");
    const auto until = Clock::now() + std::chrono::duration<double>(wait);
    while (Clock::now() < until && g_signal.load() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (g_signal.load() != 0) return kExitPreempted;
  }
}

int launcher_main(int argc, char** argv) {
  CLI::App app{
      "lorafleet-launch: start a lorafleet group and restart it from the last committed "
      "checkpoint when a member fails (docs/cluster.md)"};
  LaunchOptions o;
  app.add_option("--nproc", o.nproc,
                 "ranks to start on this host (LF_RANK/LF_WORLD_SIZE, Gloo); 0: run the command "
                 "once as is, e.g. mpirun")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-restarts", o.max_restarts,
                 "failures tolerated before giving up, also the coordinator's budget for the "
                 "group (default: the job's cluster.max_restarts, which the coordinator "
                 "enforces); preemptions do not count")
      ->envname("LF_MAX_RESTARTS")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--restart-backoff", o.backoff_seconds,
                 "seconds before the first restart, doubling (cluster.restart_backoff_seconds)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--restart-backoff-max", o.backoff_max_seconds,
                 "backoff cap in seconds (cluster.restart_backoff_max_seconds)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--stop-grace", o.stop_grace_seconds,
                 "seconds between SIGTERM and SIGKILL when stopping a group")
      ->check(CLI::NonNegativeNumber);
  app.add_option("command", o.command, "the member command, after --")->required();
  app.positionals_at_end();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return run_launcher(o);
}

}  // namespace lf
