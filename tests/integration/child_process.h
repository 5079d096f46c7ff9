// A program the integration tests run in the background (a coordinator, lorafleet-launch): its
// stdout and stderr go to a log file the test can watch, it can be signalled and waited for with
// a deadline, and it never outlives the test: it is SIGKILLed with its process group when the
// object goes away, and the kernel kills it if the test process dies (PR_SET_PDEATHSIG). Also
// the /proc lookups the fault tests need (a process's children, one of its environment
// variables).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lf::test {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with `argv`, its output appended to `log_path` (created), `env`
  // added to this process's environment, in a process group of its own. Throws
  // std::runtime_error when fork fails; a program that cannot be run exits 127.
  ChildProcess(const std::vector<std::string>& argv, const std::string& log_path,
               const std::vector<std::pair<std::string, std::string>>& env = {});
  ~ChildProcess();  // kill_group() unless it was reaped
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Sends `sig` to the process itself.
  void signal(int sig) const;
  // SIGKILL to its process group, then reaps it. Idempotent.
  void kill_group();
  // Its exit code (128 + the signal when a signal ended it), waiting at most `timeout`;
  // nullopt while it still runs.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  // Whether it has not exited yet (reaps it when it has).
  bool running();
  // The whole log so far.
  std::string log() const;
  // Waits at most `timeout` for `text` in the log; false also as soon as the process has exited
  // without writing it.
  bool wait_for_log(const std::string& text, std::chrono::milliseconds timeout);

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;  // set once reaped
};

// The pids whose parent is `parent` (from /proc/<pid>/stat), ascending.
std::vector<pid_t> child_pids(pid_t parent);
// The state letter of /proc/<pid>/stat ('R' running, 'S' sleeping, 'T' stopped, 'Z' zombie...);
// 0 when the process is gone.
char process_state(pid_t pid);
// The value of `name` in /proc/<pid>/environ; nullopt when unset or the process is gone.
std::optional<std::string> process_env(pid_t pid, const std::string& name);

}  // namespace lf::test
