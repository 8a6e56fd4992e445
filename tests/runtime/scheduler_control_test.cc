// The controller's settings applied to a running scheduler (FakeClock, a fake executor), and the
// control loop over it: changes apply between batches, nothing queued is lost or reordered.

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <set>

#include "runtime/control_loop.h"
#include "runtime/scheduler.h"

namespace streamline::runtime {
namespace {

using namespace std::chrono_literals;

// Runs batches instantly (moving the fake clock by `compute_us` each), or holds those naming a
// held id until released; records each batch's ids and instance.
class Executor {
 public:
  explicit Executor(FakeClock* clock, int64_t compute_us = 0) : clock_(clock), compute_us_(compute_us) {}
  BatchExecutor fn() {
    return [this](int instance, std::span<const InferRequest* const> reqs, std::span<InferResponse> out) {
      std::unique_lock<std::mutex> lock(mu_);
      std::vector<uint64_t> ids;
      for (const auto* r : reqs) ids.push_back(r->id);
      runs_.push_back({instance, ids});
      cv_.notify_all();
      cv_.wait(lock, [&] {
        for (uint64_t id : ids)
          if (held_.count(id)) return false;
        return true;
      });
      clock_->advance_us(compute_us_);
      for (size_t i = 0; i < reqs.size(); ++i)
        out[i].outputs["id"] = Tensor::from_vector<int64_t>(Shape{1}, {static_cast<int64_t>(reqs[i]->id)});
    };
  }
  void hold(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    held_.insert(id);
  }
  void release_all() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_.clear();
    }
    cv_.notify_all();
  }
  bool wait_runs(size_t n, std::chrono::milliseconds timeout = 5000ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return runs_.size() >= n; });
  }
  std::vector<std::pair<int, std::vector<uint64_t>>> runs() {
    std::lock_guard<std::mutex> lock(mu_);
    return runs_;
  }

 private:
  FakeClock* clock_;
  int64_t compute_us_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<int, std::vector<uint64_t>>> runs_;
  std::set<uint64_t> held_;
};

std::future<InferResponse> submit(Scheduler& s, uint64_t id, int priority = -1) {
  auto p = std::make_shared<std::promise<InferResponse>>();
  auto f = p->get_future();
  InferRequest r;
  r.id = id;
  r.priority = priority;
  s.enqueue(std::move(r), 1, 0, [p](InferResponse resp) { p->set_value(std::move(resp)); });
  return f;
}

struct Fixture {
  FakeClock clock;
  Executor exec;
  std::unique_ptr<Scheduler> sched;
  Fixture(BatchPolicy p, int instances, int active, int64_t compute_us = 0) : exec(&clock, compute_us) {
    SchedulerOptions so;
    so.serving.instances = instances;
    so.active_instances = active;
    so.serving.batching = p;
    so.serving.clock = &clock;
    sched = std::make_unique<Scheduler>(so, exec.fn());
    EXPECT_TRUE(sched->start().ok());
  }
};

BatchPolicy policy(int max_batch, int64_t delay_us, int levels = 1) {
  BatchPolicy p;
  p.max_batch_size = max_batch;
  p.max_queue_delay_us = delay_us;
  p.priority_levels = levels;
  return p;
}

ControlSettings settings(int64_t delay_us, int preferred, int active) {
  ControlSettings c;
  c.queue_delay_us = delay_us;
  c.preferred_batch = preferred;
  c.active_instances = active;
  return c;
}

TEST(SchedulerControl, InactiveInstanceTakesNoBatchUntilActivated) {
  Fixture fx(policy(1, 0), /*instances=*/2, /*active=*/1);
  EXPECT_EQ(fx.sched->control_settings().active_instances, 1);
  fx.exec.hold(0);
  auto f0 = submit(*fx.sched, 0);
  ASSERT_TRUE(fx.exec.wait_runs(1));
  auto f1 = submit(*fx.sched, 1);
  EXPECT_FALSE(fx.exec.wait_runs(2, 50ms));  // instance 1 is free but inactive
  fx.sched->set_control(settings(0, 0, 2));
  ASSERT_TRUE(fx.exec.wait_runs(2));
  EXPECT_EQ(fx.exec.runs()[1], (std::pair<int, std::vector<uint64_t>>{1, {1}}));
  fx.exec.release_all();
  EXPECT_TRUE(f0.get().status.ok());
  EXPECT_TRUE(f1.get().status.ok());
}

// Inactive workers wait apart from the active ones: a request reaches a free active instance
// while another is busy and a third inactive, an instance deactivated takes nothing more, and
// shutdown wakes the inactive ones.
TEST(SchedulerControl, RequestsReachTheFreeActiveInstanceOnly) {
  Fixture fx(policy(1, 0), /*instances=*/3, /*active=*/2);
  fx.exec.hold(0);
  fx.exec.hold(1);
  auto f0 = submit(*fx.sched, 0);
  ASSERT_TRUE(fx.exec.wait_runs(1));
  auto f1 = submit(*fx.sched, 1);
  ASSERT_TRUE(fx.exec.wait_runs(2));  // the other active instance, woken by the one notification
  std::set<int> used;
  for (const auto& r : fx.exec.runs()) used.insert(r.first);
  EXPECT_EQ(used, (std::set<int>{0, 1}));
  fx.exec.release_all();
  EXPECT_TRUE(f0.get().status.ok());
  EXPECT_TRUE(f1.get().status.ok());
  fx.sched->set_control(settings(0, 0, 1));
  for (uint64_t i = 2; i < 6; ++i) EXPECT_TRUE(submit(*fx.sched, i).get().status.ok());
  const auto runs = fx.exec.runs();
  ASSERT_EQ(runs.size(), 6u);
  for (size_t i = 2; i < runs.size(); ++i) EXPECT_EQ(runs[i].first, 0) << "run " << i;
}

TEST(SchedulerControl, QueueDelayChangeAppliesAtTheNextDecision) {
  Fixture fx(policy(8, 1'000'000), 1, 1);
  std::vector<std::future<InferResponse>> fs;
  for (uint64_t i = 0; i < 3; ++i) fs.push_back(submit(*fx.sched, i));
  EXPECT_FALSE(fx.exec.wait_runs(1, 30ms));  // waiting for the batch to fill; the clock stands still
  fx.sched->set_control(settings(0, 0, 1));
  for (auto& f : fs) EXPECT_EQ(f.get().batch_size, 3);
  EXPECT_EQ(fx.exec.runs().size(), 1u);
}

TEST(SchedulerControl, PreferredBatchCutsTheNextBatches) {
  Fixture fx(policy(8, 0), 1, 1);
  fx.exec.hold(0);
  auto f0 = submit(*fx.sched, 0);
  ASSERT_TRUE(fx.exec.wait_runs(1));
  std::vector<std::future<InferResponse>> fs;
  for (uint64_t i = 1; i <= 6; ++i) fs.push_back(submit(*fx.sched, i));
  fx.sched->set_control(settings(0, 4, 1));  // while a batch runs: it keeps its settings
  EXPECT_EQ(fx.sched->control_settings(), settings(0, 4, 1));
  fx.exec.release_all();
  EXPECT_EQ(f0.get().batch_size, 1);
  for (auto& f : fs) EXPECT_TRUE(f.get().status.ok());
  const auto runs = fx.exec.runs();
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[1].second, (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(runs[2].second, (std::vector<uint64_t>{5, 6}));
}

TEST(SchedulerControl, TheConfiguredPreferredSizesStayUntilThePreferredSizeChanges) {
  BatchPolicy p = policy(8, 1'000'000);
  p.preferred_batch_sizes = {2, 4};
  Fixture fx(p, 1, 1);
  fx.sched->set_control(settings(0, 4, 1));  // only the delay changes: {2, 4} stays
  fx.exec.hold(0);
  auto f0 = submit(*fx.sched, 0);
  ASSERT_TRUE(fx.exec.wait_runs(1));
  std::vector<std::future<InferResponse>> fs;
  for (uint64_t i = 1; i <= 3; ++i) fs.push_back(submit(*fx.sched, i));
  fx.exec.release_all();
  EXPECT_EQ(f0.get().batch_size, 1);
  for (auto& f : fs) EXPECT_TRUE(f.get().status.ok());
  // Three queued at no delay: cut to the largest preferred size they hold, 2, then 1.
  const auto runs = fx.exec.runs();
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[1].second, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(runs[2].second, (std::vector<uint64_t>{3}));
}

TEST(SchedulerControl, ShrinkingLosesNothingAndKeepsPriorities) {
  Fixture fx(policy(1, 0, /*levels=*/2), 2, 2);
  fx.exec.hold(0);
  fx.exec.hold(1);
  auto f0 = submit(*fx.sched, 0);
  auto f1 = submit(*fx.sched, 1);
  ASSERT_TRUE(fx.exec.wait_runs(2));
  std::vector<std::future<InferResponse>> fs;
  for (uint64_t i = 10; i < 14; ++i) fs.push_back(submit(*fx.sched, i, /*priority=*/1));
  fs.push_back(submit(*fx.sched, 20, /*priority=*/0));
  fx.sched->set_control(settings(0, 0, 1));  // both instances mid-batch
  fx.exec.release_all();
  EXPECT_TRUE(f0.get().status.ok());
  EXPECT_TRUE(f1.get().status.ok());
  for (auto& f : fs) EXPECT_TRUE(f.get().status.ok());
  const auto runs = fx.exec.runs();
  ASSERT_EQ(runs.size(), 7u);
  // After the change only instance 0 runs, the high-priority request first.
  std::vector<uint64_t> order;
  for (size_t i = 2; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].first, 0) << "run " << i;
    order.push_back(runs[i].second.at(0));
  }
  EXPECT_EQ(order, (std::vector<uint64_t>{20, 10, 11, 12, 13}));
  const ServingStats s = fx.sched->stats();
  EXPECT_EQ(s.succeeded, 7u);
  EXPECT_EQ(s.failed, 0u);
}

TEST(SchedulerControl, CountersFollowTheFakeClock) {
  Fixture fx(policy(1, 0), 1, 1, /*compute_us=*/3000);
  const ControlCounters a = fx.sched->control_counters();
  fx.exec.hold(0);
  auto f0 = submit(*fx.sched, 0);
  ASSERT_TRUE(fx.exec.wait_runs(1));
  auto f1 = submit(*fx.sched, 1);
  auto f2 = submit(*fx.sched, 2);
  fx.clock.advance_us(1000);  // two queued for 1 ms
  fx.exec.release_all();
  for (auto* f : {&f0, &f1, &f2}) EXPECT_TRUE(f->get().status.ok());
  const ControlCounters b = fx.sched->control_counters();
  EXPECT_EQ(b.arrivals - a.arrivals, 3u);
  EXPECT_EQ(b.completed - a.completed, 3u);
  EXPECT_EQ(b.batches - a.batches, 3u);
  EXPECT_EQ(b.busy_us - a.busy_us, 10'000);  // the first run held from 0 to 4 ms
  EXPECT_EQ(b.depth_max, 2);
  // Queue depth: 2 for 1 ms + 3 ms (the first run), then 1 for 3 ms.
  EXPECT_DOUBLE_EQ(b.depth_integral - a.depth_integral, 2.0 * 4000 + 1.0 * 3000);
  const ControlWindow w = window_between(a, b, 1);
  EXPECT_EQ(w.length_us, 10'000);
  EXPECT_DOUBLE_EQ(w.busy_fraction, 1.0);
  EXPECT_GE(w.p99_us, 10'000);  // the last request: 1 + 3 + 3 + 3 ms
}

// A loop over up to three instances whose 5 ms runs all miss a 1 ms objective, with no cooldown.
ControlLoopOptions slow_runs(std::shared_ptr<CoreBudget> budget) {
  ControlLoopOptions o;
  o.limits.latency_objective_us = 1000;
  o.limits.max_instances = 3;
  o.limits.threads_per_instance = 1;
  o.limits.cooldown_windows = 0;
  o.controller.budget = std::move(budget);
  return o;
}

// Rounds of four requests answered, then one window.
void run_rounds(
    Fixture& fx, ControlLoop& loop, int rounds, const std::function<bool()>& done = [] { return false; }) {
  for (int round = 0; round < rounds && !done(); ++round) {
    std::vector<std::future<InferResponse>> fs;
    for (uint64_t i = 0; i < 4; ++i) fs.push_back(submit(*fx.sched, round * 10 + i));
    for (auto& f : fs) EXPECT_TRUE(f.get().status.ok());
    (void)loop.step();
  }
}

TEST(ControlLoop, SlowRunsAddAnInstanceWithinTheBudget) {
  Fixture fx(policy(1, 0), /*instances=*/3, /*active=*/1, /*compute_us=*/5000);
  auto budget = std::make_shared<CoreBudget>(2, /*lend_idle=*/false);
  ControlLoopOptions o = slow_runs(budget);
  o.controller.name = "m";
  std::vector<ControllerDecision> seen;
  o.controller.on_decision = [&](const ControllerDecision& d) { seen.push_back(d); };
  ControlLoop loop(*fx.sched, o);
  EXPECT_EQ(budget->held_by_others(nullptr), 1);
  run_rounds(fx, loop, 4);
  // One instance added (2 cores granted, 1 thread each); a third would pass the budget.
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].knob, "instances");
  EXPECT_EQ(seen[0].direction, "up");
  EXPECT_EQ(seen[0].to, 2);
  EXPECT_NE(seen[0].reason.find("over the 1.0 ms objective"), std::string::npos) << seen[0].reason;
  EXPECT_EQ(fx.sched->control_settings().active_instances, 2);
  EXPECT_EQ(budget->held_by_others(nullptr), 2);
  const ControllerStats s = loop.stats();
  EXPECT_EQ(s.active_instances, 2);
  EXPECT_EQ((s.decisions.at({"instances", "up"})), 1u);
  loop.stop();  // a stopped loop holds no cores and decides nothing
  EXPECT_EQ(budget->held_by_others(nullptr), 0);
  EXPECT_TRUE(loop.step().empty());
}

TEST(ControlLoop, CoresLeftIdleAreBorrowedPastTheBudgetAsAProbe) {
  // As above with lending on: the two instances leave a core idle between the rounds, and the
  // third is borrowed on it, as a probe.
  Fixture fx(policy(1, 0), /*instances=*/3, /*active=*/1, /*compute_us=*/5000);
  auto budget = std::make_shared<CoreBudget>(2);
  ControlLoopOptions o = slow_runs(budget);
  std::vector<ControllerDecision> seen;
  o.controller.on_decision = [&](const ControllerDecision& d) { seen.push_back(d); };
  ControlLoop loop(*fx.sched, o);
  run_rounds(fx, loop, 3, [&] { return seen.size() >= 2; });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].reason.find("borrow"), std::string::npos) << seen[0].reason;  // within the budget
  EXPECT_EQ(seen[1].to, 3);
  EXPECT_NE(seen[1].reason.find("1 idle core to borrow: +1 instance, kept if it serves more or sooner"),
            std::string::npos)
      << seen[1].reason;
  EXPECT_EQ(budget->held_by_others(nullptr), 3);  // past the 2 cores, on a measured idle one
  EXPECT_EQ(fx.sched->control_settings().active_instances, 3);
  loop.stop();
  EXPECT_EQ(budget->held_by_others(nullptr), 0);
}

TEST(ControlLoop, ModelsShareOneBudget) {
  auto budget = std::make_shared<CoreBudget>(3);
  EXPECT_TRUE(budget->try_hold(&budget, 2, 1));  // another model holds 2 of 3
  Fixture fx(policy(1, 0), 3, 1, /*compute_us=*/5000);
  ControlLoopOptions o;
  o.limits.latency_objective_us = 1000;
  o.limits.max_instances = 3;
  o.limits.threads_per_instance = 1;
  o.limits.cooldown_windows = 0;
  o.controller.budget = budget;
  ControlLoop loop(*fx.sched, o);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::future<InferResponse>> fs;
    for (uint64_t i = 0; i < 4; ++i) fs.push_back(submit(*fx.sched, round * 10 + i));
    for (auto& f : fs) EXPECT_TRUE(f.get().status.ok());
    EXPECT_TRUE(loop.step().empty());  // no free core
  }
  EXPECT_EQ(fx.sched->control_settings().active_instances, 1);
  EXPECT_EQ(budget->held_by_others(nullptr), 3);
}

TEST(ControlLoop, AnInstanceAloneRunsOnEveryCoreAndAnAddedOneTakesItsShare) {
  Fixture fx(policy(1, 0), /*instances=*/2, /*active=*/1, /*compute_us=*/5000);
  auto budget = std::make_shared<CoreBudget>(2);
  ControlLoopOptions o;
  o.limits.latency_objective_us = 1000;  // every 5 ms run misses it
  o.limits.max_instances = 2;
  o.limits.threads_per_instance = 1;
  o.limits.max_threads_per_instance = 2;
  o.limits.cooldown_windows = 0;
  o.controller.budget = budget;
  // Each call: the threads set and the instances active when they were set.
  std::vector<std::pair<int, int>> calls;
  o.set_threads = [&](int t) { calls.emplace_back(t, fx.sched->control_settings().active_instances); };
  std::vector<ControllerDecision> seen;
  o.controller.on_decision = [&](const ControllerDecision& d) { seen.push_back(d); };
  ControlLoop loop(*fx.sched, o);
  ASSERT_EQ(calls, (std::vector<std::pair<int, int>>{{2, 1}}));  // alone: both cores
  EXPECT_EQ(budget->held_by_others(nullptr), 2);
  EXPECT_EQ(loop.stats().threads_per_instance, 2);
  std::vector<std::future<InferResponse>> fs;
  for (uint64_t i = 0; i < 4; ++i) fs.push_back(submit(*fx.sched, i));
  for (auto& f : fs) EXPECT_TRUE(f.get().status.ok());
  (void)loop.step();
  // The second instance takes a core from the first one's threads, which drop first.
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].knob, "instances");
  EXPECT_EQ(seen[0].to, 2);
  EXPECT_EQ(seen[1].knob, "threads");
  EXPECT_EQ(seen[1].direction, "down");
  EXPECT_EQ(seen[1].to, 1);
  EXPECT_NE(seen[1].reason.find("1 threads per instance"), std::string::npos) << seen[1].reason;
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1], std::make_pair(1, 1));  // set while one instance was still active
  EXPECT_EQ(fx.sched->control_settings().active_instances, 2);
  EXPECT_EQ(budget->held_by_others(nullptr), 2);
  EXPECT_EQ((loop.stats().decisions.at({"threads", "down"})), 1u);
}

TEST(ControlLoop, ThreadsSpreadOverTheFairShareWhenModelsShareTheBudget) {
  auto budget = std::make_shared<CoreBudget>(4);
  Fixture a(policy(1, 0), 1, 1), b(policy(1, 0), 1, 1);
  ControlLoopOptions o;
  o.limits.latency_objective_us = 1000;
  o.limits.max_instances = 1;
  o.limits.threads_per_instance = 1;
  o.limits.max_threads_per_instance = 4;
  o.controller.budget = budget;
  int ta = 0, tb = 0;
  o.set_threads = [&](int t) { ta = t; };
  ControlLoop la(*a.sched, o);
  EXPECT_EQ(ta, 4);  // alone in the budget
  o.set_threads = [&](int t) { tb = t; };
  ControlLoop lb(*b.sched, o);
  EXPECT_EQ(tb, 1);  // the first model holds every core; b runs on its floor
  // The first model's next window gives back what the fair share does not grant it.
  (void)la.step();
  EXPECT_EQ(ta, 2);
  EXPECT_EQ(budget->held_by_others(nullptr), 3);
  // Then the second one grows into the freed cores (after its cooldown).
  for (int i = 0; i < 4 && tb != 2; ++i) (void)lb.step();
  EXPECT_EQ(tb, 2);
  EXPECT_EQ(budget->held_by_others(nullptr), 4);
  lb.stop();
  for (int i = 0; i < 8 && ta != 4; ++i) (void)la.step();  // a reversal waits longer
  EXPECT_EQ(ta, 4);                                        // alone again
}

TEST(ControlLoop, ReportedSettingsKeepTheDecisionCounts) {
  ControllerStats s;
  s.enabled = true;
  s.decisions[{"instances", "up"}] = 2;
  ControlSettings c;
  c.active_instances = 3;
  c.queue_delay_us = 500;
  c.preferred_batch = 4;
  c.threads_per_instance = 2;
  report_settings(c, &s);
  EXPECT_EQ(s.active_instances, 3);
  EXPECT_EQ(s.queue_delay_us, 500);
  EXPECT_EQ(s.preferred_batch, 4);
  EXPECT_EQ(s.threads_per_instance, 2);
  EXPECT_TRUE(s.enabled);
  EXPECT_EQ((s.decisions[{"instances", "up"}]), 2u);
}

TEST(CoreBudget, GrowsWithinCoresAndAlwaysGrantsTheFirstInstance) {
  CoreBudget b(4);
  int x = 0, y = 0;
  EXPECT_TRUE(b.try_hold(&x, 3, 1));
  EXPECT_FALSE(b.try_hold(&y, 2, 1));
  EXPECT_TRUE(b.try_hold(&y, 2, 2));  // its floor: over budget, still granted
  EXPECT_EQ(b.held_by_others(nullptr), 5);
  EXPECT_FALSE(b.try_hold(&x, 4, 1));
  EXPECT_TRUE(b.try_hold(&x, 1, 1));  // shrinking always succeeds
  b.release(&y);
  EXPECT_EQ(b.held_by_others(nullptr), 1);
  EXPECT_EQ(b.held_by_others(&x), 0);
}

TEST(CoreBudget, LendsCoresLeftIdleAndCountsUnreportedOwnersAsBusy) {
  CoreBudget b(2);
  int x = 0, y = 0;
  EXPECT_TRUE(b.try_hold(&x, 1, 1));
  EXPECT_TRUE(b.try_hold(&y, 1, 1));
  EXPECT_DOUBLE_EQ(b.idle_cores(), 0);  // nothing reported: what is held counts as busy
  b.report_busy(&x, 0.5);
  b.report_busy(&y, 3.0);  // counted at most as held
  EXPECT_DOUBLE_EQ(b.idle_cores(), 0.5);
  b.report_busy(&y, 0.25);
  EXPECT_DOUBLE_EQ(b.idle_cores(), 1.25);
  EXPECT_FALSE(b.try_hold(&x, 2, 1));             // past the cores, nothing lent
  EXPECT_TRUE(b.try_hold(&x, 2, 1, /*lent=*/1));  // on the idle core
  EXPECT_EQ(b.held_by_others(nullptr), 3);
  EXPECT_FALSE(b.try_hold(&x, 4, 1, 1));  // one core lent is one core
  b.release(&x);
  EXPECT_DOUBLE_EQ(b.idle_cores(), 1.75);  // y alone, 0.25 busy of its 1

  CoreBudget strict(2, /*lend_idle=*/false);
  EXPECT_TRUE(strict.try_hold(&x, 1, 1));
  EXPECT_TRUE(strict.try_hold(&y, 1, 1));
  strict.report_busy(&x, 0);
  strict.report_busy(&y, 0);
  EXPECT_DOUBLE_EQ(strict.idle_cores(), 0);
  EXPECT_FALSE(strict.try_hold(&x, 2, 1, 1));
}

}  // namespace
}  // namespace streamline::runtime
