// A lorafleet-coordinator process for a load test: started on a job YAML with a job token, its
// bound gRPC address read from its log, its CPU time, memory and threads read from /proc/<pid>
// (Linux), and stopped with SIGTERM (during coordinator.linger_seconds, after the job) to read
// its exit code.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

namespace lf::load {

// One reading of /proc/<pid>/stat and /proc/<pid>/status.
struct ProcStats {
  double cpu_seconds = 0.0;  // user + system time so far (utime + stime), seconds
  long rss_kib = 0;          // VmRSS
  long peak_rss_kib = 0;     // VmHWM: the peak resident set so far
  int threads = 0;           // Threads
};

class CoordinatorProcess {
 public:
  // Starts `binary --config <config>` with LF_JOB_TOKEN=<token> in its environment and its
  // stdout + stderr in `log_path`, then waits up to `start_timeout` for the log line
  // "serving lorafleet.v1.Coordinator on HOST:PORT" (the dataset scan comes first). Starts a
  // sampler of its thread count and RSS every 10 ms. Throws std::runtime_error naming the
  // binary and quoting the log's end when it cannot start, exits or does not serve in time.
  CoordinatorProcess(const std::string& binary, const std::string& config, const std::string& token,
                     const std::string& log_path, std::chrono::seconds start_timeout);
  ~CoordinatorProcess();  // SIGKILL and reap when still running

  CoordinatorProcess(const CoordinatorProcess&) = delete;
  CoordinatorProcess& operator=(const CoordinatorProcess&) = delete;

  const std::string& address() const { return address_; }  // "127.0.0.1:PORT"
  pid_t pid() const { return pid_; }
  // Now, from /proc; all zero once the process has exited.
  ProcStats stats() const;
  // The most threads and the largest RSS (KiB) the sampler saw so far.
  int peak_threads() const { return peak_threads_.load(); }
  long peak_sampled_rss_kib() const { return peak_rss_kib_.load(); }
  // Whether the log holds `text` (e.g. a line the test expects).
  bool log_contains(const std::string& text) const;
  // SIGTERM, then waits up to `timeout` (SIGKILL after it); returns the exit code (128 + signal
  // when killed by one).
  int stop(std::chrono::seconds timeout);

 private:
  void sample_loop();
  std::string log_tail() const;

  std::string binary_;
  std::string log_path_;
  std::string address_;
  pid_t pid_ = -1;
  std::atomic<bool> running_{false};
  std::atomic<int> peak_threads_{0};
  std::atomic<long> peak_rss_kib_{0};
  std::thread sampler_;
};

// /proc/<pid>/stat and /proc/<pid>/status of any process (zeros when it is gone).
ProcStats read_proc_stats(pid_t pid);

}  // namespace lf::load
