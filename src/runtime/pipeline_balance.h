#pragma once
// The pipeline rebalancer's decision: a pure function of one window's observations of every
// stage (workers, items finished, busy time, queue depth), each stage's worker limits and the
// pipeline's worker budget. It returns the worker counts for the next window, with the move (at
// most one) and its reason.
//
//   BalanceWindow w;  w.length_us = 500000;
//   w.stages = {{.name = "decode", .workers = 4, .done = 400, .busy_us = 400000, ...}, ...};
//   BalanceLimits lim;  lim.worker_budget = 6;
//   BalanceDecision d = balance_step(w, lim, &state);   // state: hysteresis, kept by the caller
//   if (d.move) log(d.move->reason);  // "'pre' is the bottleneck at 83.3/s ...: 1 worker from 'decode'"
//   apply(d.workers);
//
// No clock, no threads, no locks: the pipeline's rebalancer thread calls it once a window, and
// tests call it with scripted windows.
//
// A stage's capacity is what its workers would finish per second if they never waited:
// workers x done / busy seconds (one worker's rate from the time it spent processing). In a
// pipeline every request passes every stage, so the stage of least capacity (the bottleneck)
// sets the pipeline's throughput and the others idle part of the time (pipeline bubbles).
// Rules, in order (the first that applies decides):
//  1. Measure: every stage finished at least `min_done` items in the window, else no change.
//  2. Load: the bottleneck was busy at least kBalanceSaturatedBusy of its workers' time, or had
//     requests waiting (mean queue depth >= kBalanceBacklog); else the pipeline is not loaded
//     and no change (a light load says nothing about which stage limits).
//  3. Cooldown: for `cooldown_windows` windows after a move nothing else moves (the window after
//     a move measures the new assignment, not the old).
//  4. Candidate: the bottleneck gains a worker when it may (below its max_workers, not serial):
//     from the unused budget when the stages hold fewer than worker_budget, else from the donor,
//     the stage whose capacity after giving up a worker is highest, provided that capacity is
//     still at least (1 + margin) x the bottleneck's present one (so the move raises the
//     pipeline's throughput and its reverse could not be chosen next: no flapping). A donor
//     keeps min_workers.
//  5. Confirm: the same candidate must come out of `confirm_windows` windows in a row before it
//     is made (a noisy window alone moves nothing).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace streamline {
struct RebalanceOptions;  // streamline/pipeline.h
}  // namespace streamline

namespace streamline::runtime {

// Bottleneck busy at least this fraction of its workers' time: the pipeline is loaded.
inline constexpr double kBalanceSaturatedBusy = 0.8;
// Or this many requests waiting for it on average.
inline constexpr double kBalanceBacklog = 1.0;

// One stage over one window.
struct StageWindow {
  std::string name;
  int workers = 1;              // workers taking items through the window
  int min_workers = 1;          // fewest it may keep (>= 1)
  int max_workers = 1;          // most it may have (1 for a serial stage)
  uint64_t done = 0;            // items it finished in the window (succeeded or failed)
  int64_t busy_us = 0;          // time its workers spent on those items, all workers together
  double queue_depth_mean = 0;  // items waiting for it, time-weighted mean over the window
  int64_t queue_depth_max = 0;  // deepest its queue was in the window
};

struct BalanceWindow {
  int64_t length_us = 0;
  std::vector<StageWindow> stages;  // the pipeline's stages, in its order
};

struct BalanceLimits {
  int worker_budget = 1;     // workers over all stages at most
  double margin = 0.1;       // rule 4: a donor keeps at least (1 + margin) x the bottleneck's capacity
  uint64_t min_done = 8;     // rule 1: items per stage per window
  int confirm_windows = 2;   // rule 5: windows in a row that must propose the same move
  int cooldown_windows = 1;  // rule 3: windows without a move after one
};

// The rebalancer's memory between windows; start with the default.
struct BalanceState {
  int windows_since_move = 1 << 20;
  int pending_from = -2, pending_to = -2;  // candidate seen in the previous windows (-1 = budget)
  int pending_windows = 0;                 // how many windows in a row proposed it
};

struct BalanceMove {
  int from = -1;  // stage index giving up a worker; -1 = the unused budget
  int to = 0;     // stage index gaining one
  std::string reason;
};

struct BalanceDecision {
  std::vector<int> workers;         // per stage, for the next window
  std::vector<double> capacity;     // per stage: items/s its workers sustain (0 when not measured)
  std::vector<double> busy;         // per stage: fraction of its workers' time spent processing
  int bottleneck = -1;              // stage of least capacity; -1 when not measured
  double imbalance = 0;             // highest capacity / lowest - 1; 0 when not measured
  std::optional<BalanceMove> move;  // the move made this window, if any
  std::string hold;                 // why nothing moved (empty when something did)
};

// The limits a pipeline's RebalanceOptions set (margin, min_items, confirm_windows,
// cooldown_windows) and this window's `worker_budget` (the pipeline's, or fewer when a shared
// core budget leaves it fewer cores): the one place the public options meet the decision's limits.
BalanceLimits balance_limits(const RebalanceOptions& options, int worker_budget);

[[nodiscard]] BalanceDecision balance_step(const BalanceWindow& w, const BalanceLimits& limits, BalanceState* state);

}  // namespace streamline::runtime
