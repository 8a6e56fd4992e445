#pragma once
// The online controller's decision: a pure function of one control window's observations of a
// model, its current settings and its limits. It returns the settings for the next window (queue
// delay, preferred batch, active instances and their intra-op threads), with each change and its
// reason.
//
//   ControlCounters before = scheduler.control_counters();  ...one window later...
//   ControlWindow w = window_between(before, scheduler.control_counters(), current.active_instances);
//   ControlLimits lim;  lim.latency_objective_us = 20000;  lim.max_batch = 8;  lim.max_instances = 4;
//   lim.threads_per_instance = 1;  lim.max_threads_per_instance = 2;  lim.cores_granted = 2;
//   ControlDecision d = control_step(w, current, lim, &state);   // state: hysteresis, kept by the caller
//   for (const ControlChange& c : d.changes) log(c.reason);     // "p99 31.0 ms over the 20.0 ms ..."
//   scheduler.set_control(d.settings);
//
// No clock, no threads, no locks: the control loop (control_loop.h) calls it once a window, and
// tests call it with scripted windows.
//
// Threads follow instances: the active instances spread the cores this model may use (its share
// of the budget, within what is granted) evenly, threads = spread / active within
// [threads_per_instance, max_threads_per_instance]. One instance on an idle server runs on every
// core (lowest latency); each instance added under pressure takes its cores from the others'
// threads (more throughput), and an instance shed gives its cores back to the rest.
//
// Rules, in order (the first that applies decides; at most one knob changes per window, the
// threads moving with an instance change as above):
//  1. Budget: more cores held than granted (active x threads > cores_granted, another model took
//     them, or cores borrowed while idle are busy again: !keep_lent): fewer threads per instance
//     while the instances keep at least their minimum, else -1 instance; at once, cooldown or not.
//  2. Cooldown: for `cooldown_windows` windows after a change nothing else changes.
//  3. Pressure (p99 over the objective, requests refused or timed out, a queue deeper than
//     kBacklogPerInstance per active instance, or instances over kSaturatedBusy busy with requests
//     waiting: throughput is capped there): +1 instance while the instance limit and the core
//     budget allow (past the budget, on cores the instances of every model leave idle, only as
//     rule 6's probe: kept when it serves more or sooner); else, when batches reach the preferred
//     size that caps them, a larger one (doubled, up to max_batch); else, when batches stay small
//     while the instances are busy, a longer queue delay (one step of objective / 10, up to
//     objective / 4) so that they fill; else, with batches not full, a queue-delay step as rule
//     6's probe.
//  4. Slack (p99 under objective x kSlackFraction, nothing refused, a shallow queue): queue delay
//     to 0 when batches hold about one row (waiting gains nothing), else halved; then -1 instance
//     when the others would stay under kShedBusyFraction busy. The preferred batch stays: with no
//     queue delay it only caps batches, which a light load does not fill.
//  5. Spread: threads per instance differ from what the spread gives (the budget grew or shrank
//     while nothing else changed): set them. Under a light load (batches of about one row) the
//     threads are chosen by measurement instead: each such window records the mean time a batch
//     took at the current thread count, and one fewer thread is tried (a probe) while it has not
//     been measured; fewer threads are kept when their batches take at most kFewerThreadsGain of
//     the time more threads took (waking intra-op threads for a small model can cost more than it
//     gains, most of all when the clients share the cores). The measurements are dropped when
//     the active instances change and after kThreadMeasureWindows windows, so they follow the load.
//  6. Overlap (between the two bands, or in slack with nothing to lower): requests wait for each
//     other (in the server at once, by Little's law arrival rate x p50, at least kProbeOverlap per
//     active instance) while another instance fits the limits and the core budget, or cores left
//     idle (cores_idle): +1 instance as a probe. The first window after its cooldown judges it
//     against the window before it: kept when the model served at least kProbeGain more requests a
//     second (closed-loop clients) or its p50 fell by kProbeGain (open-loop arrivals), else undone
//     at once. A kept instance is not shed for slack while the overlap stays above
//     kKeptOverlapShare of what it was when kept; a probe undone is not tried again while the
//     overlap stays within kProbeRetryChange of what it was, for kThreadMeasureWindows windows.
//     With no instance to add (the limit, or no core), batching on and batches not full, one
//     queue-delay step (objective / 10, up to objective / 4) is probed instead and judged the
//     same way: kept when the model serves more or sooner (fuller batches amortise the per-batch
//     costs), else undone; a kept delay is not lowered for slack while the overlap stays above
//     kKeptOverlapShare of what it was when kept.
//  7. Otherwise: no change.
// A change that reverses the previous one on the same knob waits `reverse_cooldown_windows`
// windows instead, so a load at the edge of a band does not flap the setting.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace streamline::runtime {

// Bounds of the window latency histogram: bucket i holds (bound(i-1), bound(i)] microseconds,
// bound(i) = kLatencyBase * kLatencyGrowth^i; the last bucket holds everything above.
inline constexpr int kControlLatencyBuckets = 64;
inline constexpr double kControlLatencyBaseUs = 20;
inline constexpr double kControlLatencyGrowth = 1.25;
// Bucket of a latency in microseconds.
int control_latency_bucket(double us);
// Upper bound of bucket i (microseconds).
double control_latency_bound(int i);

// Cumulative counters a scheduler keeps for its controller; two of them a window apart give that
// window's observations (window_between).
struct ControlCounters {
  int64_t time_us = 0;        // when they were read (the scheduler's clock)
  uint64_t arrivals = 0;      // requests offered (accepted or refused at enqueue)
  uint64_t refused = 0;       // refused at enqueue (queue full, admission)
  uint64_t expired = 0;       // timed out in the queue
  uint64_t completed = 0;     // answered with outputs
  uint64_t batches = 0;       // batches launched
  uint64_t batch_rows = 0;    // rows over those batches
  double depth_integral = 0;  // sum of queue depth x microseconds
  int64_t depth_max = 0;      // deepest queue since the previous read (reset by each read)
  int64_t busy_us = 0;        // time instances spent running batches, all instances together
  std::array<uint64_t, kControlLatencyBuckets> latency{};  // end-to-end latency of completed requests
};

// One window's observations of a model.
struct ControlWindow {
  int64_t length_us = 0;
  double arrival_rate = 0;      // requests offered per second
  double queue_depth_mean = 0;  // time-weighted
  int64_t queue_depth_max = 0;
  double mean_batch_rows = 0;     // 0 when no batch ran
  double p50_us = 0, p99_us = 0;  // end-to-end, completed requests; 0 when none completed
  uint64_t completed = 0;
  uint64_t refused = 0;      // refused at enqueue plus timed out in the queue
  double busy_fraction = 0;  // of the active instances' time, in [0, 1]
  uint64_t batches = 0;      // batches launched
  double service_us = 0;     // mean time a batch ran (busy time / batches); 0 when none ran
};

// The observations between two reads; `active_instances` were active through the window.
ControlWindow window_between(const ControlCounters& before, const ControlCounters& after, int active_instances);

// What the controller sets.
struct ControlSettings {
  int64_t queue_delay_us = 0;    // BatchPolicy::max_queue_delay_us
  int preferred_batch = 0;       // the one preferred batch size; 0 = none (batches fill to max_batch)
  int active_instances = 1;      // instances that take batches (the first ones)
  int threads_per_instance = 1;  // intra-op threads each active instance runs with
  bool operator==(const ControlSettings&) const = default;
};

// What it may set.
struct ControlLimits {
  int64_t latency_objective_us = 0;  // the model's SLO (> 0 for the controller to act)
  int max_batch = 1;                 // BatchPolicy::max_batch_size; 1 = no batching knobs
  int max_instances = 1;             // instances the model was started with
  int threads_per_instance = 1;      // intra-op threads each active instance runs with at least
  int max_threads_per_instance = 0;  // at most (what its plans allow); <= threads_per_instance: fixed
  int cores_granted = 1;             // cores this model may hold (the budget less what others hold)
  int cores_share = 0;               // cores its threads spread over: its fair share; 0 = cores_granted
  // Lending (CoreBudget::idle_cores): whole cores every model's instances left idle in the last
  // window, which one more instance may borrow past cores_granted (as a probe); and whether cores
  // held past cores_granted may be kept (the cores are not all busy). 0 and false: a strict budget.
  int cores_idle = 0;
  bool keep_lent = false;
  int cooldown_windows = 2;          // windows without change after a change
  int reverse_cooldown_windows = 5;  // windows before a change may undo the previous one
};

// The controller's memory between windows (hysteresis); start with the default.
inline constexpr int kMeasuredThreads = 65;
struct ControllerState {
  int windows_since_change = 1 << 20;
  int last_knob = -1;           // ControlKnob of the last change, -1 = none yet
  int last_direction = 0;       // +1 up, -1 down
  bool last_was_probe = false;  // the last change tried one fewer thread (undoing it waits less)
  // Mean batch time (us) at each thread count under a light load; 0 = not measured. Taken with
  // `measured_instances` active, over the last `measure_windows` windows.
  std::array<double, kMeasuredThreads> light_service_us{};
  int measured_instances = 0;
  int measure_windows = 0;
  // Rule 6's instance probe: judged while pending against the window before it.
  bool instance_probe = false;
  double probe_base_rate = 0;  // completed requests per second
  double probe_base_p50_us = 0;
  double probe_base_overlap = 0;
  double kept_overlap = 0;      // overlap after the last probe kept; 0 = none kept
  double rejected_overlap = 0;  // overlap before the last probe undone; 0 = none undone
  int rejected_windows = 0;     // windows since then
  // Rule 6's queue-delay probe (no instance to add), judged as the instance probe.
  bool delay_probe = false;
  int64_t probe_base_delay_us = 0;    // the delay before it
  double kept_delay_overlap = 0;      // overlap when the last one was kept; 0 = none kept
  double rejected_delay_overlap = 0;  // overlap before the last one undone; 0 = none undone
  int rejected_delay_windows = 0;
};

enum class ControlKnob { kQueueDelay, kPreferredBatch, kInstances, kThreads };
// "queue_delay", "preferred_batch", "instances", "threads"
const char* control_knob_name(ControlKnob k);

struct ControlChange {
  ControlKnob knob = ControlKnob::kInstances;
  int64_t from = 0, to = 0;
  std::string reason;  // one line: the observation, the objective, the change
  const char* direction() const { return to > from ? "up" : "down"; }
};

struct ControlDecision {
  ControlSettings settings;  // for the next window (the current ones when unchanged)
  // At most one knob, plus kThreads when an instance change moves the threads with it.
  std::vector<ControlChange> changes;
};

// Threads per instance when `active` instances spread the cores `limits` gives this model.
int spread_threads(const ControlLimits& limits, int active);

// Pressure: a mean queue deeper than this many requests per active instance.
inline constexpr double kBacklogPerInstance = 2.0;
// Pressure: instances busier than this with at least kSaturatedDepth queued per instance.
inline constexpr double kSaturatedBusy = 0.9;
inline constexpr double kSaturatedDepth = 0.5;
// Slack: p99 under this fraction of the objective.
inline constexpr double kSlackFraction = 0.5;
// An instance is shed when the remaining ones would be busy less than this.
inline constexpr double kShedBusyFraction = 0.6;
// Light load: fewer threads are kept when their batches take at most this share of the time.
inline constexpr double kFewerThreadsGain = 0.9;
// Light load: a window measures the batch time when it ran at least this many batches.
inline constexpr uint64_t kMeasureBatches = 20;
// Light-load measurements are dropped (and taken again) after this many windows.
inline constexpr int kThreadMeasureWindows = 120;

// Overlap: requests in the server at once (arrival rate x p50), per active instance, above which
// another instance is probed.
inline constexpr double kProbeOverlap = 1.5;
// Idle cores (CoreBudget::idle_cores) under which the cores count as all busy: what is held past
// the budget is given back.
inline constexpr double kContendedIdleCores = 0.25;
// A probed instance is kept when throughput rises, or p50 falls, by at least this share.
inline constexpr double kProbeGain = 0.08;
// A kept instance may be shed for slack once the overlap falls under this share of its value then.
inline constexpr double kKeptOverlapShare = 0.6;
// An undone probe is tried again once the overlap moved by more than this share.
inline constexpr double kProbeRetryChange = 0.3;
// In-server overlap of a window: arrival rate x p50 (Little's law, the median for the mean).
double window_overlap(const ControlWindow& w);

[[nodiscard]] ControlDecision control_step(const ControlWindow& w, const ControlSettings& current,
                                           const ControlLimits& limits, ControllerState* state);

}  // namespace streamline::runtime
