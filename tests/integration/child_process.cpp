// Background programs for the integration tests (see header).
#include "tests/integration/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "tests/integration/process_util.h"

namespace lf::test {

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::string& log_path,
                           const std::vector<std::pair<std::string, std::string>>& env)
    : log_path_(log_path) {
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ > 0) {
    setpgid(pid_, pid_);  // also here: a kill_group right after fork must reach it
    return;
  }
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
  }
  for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

ChildProcess::~ChildProcess() { kill_group(); }

void ChildProcess::signal(int sig) const {
  if (!exit_code_) kill(pid_, sig);
}

void ChildProcess::kill_group() {
  if (pid_ <= 0 || exit_code_) return;
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::optional<int> ChildProcess::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!exit_code_) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return exit_code_;
}

bool ChildProcess::running() { return !wait(std::chrono::milliseconds(0)); }

std::string ChildProcess::log() const { return read_file(log_path_); }

bool ChildProcess::wait_for_log(const std::string& text, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (log().find(text) == std::string::npos) {
    if (!running()) return log().find(text) != std::string::npos;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

namespace {
// The fields of /proc/<pid>/stat after "pid (comm)" (comm may hold spaces and parentheses);
// "" when the process is gone.
std::string stat_fields(const std::string& stat_path) {
  const std::string stat = read_file(stat_path);
  const std::size_t close = stat.rfind(')');
  return close == std::string::npos ? "" : stat.substr(close + 1);
}
}  // namespace

char process_state(pid_t pid) {
  char state = 0;
  const std::string fields = stat_fields("/proc/" + std::to_string(pid) + "/stat");
  return std::sscanf(fields.c_str(), " %c", &state) == 1 ? state : 0;
}

std::vector<pid_t> child_pids(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    // /proc/<pid>/stat: "pid (comm) state ppid ...".
    const std::string fields = stat_fields(e.path().string() + "/stat");
    char state = 0;
    int ppid = 0;
    if (std::sscanf(fields.c_str(), " %c %d", &state, &ppid) == 2 && ppid == parent) {
      out.push_back(static_cast<pid_t>(std::stol(name)));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::string> process_env(pid_t pid, const std::string& name) {
  const std::string env = read_file("/proc/" + std::to_string(pid) + "/environ");
  const std::string key = name + "=";
  for (std::size_t at = 0; at < env.size();) {
    const std::size_t end = std::min(env.find('\0', at), env.size());
    if (env.compare(at, key.size(), key) == 0)
      return env.substr(at + key.size(), end - at - key.size());
    at = end + 1;
  }
  return std::nullopt;
}

}  // namespace lf::test
