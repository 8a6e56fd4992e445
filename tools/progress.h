#pragma once
// A one-line progress display for the CLI's long commands (bench, perf, conformance, classify,
// and any later one that runs for more than a moment):
//
//   ProgressOptions po;
//   po.title = "perf";
//   po.unit = "steps";
//   po.total = 8;
//   po.enabled = !flags.json && !flags.csv;   // machine-readable output never gets a progress line
//   Progress progress(po);
//   for (...) {
//     progress.set_note("concurrency " + std::to_string(c));
//     ...                                      // the step
//     progress.advance();
//   }
//   progress.finish();                          // clears the line (the destructor does too)
//
// The line is redrawn in place on stderr, four times a second, by a thread of its own:
//
//   perf: 2/8 steps, concurrency 3 | 12.4 s elapsed, about 36 s left
//
// It is drawn only when enabled and when its file descriptor is a terminal, so pipes, log files
// and `--json` output never see it. The first draw happens in the constructor, the last line is
// erased by finish(), so what the command prints afterwards starts on a clean line.
//
// Thread-safety: every method may be called from any thread.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace streamline::tools {

struct ProgressOptions {
  // First on the line: the command ("bench", "perf", ...).
  std::string title;
  // What advance() counts: "steps", "cases", "images", "runs".
  std::string unit = "steps";
  // How many steps there are; 0 = unknown (the line shows the count alone). set_total() changes it.
  int64_t total = 0;
  // Shown after the count from the first draw on; set_note() changes it.
  std::string note;
  // false: never draws (the command prints JSON or CSV). Read once, in the constructor.
  bool enabled = true;
  // Where the line goes; drawn only when this descriptor is a terminal. Read once, in the constructor.
  int fd = 2;
  // Seconds between redraws.
  double interval_s = 0.25;
};

// What one line shows; progress_line() formats it.
struct ProgressState {
  std::string title;
  std::string unit;
  int64_t done = 0;
  int64_t total = 0;  // 0 = unknown
  std::string note;   // "" = none
  double elapsed_s = 0;
  double left_s = -1;  // < 0 = unknown
};

// "perf: 2/8 steps, concurrency 3 | 12.4 s elapsed, about 36 s left", cut to at most `width`
// characters (0 = no limit).
std::string progress_line(const ProgressState& s, size_t width);
// "0.4 s", "12.4 s", "4m05s", "1h02m".
std::string format_duration(double seconds);

class Progress {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Progress(ProgressOptions options);
  ~Progress();  // finish()
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Whether the line is being drawn (enabled, a terminal, not finished).
  bool active() const { return active_.load(); }
  // `n` more steps done.
  void advance(int64_t n = 1) { done_.fetch_add(n, std::memory_order_relaxed); }
  void set_done(int64_t done) { done_.store(done, std::memory_order_relaxed); }
  void set_total(int64_t total) { total_.store(total, std::memory_order_relaxed); }
  // Shown after the count ("concurrency 3", "warm-up"); "" removes it.
  void set_note(std::string note);
  // When the work is expected to end: the time left counts down to it. Without it the time left
  // is estimated from the pace of the steps done so far.
  void set_expected_end(Clock::time_point end);
  // Prints `line` (and a newline) on the same descriptor above the progress line, or alone when
  // the line is not drawn: for warnings and per-step results printed while the work goes on.
  void message(const std::string& line);
  // Stops redrawing and erases the line. Idempotent.
  void finish();

 private:
  void run();           // the redraw thread
  void draw_locked();   // mu_ held
  void erase_locked();  // mu_ held
  void write_all(const std::string& s) const;
  ProgressState state_locked() const;

  const ProgressOptions options_;
  const Clock::time_point start_;
  std::atomic<bool> active_{false};
  std::atomic<int64_t> done_{0};
  std::atomic<int64_t> total_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string note_;
  bool has_end_ = false;
  Clock::time_point end_;
  size_t drawn_ = 0;  // characters of the line now on the terminal
  std::thread thread_;
};

}  // namespace streamline::tools
