// CoordinatorProcess: posix_spawn (no fork of this multi-threaded process), the bound address
// from the log, and /proc readings.
#include "bench/coordinator_load/coordinator_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

extern char** environ;

namespace lf::load {

namespace {

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

long status_field(const std::string& status, const char* key) {
  const std::size_t at = status.find(std::string("\n") + key + ":");
  if (at == std::string::npos) return 0;
  return std::strtol(status.c_str() + at + std::strlen(key) + 2, nullptr, 10);
}

// The exit code of a waitpid status: 128 + signal when killed by one.
int code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

ProcStats read_proc_stats(pid_t pid) {
  ProcStats s;
  const std::string stat = read_all("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t paren = stat.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) return s;
  std::istringstream fields(stat.substr(paren + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; fields >> field; ++i) {  // field 3 is the state
    if (i == 14) utime = std::stoull(field);
    if (i == 15) {
      stime = std::stoull(field);
      break;
    }
  }
  s.cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  const std::string status = "\n" + read_all("/proc/" + std::to_string(pid) + "/status");
  s.rss_kib = status_field(status, "VmRSS");
  s.peak_rss_kib = status_field(status, "VmHWM");
  s.threads = static_cast<int>(status_field(status, "Threads"));
  return s;
}

CoordinatorProcess::CoordinatorProcess(const std::string& binary, const std::string& config,
                                       const std::string& token, const std::string& log_path,
                                       std::chrono::seconds start_timeout)
    : binary_(binary), log_path_(log_path) {
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "LF_JOB_TOKEN=", 13) != 0) env_text.emplace_back(*e);
  }
  env_text.push_back("LF_JOB_TOKEN=" + token);
  std::vector<char*> envp;
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = {binary, "--config", config};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  const int rc = posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw std::runtime_error("cannot start " + binary + ": " + std::strerror(rc));
  }
  running_ = true;
  const std::string marker = "serving lorafleet.v1.Coordinator on ";
  const auto until = std::chrono::steady_clock::now() + start_timeout;
  while (address_.empty()) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      running_ = false;
      throw std::runtime_error(binary + " exited with code " + std::to_string(code_of(status)) +
                               " before serving:\n" + log_tail());
    }
    const std::string log = read_all(log_path_);
    if (const std::size_t at = log.find(marker); at != std::string::npos) {
      const std::size_t begin = at + marker.size();
      address_ = log.substr(begin, log.find_first_of(" \n", begin) - begin);
      break;
    }
    if (std::chrono::steady_clock::now() > until) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      running_ = false;
      throw std::runtime_error(binary + " did not serve within " +
                               std::to_string(start_timeout.count()) + " s:\n" + log_tail());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  sampler_ = std::thread([this] { sample_loop(); });
}

CoordinatorProcess::~CoordinatorProcess() {
  if (running_) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    running_ = false;
  }
  if (sampler_.joinable()) sampler_.join();
}

void CoordinatorProcess::sample_loop() {
  while (running_) {
    const ProcStats s = read_proc_stats(pid_);
    if (s.threads > peak_threads_) peak_threads_ = s.threads;
    if (s.rss_kib > peak_rss_kib_) peak_rss_kib_ = s.rss_kib;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

ProcStats CoordinatorProcess::stats() const {
  return running_ ? read_proc_stats(pid_) : ProcStats{};
}

bool CoordinatorProcess::log_contains(const std::string& text) const {
  return read_all(log_path_).find(text) != std::string::npos;
}

std::string CoordinatorProcess::log_tail() const {
  const std::string log = read_all(log_path_);
  return log.size() > 4000 ? "..." + log.substr(log.size() - 4000) : log;
}

int CoordinatorProcess::stop(std::chrono::seconds timeout) {
  if (!running_) return -1;
  kill(pid_, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) != pid_) {
    if (std::chrono::steady_clock::now() > until) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  running_ = false;
  if (sampler_.joinable()) sampler_.join();
  return code_of(status);
}

}  // namespace lf::load
