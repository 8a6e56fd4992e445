#pragma once
// Chooses, run by run, between a single-stream plan's requested intra-op thread count and one
// thread, by the run times it measures (RunOptions::adapt_threads).
//
//   ThreadChoice choice;
//   const int threads = choice.next(requested);   // requested or 1
//   ... run on `threads` threads, timing it ...
//   choice.record(elapsed_ms);
//
// Why: OpenMP parallel regions split their work statically and end in a barrier, so on a machine
// whose cores are taken by other processes every region waits for a worker the scheduler has
// parked (MobileNetV3-Large on 2 threads measured 140 ms against 8 ms on one thread under load).
// A quiet machine runs the same plan faster on two threads, and the load changes while a process
// lives, so the choice is measured rather than fixed: the current count runs kSettleRuns runs
// (kFirstSettle before the first probe), then
// the other count is probed for kProbeRuns runs (the first discarded: it pays the wake-up of idle
// workers and the first build of kernels for that count); the probed count is kept when its median
// beats the current median by kMargin. A probe run that takes kAbandon times the current median or
// more ends the probe at once, lost: on a quiet machine one thread runs a large model about twice
// as long, and four such runs among the first dozen moved BERT-base's median on two threads to its
// one-thread time. A probe that loses doubles the runs before the next one (up to kMaxPeriod), so a
// steady choice costs a few probe runs in a thousand.
//
// Thread-safety: none; one per context, which runs one plan at a time.

#include <cstdint>
#include <vector>

namespace streamline::exec {

class ThreadChoice {
 public:
  static constexpr int kFirstSettle = 3;   // runs before the first probe (slow models decide early)
  static constexpr int kSettleRuns = 8;    // runs on the current count before the first probe
  static constexpr int kProbeRuns = 4;     // runs of a probe, the first of them not counted
  static constexpr int kMaxPeriod = 512;   // most runs between probes
  static constexpr double kMargin = 0.9;   // a probe wins at or below this share of the current median
  static constexpr double kAbandon = 1.5;  // a counted probe run this much slower than it ends the probe

  // The thread count for the next run: `requested` or 1. A new `requested` starts over.
  [[nodiscard]] int next(int requested);
  // The time of the run that the last next() chose for.
  void record(double ms);

  // The count runs use outside probes (for tests and traces).
  int current() const { return current_ == 0 ? requested_ : 1; }
  // Probes started so far.
  int64_t probes() const { return probes_; }

 private:
  void reset(int requested);
  static double median(std::vector<double> v);

  int requested_ = 0;
  int current_ = 0;       // 0: the requested count, 1: one thread
  bool probing_ = false;  // the runs now use the other count
  int runs_ = 0;          // runs in this phase (settling or probing)
  int period_ = kFirstSettle;
  int64_t probes_ = 0;
  std::vector<double> samples_;  // the current count's recent times (kSettleRuns at most)
  std::vector<double> probe_;    // this probe's counted times
};

}  // namespace streamline::exec
