// Logging sink: one mutex-guarded write per line so ranks' lines do not interleave mid-line.
#include "common/util/log.h"

#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <mutex>

namespace lf {
namespace {
std::mutex& log_mutex() {
  static std::mutex m;
  return m;
}
std::string& log_role() {
  static std::string role = "lorafleet";
  return role;
}
const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::DEBUG: return "DEBUG";
    case LogLevel::INFO: return "INFO";
    case LogLevel::WARN: return "WARN";
    case LogLevel::ERROR: return "ERROR";
  }
  return "?";
}
}  // namespace

void set_log_role(const std::string& role) {
  std::lock_guard<std::mutex> lock(log_mutex());
  log_role() = role;
}

LogLevel log_level() {
  static const LogLevel level = [] {
    const char* env = std::getenv("LF_LOG_LEVEL");
    if (env == nullptr) return LogLevel::INFO;
    if (std::strcmp(env, "debug") == 0) return LogLevel::DEBUG;
    if (std::strcmp(env, "warn") == 0) return LogLevel::WARN;
    if (std::strcmp(env, "error") == 0) return LogLevel::ERROR;
    return LogLevel::INFO;
  }();
  return level;
}

void log_line(LogLevel level, const std::string& message) {
  std::lock_guard<std::mutex> lock(log_mutex());
  // One write(2) per line: ranks share stderr under mpirun, and std::cerr (unbuffered) would
  // issue one write per << and let other processes' lines land mid-line.
  const std::string line =
      "[" + log_role() + " " + level_name(level) + "] " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace lf
