// Levelled logging to stderr with a rank prefix: "[lorafleet rank 1 WARN] message".
// The level comes from LF_LOG_LEVEL (debug|info|warn|error; default info). Thread-safe.
#pragma once

#include <sstream>
#include <string>

namespace lf {

enum class LogLevel { DEBUG = 0, INFO = 1, WARN = 2, ERROR = 3 };

// Sets the prefix shown in every line ("coordinator", "rank 0"...). Call once at start-up.
void set_log_role(const std::string& role);
LogLevel log_level();
void log_line(LogLevel level, const std::string& message);

}  // namespace lf

#define LF_LOG(level, expr)                                   \
  do {                                                        \
    if (static_cast<int>(level) >= static_cast<int>(::lf::log_level())) { \
      std::ostringstream lf_log_stream_;                      \
      lf_log_stream_ << expr;                                 \
      ::lf::log_line(level, lf_log_stream_.str());            \
    }                                                         \
  } while (0)
#define LF_DEBUG(expr) LF_LOG(::lf::LogLevel::DEBUG, expr)
#define LF_INFO(expr) LF_LOG(::lf::LogLevel::INFO, expr)
#define LF_WARN(expr) LF_LOG(::lf::LogLevel::WARN, expr)
#define LF_ERROR(expr) LF_LOG(::lf::LogLevel::ERROR, expr)
