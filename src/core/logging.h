#pragma once
// Levelled logging to stderr or a file, with the switches Triton's logging API has: info,
// warning and error messages each on or off, and a verbosity level for debug messages.
//
//   SL_LOG(kInfo) << "loaded " << name;
//   SL_LOG(kDebug) << "plan made";                 // shown when the verbose level is >= 1
//   LogSettings s = log_settings();  s.verbose = 2;  SL_RETURN_IF_ERROR(set_log_settings(s));
//
// The start-up settings come from SL_LOG_LEVEL (debug|info|warning|error; default warning: errors
// and warnings only). Thread-safe; a message is written whole.

#include <sstream>
#include <string>

#include "core/status.h"

namespace streamline {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

struct LogSettings {
  bool info = false;     // kInfo messages
  bool warning = true;   // kWarning messages
  bool error = true;     // kError messages
  int verbose = 0;       // kDebug messages when >= 1 (Triton's log_verbose_level)
  // "default" ("[I file:line] text") or "ISO8601" (a UTC timestamp first).
  std::string format = "default";
  std::string file;      // append to this file; "" = stderr
};

LogSettings log_settings();
// InvalidArgument for an unknown format or a negative verbose level; Unavailable when the file
// cannot be opened (the settings stay as they were).
[[nodiscard]] Status set_log_settings(const LogSettings& settings);
bool log_enabled(LogLevel level);

// The lowest level shown (kDebug when verbose, else the first one switched on).
LogLevel log_level();
// Shows `level` and everything above it; verbose 1 for kDebug.
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

#define SL_LOG(level)                                         \
  if (!::streamline::log_enabled(::streamline::LogLevel::level)) { \
  } else                                                      \
    ::streamline::LogMessage(::streamline::LogLevel::level, __FILE__, __LINE__).stream()
