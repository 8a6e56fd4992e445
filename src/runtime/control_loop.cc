#include "runtime/control_loop.h"

#include <algorithm>
#include <chrono>

#include "core/cpu_set.h"
#include "core/logging.h"

namespace streamline {

CoreBudget::CoreBudget(int cores, bool lend_idle)
    : cores_(cores > 0 ? cores : core::usable_cores()), lend_idle_(lend_idle) {}

bool CoreBudget::try_hold(const void* owner, int held, int floor, int lent) {
  std::lock_guard<std::mutex> lock(mu_);
  int others = 0;
  for (const auto& [o, n] : held_)
    if (o != owner) others += n;
  auto it = held_.find(owner);
  const int before = it == held_.end() ? 0 : it->second;
  const int lendable = lend_idle_ ? std::max(0, lent) : 0;
  if (held > before && held > floor && others + held > cores_ + lendable) return false;
  held_[owner] = std::max(0, held);
  return true;
}

void CoreBudget::release(const void* owner) {
  std::lock_guard<std::mutex> lock(mu_);
  held_.erase(owner);
  busy_.erase(owner);
}

void CoreBudget::report_busy(const void* owner, double cores) {
  std::lock_guard<std::mutex> lock(mu_);
  busy_[owner] = std::max(0.0, cores);
}

double CoreBudget::idle_cores() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!lend_idle_) return 0;
  double busy = 0;
  for (const auto& [o, n] : held_) {
    const auto it = busy_.find(o);
    busy += it == busy_.end() ? n : std::min<double>(n, it->second);
  }
  return cores_ - busy;
}

int CoreBudget::share(const void* owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t owners = held_.size() + (held_.count(owner) ? 0 : 1);
  return std::max(1, cores_ / static_cast<int>(owners));
}

int CoreBudget::held_by_others(const void* owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  int others = 0;
  for (const auto& [o, n] : held_)
    if (o != owner) others += n;
  return others;
}

namespace runtime {

ControlLoop::ControlLoop(Scheduler& scheduler, ControlLoopOptions options)
    : scheduler_(scheduler),
      options_(std::move(options)),
      budget_(options_.controller.budget ? options_.controller.budget : std::make_shared<CoreBudget>()) {
  options_.controller.window_us = std::max<int64_t>(1, options_.controller.window_us);
  ControlLimits& lim = options_.limits;
  lim.threads_per_instance = std::max(1, lim.threads_per_instance);
  lim.max_threads_per_instance = std::max(lim.threads_per_instance, lim.max_threads_per_instance);
  if (!options_.set_threads) lim.max_threads_per_instance = lim.threads_per_instance;
  const int floor = lim.threads_per_instance;
  settings_ = scheduler_.control_settings();
  // The instances active at start are held if the budget has room; the first one always is.
  (void)budget_->try_hold(this, floor, floor);  // counted among the owners before the spread
  while (settings_.active_instances > 1 && !budget_->try_hold(this, settings_.active_instances * floor, floor))
    --settings_.active_instances;
  // Their threads: what the spread gives, when the budget grants it.
  lim.cores_granted = budget_->cores() - budget_->held_by_others(this);
  lim.cores_share = budget_->share(this);
  settings_.threads_per_instance = spread_threads(lim, settings_.active_instances);
  if (!budget_->try_hold(this, settings_.active_instances * settings_.threads_per_instance, floor))
    settings_.threads_per_instance = floor;
  scheduler_.set_control(settings_);
  if (options_.set_threads) options_.set_threads(settings_.threads_per_instance);
  last_ = scheduler_.control_counters();
  stats_.enabled = true;
}

ControlLoop::~ControlLoop() {
  stop();
}

void ControlLoop::start() {
  std::lock_guard<std::mutex> lock(thread_mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread(&ControlLoop::thread_main, this);
}

void ControlLoop::stop() {
  {
    std::lock_guard<std::mutex> lock(thread_mu_);
    stopping_ = true;
  }
  thread_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  budget_->release(this);  // a model shut down holds no cores, also while its object lingers
}

void ControlLoop::thread_main() {
  std::unique_lock<std::mutex> lock(thread_mu_);
  for (;;) {
    thread_cv_.wait_for(lock, std::chrono::microseconds(options_.controller.window_us), [&] { return stopping_; });
    if (stopping_) return;
    lock.unlock();
    (void)step();
    lock.lock();
  }
}

std::vector<ControllerDecision> ControlLoop::step() {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return {};
  const ControlCounters now = scheduler_.control_counters();
  const ControlWindow w = window_between(last_, now, settings_.active_instances);
  last_ = now;
  // The cores this model's instances kept busy (each running instance keeps its threads' cores).
  budget_->report_busy(this, w.busy_fraction * settings_.active_instances * settings_.threads_per_instance);
  ControlLimits lim = options_.limits;
  lim.cores_granted = budget_->cores() - budget_->held_by_others(this);
  lim.cores_share = budget_->share(this);
  const double idle = budget_->idle_cores();
  lim.keep_lent = idle >= kContendedIdleCores;  // idle_cores() is 0 when the budget lends nothing
  lim.cores_idle = lim.keep_lent ? static_cast<int>(idle) : 0;
  const int floor = lim.threads_per_instance;
  ControlDecision d = control_step(w, settings_, lim, &state_);
  std::vector<ControllerDecision> out;
  if (d.changes.empty()) return out;
  const ControlSettings& s = d.settings;
  if (s.active_instances * s.threads_per_instance != settings_.active_instances * settings_.threads_per_instance &&
      !budget_->try_hold(this, s.active_instances * s.threads_per_instance, floor, lim.cores_idle)) {
    // Cores taken since: an instance shed keeps the others' threads; nothing else is applied.
    const bool shed =
        d.changes.front().knob == ControlKnob::kInstances && s.active_instances < settings_.active_instances;
    if (!shed || !budget_->try_hold(this, s.active_instances * settings_.threads_per_instance, floor)) {
      SL_LOG(kDebug) << "controller " << options_.controller.name << ": " << d.changes.front().reason
                     << " not applied: the cores were taken";
      return out;
    }
    d.settings.threads_per_instance = settings_.threads_per_instance;
    d.changes.resize(1);
  }
  const bool threads_changed = d.settings.threads_per_instance != settings_.threads_per_instance;
  // Fewer threads before more instances and fewer instances before more threads: the cores in use
  // never pass what is held.
  if (threads_changed && d.settings.threads_per_instance < settings_.threads_per_instance && options_.set_threads)
    options_.set_threads(d.settings.threads_per_instance);
  scheduler_.set_control(d.settings);
  if (threads_changed && d.settings.threads_per_instance > settings_.threads_per_instance && options_.set_threads)
    options_.set_threads(d.settings.threads_per_instance);
  settings_ = d.settings;
  for (const ControlChange& c : d.changes) {
    ControllerDecision e;
    e.knob = control_knob_name(c.knob);
    e.direction = c.direction();
    e.from = c.from;
    e.to = c.to;
    e.reason = c.reason;
    e.time_us = now.time_us;
    ++stats_.decisions[{e.knob, e.direction}];
    SL_LOG(kInfo) << "controller " << options_.controller.name << ": " << e.reason;
    if (options_.controller.on_decision) options_.controller.on_decision(e);
    out.push_back(std::move(e));
  }
  return out;
}

ControllerStats ControlLoop::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ControllerStats s = stats_;
  report_settings(settings_, &s);
  return s;
}

void report_settings(const ControlSettings& settings, ControllerStats* stats) {
  stats->active_instances = settings.active_instances;
  stats->queue_delay_us = settings.queue_delay_us;
  stats->preferred_batch = settings.preferred_batch;
  stats->threads_per_instance = settings.threads_per_instance;
}

}  // namespace runtime
}  // namespace streamline
