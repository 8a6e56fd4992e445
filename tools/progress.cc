#include "progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>

namespace streamline::tools {
namespace {

// Columns when the terminal does not say.
constexpr size_t kDefaultWidth = 80;

size_t terminal_width(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return kDefaultWidth;
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  char b[32];
  if (seconds < 59.95) {
    std::snprintf(b, sizeof b, "%.1f s", seconds);
  } else if (seconds < 3600) {
    const long s = std::lround(seconds);
    std::snprintf(b, sizeof b, "%ldm%02lds", s / 60, s % 60);
  } else {
    const long m = std::lround(seconds / 60);
    std::snprintf(b, sizeof b, "%ldh%02ldm", m / 60, m % 60);
  }
  return b;
}

std::string progress_line(const ProgressState& s, size_t width) {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, wrongly) on chains of string temporaries.
  std::string line = s.title;
  line.append(": ").append(std::to_string(s.done));
  if (s.total > 0) line.append("/").append(std::to_string(s.total));
  if (!s.unit.empty()) line.append(" ").append(s.unit);
  if (!s.note.empty()) line.append(", ").append(s.note);
  line.append(" | ").append(format_duration(s.elapsed_s)).append(" elapsed");
  if (s.left_s >= 0) line.append(", about ").append(format_duration(s.left_s)).append(" left");
  if (width > 0 && line.size() > width) line.resize(width);
  return line;
}

Progress::Progress(ProgressOptions options) : options_(std::move(options)), start_(Clock::now()) {
  total_ = options_.total;
  note_ = options_.note;
  if (!options_.enabled || ::isatty(options_.fd) != 1) return;
  active_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    draw_locked();
  }
  thread_ = std::thread([this] { run(); });
}

Progress::~Progress() {
  finish();
}

void Progress::set_note(std::string note) {
  std::lock_guard<std::mutex> lock(mu_);
  note_ = std::move(note);
}

void Progress::set_expected_end(Clock::time_point end) {
  std::lock_guard<std::mutex> lock(mu_);
  has_end_ = true;
  end_ = end;
}

void Progress::message(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!active_) {
    write_all(line + "\n");
    return;
  }
  erase_locked();
  write_all(line + "\n");
  draw_locked();
}

void Progress::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!active_) return;
    active_ = false;
    stop_ = true;
    erase_locked();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Progress::run() {
  const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.interval_s));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, period, [&] { return stop_; });
    if (!stop_) draw_locked();
  }
}

ProgressState Progress::state_locked() const {
  ProgressState s;
  s.title = options_.title;
  s.unit = options_.unit;
  s.done = done_.load(std::memory_order_relaxed);
  s.total = total_.load(std::memory_order_relaxed);
  s.note = note_;
  const Clock::time_point now = Clock::now();
  s.elapsed_s = std::chrono::duration<double>(now - start_).count();
  if (has_end_) {
    s.left_s = std::max(0.0, std::chrono::duration<double>(end_ - now).count());
  } else if (s.total > 0 && s.done > 0) {
    s.left_s = s.elapsed_s / static_cast<double>(s.done) * static_cast<double>(std::max<int64_t>(0, s.total - s.done));
  }
  return s;
}

void Progress::draw_locked() {
  // One column short of the width: a line that fills the last column wraps on some terminals,
  // and a wrapped line can no longer be redrawn in place.
  const size_t width = terminal_width(options_.fd);
  const std::string line = progress_line(state_locked(), width > 1 ? width - 1 : width);
  std::string out(1, '\r');
  out.append(line);
  if (line.size() < drawn_) out.append(drawn_ - line.size(), ' ').append(1, '\r').append(line);
  write_all(out);
  drawn_ = line.size();
}

void Progress::erase_locked() {
  if (drawn_ == 0) return;
  std::string out(1, '\r');
  out.append(drawn_, ' ').append(1, '\r');
  write_all(out);
  drawn_ = 0;
}

void Progress::write_all(const std::string& s) const {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(options_.fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed terminal: drop the line, never fail the command
    off += static_cast<size_t>(n);
  }
}

}  // namespace streamline::tools
