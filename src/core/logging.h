#pragma once
// Minimal levelled logging to stderr. Level from SL_LOG_LEVEL (debug|info|warning|error), default warning.
//
//   SL_LOG(kInfo) << "loaded " << name;

#include <sstream>

namespace streamline {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

LogLevel log_level();
void set_log_level(LogLevel level);

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  std::ostream& stream() { return os_; }

 private:
  LogLevel level_;
  std::ostringstream os_;
};

}  // namespace streamline

#define SL_LOG(level)                                                        \
  if (::streamline::LogLevel::level < ::streamline::log_level()) {          \
  } else                                                                     \
    ::streamline::LogMessage(::streamline::LogLevel::level, __FILE__, __LINE__).stream()
