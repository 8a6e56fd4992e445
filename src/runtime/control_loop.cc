#include "runtime/control_loop.h"

#include <algorithm>
#include <chrono>

#include "core/cpu_set.h"
#include "core/logging.h"

namespace streamline {

CoreBudget::CoreBudget(int cores) : cores_(cores > 0 ? cores : core::usable_cores()) {}

bool CoreBudget::try_hold(const void* owner, int held, int floor) {
  std::lock_guard<std::mutex> lock(mu_);
  int others = 0;
  for (const auto& [o, n] : held_)
    if (o != owner) others += n;
  auto it = held_.find(owner);
  const int before = it == held_.end() ? 0 : it->second;
  if (held > before && held > floor && others + held > cores_) return false;
  held_[owner] = std::max(0, held);
  return true;
}

void CoreBudget::release(const void* owner) {
  std::lock_guard<std::mutex> lock(mu_);
  held_.erase(owner);
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
      budget_(options_.budget ? options_.budget : std::make_shared<CoreBudget>()) {
  options_.window_us = std::max<int64_t>(1, options_.window_us);
  options_.limits.threads_per_instance = std::max(1, options_.limits.threads_per_instance);
  settings_ = scheduler_.control_settings();
  const int threads = options_.limits.threads_per_instance;
  // The instances active at start are held if the budget has room; the first one always is.
  while (settings_.active_instances > 1 && !budget_->try_hold(this, settings_.active_instances * threads, threads))
    --settings_.active_instances;
  if (settings_.active_instances == 1) (void)budget_->try_hold(this, threads, threads);
  scheduler_.set_control(settings_);
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
    thread_cv_.wait_for(lock, std::chrono::microseconds(options_.window_us), [&] { return stopping_; });
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
  ControlLimits lim = options_.limits;
  lim.cores_granted = budget_->cores() - budget_->held_by_others(this);
  const int threads = lim.threads_per_instance;
  ControlDecision d = control_step(w, settings_, lim, &state_);
  std::vector<ControllerDecision> out;
  if (d.changes.empty()) return out;
  const ControlChange& c = d.changes.front();
  if (c.knob == ControlKnob::kInstances && !budget_->try_hold(this, d.settings.active_instances * threads, threads)) {
    SL_LOG(kDebug) << "controller " << options_.name << ": " << c.reason << " not applied: the cores were taken";
    return out;
  }
  scheduler_.set_control(d.settings);
  settings_ = d.settings;
  ControllerDecision e;
  e.knob = control_knob_name(c.knob);
  e.direction = c.direction();
  e.from = c.from;
  e.to = c.to;
  e.reason = c.reason;
  e.time_us = now.time_us;
  ++stats_.decisions[{e.knob, e.direction}];
  SL_LOG(kInfo) << "controller " << options_.name << ": " << e.reason;
  if (options_.on_decision) options_.on_decision(e);
  out.push_back(std::move(e));
  return out;
}

ControllerStats ControlLoop::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ControllerStats s = stats_;
  s.active_instances = settings_.active_instances;
  s.queue_delay_us = settings_.queue_delay_us;
  s.preferred_batch = settings_.preferred_batch;
  return s;
}

}  // namespace runtime
}  // namespace streamline
