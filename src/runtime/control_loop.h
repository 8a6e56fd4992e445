#pragma once
// The online controller's loop: once a window it reads a scheduler's counters, asks the pure
// decision (controller.h) what to change, takes or returns cores in the shared budget, and
// applies the new settings to the scheduler between batches.
//
//   ControlLoopOptions o;
//   o.limits.latency_objective_us = 20000;  o.limits.max_batch = 8;  o.limits.max_instances = 4;
//   o.limits.threads_per_instance = 1;  o.controller.budget = server_budget;  o.controller.window_us = 1'000'000;
//   ControlLoop loop(scheduler, o);          // holds one instance's cores in the budget
//   loop.start();                            // a window every window_us of real time
//   std::vector<ControllerDecision> d = loop.step();   // or: one window now (tests, FakeClock)
//   loop.stop();                             // joins; the destructor does too and frees the cores
//
// Windows are timed by the real clock (the thread sleeps window_us); what a window saw is timed by
// the scheduler's clock, so a FakeClock drives the observations of step(). Each change is logged
// with its reason, counted in stats() and handed to on_decision. Cores are taken only when the
// budget grants them at the moment of applying (another model may have taken them since): an
// instance or threads not granted are not added, and an instance shed whose threads could not
// grow keeps the others' threads as they were.
// Thread-safe: step, stats and stop may be called from any thread.

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/controller.h"
#include "runtime/scheduler.h"
#include "streamline/serving.h"

namespace streamline::runtime {

struct ControlLoopOptions {
  // The model's controller options as served (ServingOptions::controller), read when the loop is
  // made: window_us (real time between windows, raised to >= 1), budget (shared with other models;
  // null = this process's cores for this loop alone), name (in log lines) and on_decision (called
  // after each applied change, on the thread that ran the window). `enabled` and `thread` are the
  // served model's to act on; the loop ignores them.
  ControllerOptions controller;
  // The objective and bounds of the decision; cores_granted is filled from the budget each window.
  ControlLimits limits;
  // Sets the intra-op threads of every instance, from their next batch on (InstancePool::set_threads).
  // Called once at start and whenever the threads per instance change; null when they stay fixed
  // (limits.max_threads_per_instance <= limits.threads_per_instance).
  std::function<void(int)> set_threads;
};

// `stats` with the settings in force (active instances, queue delay, preferred batch, threads per
// instance): what ServingStats::controller reports, from a control loop or, without one, from the
// scheduler's settings.
void report_settings(const ControlSettings& settings, ControllerStats* stats);

class ControlLoop {
 public:
  // Not owned: `scheduler` must outlive the loop. Holds the scheduler's active instances' cores
  // and sets their threads (the spread of limits over the instances active at start).
  ControlLoop(Scheduler& scheduler, ControlLoopOptions options);
  // stop().
  ~ControlLoop();
  ControlLoop(const ControlLoop&) = delete;
  ControlLoop& operator=(const ControlLoop&) = delete;

  // Runs windows on a thread of its own until stop(). Call at most once.
  void start();
  // Joins the thread and returns the cores to the budget; no window runs after it. Idempotent.
  void stop();
  // One window now: the observations since the previous one, the decision, and what was applied.
  std::vector<ControllerDecision> step();
  // Settings in force and decisions so far.
  ControllerStats stats() const;

 private:
  void thread_main();

  Scheduler& scheduler_;
  ControlLoopOptions options_;
  std::shared_ptr<CoreBudget> budget_;

  mutable std::mutex mu_;  // serialises step(); guards what follows
  ControlCounters last_;
  ControlSettings settings_;
  ControllerState state_;
  ControllerStats stats_;
  bool stopped_ = false;  // stop() ran: no window runs, no core is held

  std::mutex thread_mu_;
  std::condition_variable thread_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace streamline::runtime
