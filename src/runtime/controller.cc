#include "runtime/controller.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace streamline::runtime {
namespace {

// Batches "hold about one row" below this mean: a queue delay buys nothing then.
constexpr double kSingleRowBatches = 1.5;
// Batches "reach" a size at this fraction of it.
constexpr double kBatchFull = 0.75;
// Instances count as busy above this fraction (a longer queue delay can fill their batches).
constexpr double kBusyFraction = 0.8;
// Queue delays under this are dropped to 0 rather than halved.
constexpr int64_t kMinQueueDelayUs = 100;

std::string ms(double us) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f ms", us / 1000.0);
  return buf;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

// Rule 6's memory of a probe undone at `*rejected_overlap` (0: none): it is not tried again while
// the overlap stays within kProbeRetryChange of that, and forgotten after kThreadMeasureWindows.
bool may_retry(double* rejected_overlap, int* windows, double overlap) {
  if (++*windows >= kThreadMeasureWindows) *rejected_overlap = 0;
  return *rejected_overlap <= 0 || std::abs(overlap / *rejected_overlap - 1) > kProbeRetryChange;
}

// Whether what a probe was kept for at `kept_overlap` (0: none kept) still holds.
bool still_overlapping(double kept_overlap, double overlap) {
  return kept_overlap > 0 && overlap >= kKeptOverlapShare * kept_overlap;
}

// Why the window counts as pressure, in words ("" when it does not).
std::string pressure(const ControlWindow& w, const ControlSettings& s, int64_t objective_us) {
  if (w.refused > 0)
    return std::to_string(w.refused) + " requests refused or timed out (p99 " + ms(w.p99_us) + ", objective " +
           ms(static_cast<double>(objective_us)) + ")";
  if (w.p99_us > static_cast<double>(objective_us))
    return "p99 " + ms(w.p99_us) + " over the " + ms(static_cast<double>(objective_us)) +
           " objective with queue depth " + num(w.queue_depth_mean);
  if (w.queue_depth_mean > kBacklogPerInstance * s.active_instances)
    return "queue depth " + num(w.queue_depth_mean) + " over " + num(kBacklogPerInstance) + " per instance (" +
           std::to_string(s.active_instances) + " active, p99 " + ms(w.p99_us) + ")";
  if (w.busy_fraction > kSaturatedBusy && w.queue_depth_mean >= kSaturatedDepth * s.active_instances)
    return "instances " + num(100 * w.busy_fraction) + "% busy with queue depth " + num(w.queue_depth_mean) + " (p99 " +
           ms(w.p99_us) + ")";
  return "";
}

// The thread count, at most `spread`, whose light-load batches were fastest: fewer threads win
// only by kFewerThreadsGain. -1 when `spread` itself has not been measured.
int fastest_light_threads(const ControllerState& s, int lo, int spread) {
  if (spread >= kMeasuredThreads || s.light_service_us[spread] <= 0) return -1;
  int best = spread;
  for (int t = spread - 1; t >= lo; --t)
    if (s.light_service_us[t] > 0 && s.light_service_us[t] <= kFewerThreadsGain * s.light_service_us[best]) best = t;
  return best;
}

std::string us(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f us", v);
  return buf;
}

bool slack(const ControlWindow& w, const ControlSettings& s, int64_t objective_us) {
  return w.refused == 0 && w.p99_us < kSlackFraction * static_cast<double>(objective_us) &&
         w.queue_depth_mean < 0.5 * s.active_instances;
}

}  // namespace

double window_overlap(const ControlWindow& w) {
  return w.arrival_rate * w.p50_us / 1e6;
}

int control_latency_bucket(double us) {
  if (!(us > kControlLatencyBaseUs)) return 0;
  const int i = static_cast<int>(std::ceil(std::log(us / kControlLatencyBaseUs) / std::log(kControlLatencyGrowth)));
  return std::clamp(i, 0, kControlLatencyBuckets - 1);
}

double control_latency_bound(int i) {
  return kControlLatencyBaseUs * std::pow(kControlLatencyGrowth, i);
}

const char* control_knob_name(ControlKnob k) {
  switch (k) {
    case ControlKnob::kQueueDelay:
      return "queue_delay";
    case ControlKnob::kPreferredBatch:
      return "preferred_batch";
    case ControlKnob::kInstances:
      return "instances";
    case ControlKnob::kThreads:
      return "threads";
  }
  return "?";
}

int spread_threads(const ControlLimits& lim, int active) {
  const int lo = std::max(1, lim.threads_per_instance);
  const int hi = std::max(lo, lim.max_threads_per_instance);
  const int cores = lim.cores_share > 0 ? std::min(lim.cores_share, lim.cores_granted) : lim.cores_granted;
  return std::clamp(cores / std::max(1, active), lo, hi);
}

ControlWindow window_between(const ControlCounters& a, const ControlCounters& b, int active_instances) {
  ControlWindow w;
  w.length_us = std::max<int64_t>(1, b.time_us - a.time_us);
  const double len = static_cast<double>(w.length_us);
  w.arrival_rate = static_cast<double>(b.arrivals - a.arrivals) * 1e6 / len;
  w.queue_depth_mean = std::max(0.0, (b.depth_integral - a.depth_integral) / len);
  w.queue_depth_max = b.depth_max;
  const uint64_t batches = b.batches - a.batches;
  w.mean_batch_rows = batches > 0 ? static_cast<double>(b.batch_rows - a.batch_rows) / static_cast<double>(batches) : 0;
  w.completed = b.completed - a.completed;
  w.refused = (b.refused - a.refused) + (b.expired - a.expired);
  w.busy_fraction =
      std::clamp(static_cast<double>(b.busy_us - a.busy_us) / (len * std::max(1, active_instances)), 0.0, 1.0);
  w.batches = batches;
  w.service_us =
      batches > 0 ? static_cast<double>(std::max<int64_t>(0, b.busy_us - a.busy_us)) / static_cast<double>(batches) : 0;
  // Percentiles from the histogram's difference: the upper bound of the bucket that reaches them.
  uint64_t total = 0;
  for (int i = 0; i < kControlLatencyBuckets; ++i) total += b.latency[i] - a.latency[i];
  if (total == 0) return w;
  const auto percentile = [&](double q) {
    const double want = q * static_cast<double>(total);
    uint64_t seen = 0;
    for (int i = 0; i < kControlLatencyBuckets; ++i) {
      seen += b.latency[i] - a.latency[i];
      if (static_cast<double>(seen) >= want) return control_latency_bound(i);
    }
    return control_latency_bound(kControlLatencyBuckets - 1);
  };
  w.p50_us = percentile(0.50);
  w.p99_us = percentile(0.99);
  return w;
}

ControlDecision control_step(const ControlWindow& w, const ControlSettings& current, const ControlLimits& lim,
                             ControllerState* state) {
  ControlDecision d;
  d.settings = current;
  ++state->windows_since_change;
  const int64_t objective = lim.latency_objective_us;
  if (objective <= 0) return d;
  const int min_threads = std::max(1, lim.threads_per_instance);
  const int max_threads = std::max(min_threads, lim.max_threads_per_instance);
  const int threads = std::clamp(current.threads_per_instance, min_threads, max_threads);
  const int active = std::clamp(current.active_instances, 1, std::max(1, lim.max_instances));
  d.settings.active_instances = active;
  d.settings.threads_per_instance = threads;

  ControlChange c;
  bool have = false;
  bool forced = false;
  const auto propose = [&](ControlKnob knob, int64_t from, int64_t to, std::string reason) {
    c.knob = knob;
    c.from = from;
    c.to = to;
    c.reason = std::move(reason);
    have = true;
  };
  const auto cores = [](int a, int t) {
    return std::to_string(a) + " instances x " + std::to_string(t) + " threads hold " + std::to_string(a * t) +
           " cores";
  };

  // Cores past the budget that another instance may borrow: whole cores left idle.
  const int held = active * threads;
  const bool fits = (active + 1) * min_threads <= lim.cores_granted;
  // A probe undone is not tried again while the overlap stays about what it was (rule 6).
  const double overlap = window_overlap(w);
  const bool retry = may_retry(&state->rejected_overlap, &state->rejected_windows, overlap);
  const bool retry_delay = may_retry(&state->rejected_delay_overlap, &state->rejected_delay_windows, overlap);
  const bool borrows =
      !fits && retry && (active + 1) * min_threads <= std::max(lim.cores_granted, held) + lim.cores_idle;
  const auto grow_reason = [&](const std::string& why) {
    return borrows ? why + ", " + std::to_string(lim.cores_idle) + " idle " + (lim.cores_idle == 1 ? "core" : "cores") +
                         " to borrow: +1 instance, kept if it serves more or sooner"
                   : why + ": +1 instance";
  };
  // Rule 1: the core budget shrank under this model, or the cores it borrowed are busy again.
  if (held > lim.cores_granted && !lim.keep_lent) {
    const std::string over = cores(active, threads) + ", over the " + std::to_string(lim.cores_granted) + " granted";
    if (threads > min_threads) {
      const int to = spread_threads(lim, active);
      propose(ControlKnob::kThreads, threads, to, over + ": " + std::to_string(to) + " threads per instance");
      forced = true;
    } else if (active > 1) {
      propose(ControlKnob::kInstances, active, active - 1, over + ": -1 instance");
      forced = true;
    }
  }
  // Rule 6's probe, judged by the first window after its cooldown: kept or undone.
  const double rate = static_cast<double>(w.completed) * 1e6 / static_cast<double>(std::max<int64_t>(1, w.length_us));
  bool undo_probe = false;
  const bool judge = !have && state->windows_since_change > lim.cooldown_windows && w.completed >= kMeasureBatches;
  const bool gained = rate >= (1 + kProbeGain) * state->probe_base_rate ||
                      (w.p50_us > 0 && w.p50_us <= (1 - kProbeGain) * state->probe_base_p50_us);
  const auto against = [&](const std::string& with) {  // built only when a probe is undone
    return num(rate) + " requests/s, p50 " + ms(w.p50_us) + with + " against " + num(state->probe_base_rate) + "/s, " +
           ms(state->probe_base_p50_us) + " before the probe";
  };
  if (judge && state->delay_probe) {
    state->delay_probe = false;
    if (gained) {
      state->kept_delay_overlap = overlap;
    } else {
      state->rejected_delay_overlap = state->probe_base_overlap;
      state->rejected_delay_windows = 0;
      propose(ControlKnob::kQueueDelay, current.queue_delay_us, state->probe_base_delay_us,
              against("") + ": the probed queue delay gains too little, queue delay " +
                  ms(static_cast<double>(state->probe_base_delay_us)));
      undo_probe = true;
    }
  }
  if (judge && state->instance_probe) {
    state->instance_probe = false;
    if (gained) {
      state->kept_overlap = overlap;
    } else if (active > 1) {
      state->rejected_overlap = state->probe_base_overlap;
      state->rejected_windows = 0;
      propose(ControlKnob::kInstances, active, active - 1,
              against(" with " + std::to_string(active) + " instances") +
                  ": the probed instance gains too little, -1 instance");
      undo_probe = true;
    }
  }
  // Rule 3: pressure.
  bool probe_instance = false;
  bool probe_delay = false;
  const std::string why = have ? "" : pressure(w, d.settings, objective);
  const int batch_target = current.preferred_batch > 0 ? current.preferred_batch : lim.max_batch;
  const int64_t delay_cap = objective / 4;
  const int64_t delay_step = std::max<int64_t>(kMinQueueDelayUs, objective / 10);
  const int64_t next_delay = std::min(delay_cap, current.queue_delay_us + delay_step);
  const bool can_grow = active < lim.max_instances && (fits || borrows);
  if (!have && !why.empty()) {
    if (can_grow) {
      propose(ControlKnob::kInstances, active, active + 1, grow_reason(why));
      probe_instance = borrows;
    } else if (lim.max_batch > 1 && current.preferred_batch > 0 && current.preferred_batch < lim.max_batch &&
               w.mean_batch_rows >= kBatchFull * current.preferred_batch) {
      const int to = std::min(lim.max_batch, current.preferred_batch * 2);
      propose(ControlKnob::kPreferredBatch, current.preferred_batch, to,
              why + ", batches at the preferred " + std::to_string(current.preferred_batch) + ": preferred batch " +
                  std::to_string(to));
    } else if (lim.max_batch > 1 && current.queue_delay_us < delay_cap && w.busy_fraction > kBusyFraction &&
               w.mean_batch_rows < kBatchFull * batch_target) {
      propose(ControlKnob::kQueueDelay, current.queue_delay_us, next_delay,
              why + ", instances " + num(100 * w.busy_fraction) + "% busy with batches of " + num(w.mean_batch_rows) +
                  " rows: queue delay " + ms(static_cast<double>(next_delay)));
    } else if (lim.max_batch > 1 && current.queue_delay_us < delay_cap && w.batches > 0 &&
               w.mean_batch_rows < kBatchFull * batch_target && !state->delay_probe && retry_delay) {
      // Requests wait though the instances are mostly idle (the cores go to decoding, the
      // network, other models): fewer, fuller batches may cost less. Measured, as a probe.
      propose(ControlKnob::kQueueDelay, current.queue_delay_us, next_delay,
              why + ", no instance to add, instances " + num(100 * w.busy_fraction) + "% busy with batches of " +
                  num(w.mean_batch_rows) + " rows: queue delay " + ms(static_cast<double>(next_delay)) +
                  ", kept if it serves more or sooner");
      probe_delay = true;
    }
  }
  // Rule 4: slack.
  if (!have && why.empty() && slack(w, d.settings, objective)) {
    const std::string idle = "p99 " + ms(w.p99_us) + " under half the " + ms(static_cast<double>(objective)) +
                             " objective, queue depth " + num(w.queue_depth_mean);
    if (current.queue_delay_us > 0 && !still_overlapping(state->kept_delay_overlap, overlap)) {
      const int64_t half = current.queue_delay_us / 2;
      const int64_t to = w.mean_batch_rows < kSingleRowBatches || half < kMinQueueDelayUs ? 0 : half;
      propose(ControlKnob::kQueueDelay, current.queue_delay_us, to,
              idle + ", batches of " + num(w.mean_batch_rows) + " rows: queue delay " + ms(static_cast<double>(to)));
    } else if (active > 1 && w.busy_fraction * active / (active - 1) < kShedBusyFraction &&
               !still_overlapping(state->kept_overlap, overlap)) {
      propose(ControlKnob::kInstances, active, active - 1,
              idle + ", instances " + num(100 * w.busy_fraction) + "% busy: -1 instance");
    }
  }
  // Rule 6: requests overlap, and another instance fits: probe it; with none to add, a queue delay.
  const bool overlapping = why.empty() && !state->instance_probe && !state->delay_probe && w.refused == 0 &&
                           w.completed >= kMeasureBatches && overlap >= kProbeOverlap * active;
  const std::string why6 = num(overlap) + " requests in the server at once (" + num(rate) + "/s x p50 " + ms(w.p50_us) +
                           ") over " + std::to_string(active) + (active == 1 ? " instance" : " instances");
  if (!have && overlapping && can_grow && retry) {
    propose(ControlKnob::kInstances, active, active + 1,
            borrows ? grow_reason(why6) : why6 + ": +1 instance, kept if it serves more or sooner");
    probe_instance = true;
  } else if (!have && overlapping && !can_grow && retry_delay && lim.max_batch > 1 &&
             current.queue_delay_us < delay_cap && w.batches > 0 && w.mean_batch_rows < kBatchFull * batch_target) {
    propose(ControlKnob::kQueueDelay, current.queue_delay_us, next_delay,
            why6 + ", no instance to add, batches of " + num(w.mean_batch_rows) + " rows: queue delay " +
                ms(static_cast<double>(next_delay)) + ", kept if it serves more or sooner");
    probe_delay = true;
  }
  // Light-load measurements of the batch time per thread count (rule 5's choice).
  const int spread = spread_threads(lim, active);
  if (state->measured_instances != active || state->measure_windows >= kThreadMeasureWindows) {
    state->light_service_us.fill(0);
    state->measured_instances = active;
    state->measure_windows = 0;
  }
  ++state->measure_windows;
  const bool light = why.empty() && w.refused == 0 && w.batches >= kMeasureBatches &&
                     w.mean_batch_rows < kSingleRowBatches && w.service_us > 0;
  if (light && threads < kMeasuredThreads) {
    double& m = state->light_service_us[threads];
    m = m > 0 ? 0.5 * (m + w.service_us) : w.service_us;
  }
  const bool multi_row = w.batches > 0 && w.mean_batch_rows >= kSingleRowBatches;
  const int fastest = multi_row ? -1 : fastest_light_threads(*state, min_threads, spread);
  const int target = fastest > 0 ? fastest : spread;
  bool probe = false;
  // Rule 5: the cores to spread changed while nothing else did, or a light load runs faster on
  // fewer threads (measured, or to be measured: one fewer thread is tried).
  if (!have && target != threads) {
    if (target < spread) {
      const double* m = state->light_service_us.data();
      propose(ControlKnob::kThreads, threads, target,
              "light load (batches of " + num(w.mean_batch_rows) + " rows): batches took " + us(m[target]) + " at " +
                  std::to_string(target) + " threads against " + us(m[spread]) + " at " + std::to_string(spread) +
                  ": " + std::to_string(target) + " threads per instance");
    } else {
      propose(ControlKnob::kThreads, threads, target,
              std::to_string(active) + (active == 1 ? " instance" : " instances") + " over " +
                  std::to_string(std::max(lim.cores_granted, active * target)) +
                  " cores available: " + std::to_string(target) + " threads per instance");
    }
  } else if (!have && light && threads > min_threads && threads < kMeasuredThreads &&
             state->light_service_us[threads - 1] <= 0) {
    propose(ControlKnob::kThreads, threads, threads - 1,
            "light load (batches of " + num(w.mean_batch_rows) + " rows): batches take " +
                us(state->light_service_us[threads]) + " at " + std::to_string(threads) + " threads: trying " +
                std::to_string(threads - 1));
    probe = true;
  }
  if (!have) return d;

  // Rule 2 and hysteresis: a change waits out the cooldown; undoing the last one waits longer.
  const int direction = c.to > c.from ? 1 : -1;
  const bool reverses =
      state->last_knob == static_cast<int>(c.knob) && state->last_direction == -direction && !state->last_was_probe;
  const int wait = reverses ? lim.reverse_cooldown_windows : lim.cooldown_windows;
  if (!forced && state->windows_since_change <= wait) return d;
  state->instance_probe = probe_instance;
  state->delay_probe = probe_delay;
  if (probe_instance || probe_delay) {
    state->probe_base_rate = rate;
    state->probe_base_p50_us = w.p50_us;
    state->probe_base_overlap = overlap;
    state->probe_base_delay_us = current.queue_delay_us;
  }
  // Lowered for any reason but undoing a later probe: what was kept is given up.
  if (c.knob == ControlKnob::kInstances && direction < 0 && !undo_probe) state->kept_overlap = 0;
  if (c.knob == ControlKnob::kQueueDelay && direction < 0 && !undo_probe) state->kept_delay_overlap = 0;

  switch (c.knob) {
    case ControlKnob::kQueueDelay:
      d.settings.queue_delay_us = c.to;
      break;
    case ControlKnob::kPreferredBatch:
      d.settings.preferred_batch = static_cast<int>(c.to);
      break;
    case ControlKnob::kInstances:
      d.settings.active_instances = static_cast<int>(c.to);
      break;
    case ControlKnob::kThreads:
      d.settings.threads_per_instance = static_cast<int>(c.to);
      break;
  }
  state->windows_since_change = 0;
  state->last_knob = static_cast<int>(c.knob);
  state->last_direction = direction;
  state->last_was_probe = probe || probe_instance || probe_delay || undo_probe;
  const std::string reason = c.reason;
  d.changes.push_back(std::move(c));
  // The threads move with the instances: the cores of the active ones spread over the new count.
  if (d.changes.front().knob == ControlKnob::kInstances) {
    const int to = spread_threads(lim, d.settings.active_instances);
    if (to != threads) {
      ControlChange t;
      t.knob = ControlKnob::kThreads;
      t.from = threads;
      t.to = to;
      t.reason = reason + ", " + std::to_string(to) + " threads per instance";
      d.settings.threads_per_instance = to;
      d.changes.push_back(std::move(t));
    }
  }
  return d;
}

}  // namespace streamline::runtime
