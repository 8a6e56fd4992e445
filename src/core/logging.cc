#include "core/logging.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>

namespace streamline {
namespace {

// Bits of the enabled levels: 1 << LogLevel.
std::atomic<unsigned>& enabled_bits() {
  static std::atomic<unsigned> bits{[] {
    const char* e = std::getenv("SL_LOG_LEVEL");
    int lowest = static_cast<int>(LogLevel::kWarning);
    if (e && !std::strcmp(e, "debug")) lowest = 0;
    if (e && !std::strcmp(e, "info")) lowest = 1;
    if (e && !std::strcmp(e, "error")) lowest = 3;
    unsigned b = 0;
    for (int l = lowest; l <= 3; ++l) b |= 1u << l;
    return b;
  }()};
  return bits;
}

struct Sink {
  Sink() {
    const unsigned b = enabled_bits().load();
    settings.info = b & 2u;
    settings.warning = b & 4u;
    settings.error = b & 8u;
    settings.verbose = (b & 1u) ? 1 : 0;
  }
  std::mutex mu;
  LogSettings settings;
  std::unique_ptr<std::ofstream> file;
};

Sink& sink() {
  static Sink s;
  return s;
}

unsigned bits_of(const LogSettings& s) {
  return (s.verbose > 0 ? 1u : 0u) | (s.info ? 2u : 0u) | (s.warning ? 4u : 0u) | (s.error ? 8u : 0u);
}

}  // namespace

bool log_enabled(LogLevel level) { return enabled_bits().load(std::memory_order_relaxed) & (1u << static_cast<int>(level)); }

LogSettings log_settings() {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.settings;
}

Status set_log_settings(const LogSettings& settings) {
  if (settings.format != "default" && settings.format != "ISO8601")
    return invalid_argument("log_format must be \"default\" or \"ISO8601\", got '" + settings.format + "'");
  if (settings.verbose < 0) return invalid_argument("log_verbose_level must be >= 0");
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mu);
  if (settings.file != s.settings.file) {
    if (settings.file.empty()) {
      s.file.reset();
    } else {
      auto f = std::make_unique<std::ofstream>(settings.file, std::ios::app);
      if (!*f) return unavailable("cannot open log file '" + settings.file + "'");
      s.file = std::move(f);
    }
  }
  s.settings = settings;
  enabled_bits().store(bits_of(settings));
  return ok_status();
}

LogLevel log_level() {
  const unsigned b = enabled_bits().load();
  for (int l = 0; l <= 3; ++l)
    if (b & (1u << l)) return static_cast<LogLevel>(l);
  return LogLevel::kError;
}

void set_log_level(LogLevel level) {
  LogSettings s = log_settings();
  const int l = static_cast<int>(level);
  s.verbose = l <= 0 ? std::max(1, s.verbose) : 0;
  s.info = l <= 1;
  s.warning = l <= 2;
  s.error = true;
  (void)set_log_settings(s);
}

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level) {
  static const char* kNames[] = {"D", "I", "W", "E"};
  const char* base = std::strrchr(file, '/');
  bool iso = false;
  {
    Sink& s = sink();
    std::lock_guard<std::mutex> lock(s.mu);
    iso = s.settings.format == "ISO8601";
  }
  if (iso) {
    const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    os_ << buf << ' ';
  }
  os_ << "[" << kNames[static_cast<int>(level)] << " " << (base ? base + 1 : file) << ":" << line << "] ";
}

LogMessage::~LogMessage() {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.file)
    *s.file << os_.str() << std::endl;
  else
    std::cerr << os_.str() << std::endl;
}

}  // namespace streamline
