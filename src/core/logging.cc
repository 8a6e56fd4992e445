#include "core/logging.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>

namespace streamline {
namespace {

LogLevel level_from_env() {
  const char* e = std::getenv("SL_LOG_LEVEL");
  if (!e) return LogLevel::kWarning;
  if (!std::strcmp(e, "debug")) return LogLevel::kDebug;
  if (!std::strcmp(e, "info")) return LogLevel::kInfo;
  if (!std::strcmp(e, "error")) return LogLevel::kError;
  return LogLevel::kWarning;
}

std::atomic<int>& level_slot() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

}  // namespace

LogLevel log_level() { return static_cast<LogLevel>(level_slot().load()); }
void set_log_level(LogLevel level) { level_slot().store(static_cast<int>(level)); }

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level) {
  static const char* kNames[] = {"D", "I", "W", "E"};
  const char* base = std::strrchr(file, '/');
  os_ << "[" << kNames[static_cast<int>(level)] << " " << (base ? base + 1 : file) << ":" << line << "] ";
}

LogMessage::~LogMessage() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::cerr << os_.str() << std::endl;
}

}  // namespace streamline
