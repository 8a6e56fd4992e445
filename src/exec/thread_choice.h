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
// lives, so the choice is measured rather than fixed: the current count runs kSettleRuns runs, then
// the other count is probed for kProbeRuns runs; the probed count is kept when its median beats the
// current median by kMargin. A probe run that takes kAbandon times the current median or more ends
// the probe at once, lost: on a quiet machine one thread runs a large model about twice as long,
// and four such runs among the first dozen moved BERT-base's median on two threads to its
// one-thread time. A probe that loses doubles the runs before the next one (up to kMaxPeriod), so a
// steady choice costs a few probe runs in a thousand.
//
// The first probe comes after only kFirstSettle runs when those runs look disturbed (the slowest
// more than kSteadySpread times the fastest: a parked worker delays some regions and not others),
// so a slow model on a loaded machine decides early; runs that agree wait for kSettleRuns, so a
// large model on a quiet machine does not spend its first few seconds on one thread. The first run
// of a probe is not counted when it pays a cost the others do not: the wake-up of idle workers
// (probing the requested count) or the first build of one-thread kernels (the first probe of one
// thread). Later probes of one thread count every run, so a hopeless one costs one run.
//
// Thread-safety: none; one per context, which runs one plan at a time.

#include <cstdint>
#include <vector>

namespace streamline::exec {

class ThreadChoice {
 public:
  static constexpr int kFirstSettle = 3;         // runs before the first probe when they look disturbed
  static constexpr int kSettleRuns = 8;          // runs on the current count before a probe otherwise
  static constexpr int kProbeRuns = 4;           // runs of a probe (counted ones: kProbeRuns - 1)
  static constexpr int kMaxPeriod = 512;         // most runs between probes
  static constexpr double kMargin = 0.9;         // a probe wins at or below this share of the current median
  static constexpr double kAbandon = 1.5;        // a counted probe run this much slower than it ends the probe
  static constexpr double kSteadySpread = 1.25;  // slowest over fastest of runs that look undisturbed

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
  // The current count's recent runs agree (at least kFirstSettle of them, within kSteadySpread).
  bool steady() const;

  int requested_ = 0;
  int current_ = 0;       // 0: the requested count, 1: one thread
  bool probing_ = false;  // the runs now use the other count
  int runs_ = 0;          // runs in this phase (settling or probing)
  int period_ = kFirstSettle;
  int64_t probes_ = 0;
  bool probed_one_ = false;      // one thread has been probed since the last reset (its kernels exist)
  bool discard_ = false;         // this probe's first run is not counted
  std::vector<double> samples_;  // the current count's recent times (kSettleRuns at most)
  std::vector<double> probe_;    // this probe's counted times
};

}  // namespace streamline::exec
