#include "runtime/pipeline_balance.h"

#include <algorithm>
#include <cstdio>

#include "streamline/pipeline.h"

namespace streamline::runtime {
namespace {

std::string rate(double per_s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f/s", per_s);
  return buf;
}

std::string one_decimal(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

std::string percent(double f) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f%%", 100 * f);
  return buf;
}

std::string quoted(const std::string& s) {
  return "'" + s + "'";
}

// Capacity of stage `s` with `workers` workers, from its measured per-worker rate.
double capacity_with(const StageWindow& s, int workers) {
  return static_cast<double>(workers) * static_cast<double>(s.done) * 1e6 / static_cast<double>(s.busy_us);
}

}  // namespace

BalanceLimits balance_limits(const RebalanceOptions& options, int worker_budget) {
  BalanceLimits limits;
  limits.worker_budget = worker_budget;
  limits.margin = options.margin;
  limits.min_done = static_cast<uint64_t>(std::max(0, options.min_items));
  limits.confirm_windows = options.confirm_windows;
  limits.cooldown_windows = options.cooldown_windows;
  return limits;
}

BalanceDecision balance_step(const BalanceWindow& w, const BalanceLimits& limits, BalanceState* state) {
  BalanceDecision d;
  const size_t n = w.stages.size();
  for (const StageWindow& s : w.stages) d.workers.push_back(s.workers);
  d.capacity.assign(n, 0);
  d.busy.assign(n, 0);
  ++state->windows_since_move;
  auto hold = [&](std::string why) {
    state->pending_from = state->pending_to = -2;
    state->pending_windows = 0;
    d.hold = std::move(why);
    return d;
  };
  if (n == 0 || w.length_us <= 0) return hold("no window");

  // Rule 1: every stage measured.
  for (size_t i = 0; i < n; ++i) {
    const StageWindow& s = w.stages[i];
    if (s.done < limits.min_done || s.busy_us <= 0)
      return hold("stage " + quoted(s.name) + " finished " + std::to_string(s.done) + " items (fewer than " +
                  std::to_string(limits.min_done) + "): not enough to measure");
    d.capacity[i] = capacity_with(s, s.workers);
    d.busy[i] = std::min(1.0, static_cast<double>(s.busy_us) /
                                  (static_cast<double>(std::max(1, s.workers)) * static_cast<double>(w.length_us)));
  }
  size_t b = 0;
  for (size_t i = 1; i < n; ++i)
    if (d.capacity[i] < d.capacity[b]) b = i;
  d.bottleneck = static_cast<int>(b);
  const double low = d.capacity[b];
  const double high = *std::max_element(d.capacity.begin(), d.capacity.end());
  d.imbalance = high / low - 1;
  const StageWindow& bs = w.stages[b];
  const std::string at = quoted(bs.name) + " is the bottleneck at " + rate(low) + " with " +
                         std::to_string(bs.workers) + (bs.workers == 1 ? " worker" : " workers") + " (" +
                         percent(d.busy[b]) + " busy, queue depth " + one_decimal(bs.queue_depth_mean) + ")";

  // Rule 2: loaded.
  if (d.busy[b] < kBalanceSaturatedBusy && bs.queue_depth_mean < kBalanceBacklog) return hold("not loaded: " + at);
  // Rule 3: cooldown.
  if (state->windows_since_move <= limits.cooldown_windows) {
    d.hold = "cooling down after a move: " + at;
    return d;
  }
  // Rule 4: candidate.
  if (bs.workers >= bs.max_workers)
    return hold(at + ", and it may not take more workers (" + std::to_string(bs.max_workers) + " at most)");
  int total = 0;
  for (const StageWindow& s : w.stages) total += s.workers;
  int from = -1;
  std::string because;
  if (total < limits.worker_budget) {
    because = "1 worker from the unused budget (" + std::to_string(total) + " of " +
              std::to_string(limits.worker_budget) + " in use)";
  } else {
    double best = 0;
    for (size_t i = 0; i < n; ++i) {
      const StageWindow& s = w.stages[i];
      if (i == b || s.workers <= s.min_workers) continue;
      const double after = capacity_with(s, s.workers - 1);
      if (after > best) {
        best = after;
        from = static_cast<int>(i);
      }
    }
    if (from < 0 || best < (1 + limits.margin) * low)
      return hold(at + "; no stage can give up a worker and stay " + percent(limits.margin) + " above it" +
                  (from < 0 ? std::string()
                            : " (best: " + quoted(w.stages[static_cast<size_t>(from)].name) + " would drop to " +
                                  rate(best) + ")"));
    const StageWindow& ds = w.stages[static_cast<size_t>(from)];
    because = "1 worker from " + quoted(ds.name) + " (" + rate(d.capacity[static_cast<size_t>(from)]) + " with " +
              std::to_string(ds.workers) + ", " + rate(best) + " with " + std::to_string(ds.workers - 1) + ")";
  }
  // Rule 5: confirm.
  if (state->pending_from == from && state->pending_to == static_cast<int>(b)) {
    ++state->pending_windows;
  } else {
    state->pending_from = from;
    state->pending_to = static_cast<int>(b);
    state->pending_windows = 1;
  }
  if (state->pending_windows < limits.confirm_windows) {
    d.hold = at + "; proposing " + because + ", window " + std::to_string(state->pending_windows) + " of " +
             std::to_string(limits.confirm_windows);
    return d;
  }
  if (from >= 0) --d.workers[static_cast<size_t>(from)];
  ++d.workers[b];
  d.move = BalanceMove{from, static_cast<int>(b), at + ": " + because};
  state->windows_since_move = 0;
  state->pending_from = state->pending_to = -2;
  state->pending_windows = 0;
  return d;
}

}  // namespace streamline::runtime
