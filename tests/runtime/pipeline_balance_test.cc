// The pipeline rebalancer's decision with scripted windows: convergence of an unequal start,
// no flapping under a steady load, the load and measurement gates, serial stages, the budget,
// confirmation and cooldown.

#include "runtime/pipeline_balance.h"

#include <gtest/gtest.h>

#include <cmath>

#include "streamline/pipeline.h"

namespace streamline::runtime {
namespace {

constexpr int64_t kWindowUs = 1'000'000;

struct Sim {
  std::vector<std::string> names;
  std::vector<double> cost_ms;  // per item, per worker
  std::vector<int> workers;
  std::vector<int> max_workers;  // empty = the budget for every stage
  int budget = 0;
};

// One window of a pipeline under a load it cannot keep up with: every stage finishes the
// bottleneck's rate, each is busy that rate x its cost, and requests wait for the bottleneck.
BalanceWindow steady_window(const Sim& sim, double noise = 0) {
  const size_t n = sim.cost_ms.size();
  double rate = 1e300;
  for (size_t i = 0; i < n; ++i) rate = std::min(rate, sim.workers[i] * 1000.0 / sim.cost_ms[i]);
  BalanceWindow w;
  w.length_us = kWindowUs;
  for (size_t i = 0; i < n; ++i) {
    StageWindow s;
    s.name = sim.names[i];
    s.workers = sim.workers[i];
    s.max_workers = sim.max_workers.empty() ? sim.budget : sim.max_workers[i];
    s.done = static_cast<uint64_t>(rate);
    // Alternate stages run a little slow or fast: measurement noise.
    const double jitter = 1 + ((i % 2) ? noise : -noise);
    s.busy_us = static_cast<int64_t>(static_cast<double>(s.done) * sim.cost_ms[i] * 1000 * jitter);
    const bool bottleneck = std::abs(sim.workers[i] * 1000.0 / sim.cost_ms[i] - rate) < 1e-9;
    s.queue_depth_mean = bottleneck ? 6 : 0.2;
    s.queue_depth_max = bottleneck ? 16 : 2;
    w.stages.push_back(s);
  }
  return w;
}

BalanceLimits limits_for(const Sim& sim) {
  BalanceLimits l;
  l.worker_budget = sim.budget;
  return l;
}

TEST(PipelineBalance, UnequalStartConvergesWithinFifteenPercent) {
  Sim sim{{"decode", "pre", "post"}, {10, 30, 20}, {4, 1, 1}, {}, 6};
  BalanceState state;
  int moves = 0;
  for (int i = 0; i < 40; ++i) {
    const BalanceDecision d = balance_step(steady_window(sim), limits_for(sim), &state);
    if (d.move) {
      ++moves;
      EXPECT_NE(d.move->from, -1);  // the budget is all in use: every gain has a donor
      EXPECT_FALSE(d.move->reason.empty());
    }
    int total = 0;
    for (int v : d.workers) total += v;
    EXPECT_EQ(total, 6);
    sim.workers = d.workers;
  }
  EXPECT_EQ(sim.workers, (std::vector<int>{1, 3, 2}));
  EXPECT_EQ(moves, 3);
  const BalanceDecision last = balance_step(steady_window(sim), limits_for(sim), &state);
  EXPECT_LT(last.imbalance, 0.15);
  EXPECT_FALSE(last.move);
}

TEST(PipelineBalance, SteadyNoisyLoadDoesNotFlap) {
  // Balanced already (100/s each); 8% measurement noise either way must not move anything.
  Sim sim{{"a", "b", "c"}, {10, 30, 20}, {1, 3, 2}, {}, 6};
  BalanceState state;
  for (int i = 0; i < 50; ++i) {
    const BalanceDecision d = balance_step(steady_window(sim, (i % 2) ? 0.08 : -0.08), limits_for(sim), &state);
    ASSERT_FALSE(d.move) << "window " << i << ": " << d.move->reason;
  }
}

TEST(PipelineBalance, MoveNeedsConfirmationAndThenCoolsDown) {
  Sim sim{{"a", "b"}, {10, 40}, {3, 1}, {}, 4};
  BalanceState state;
  BalanceDecision d = balance_step(steady_window(sim), limits_for(sim), &state);
  EXPECT_FALSE(d.move);
  EXPECT_NE(d.hold.find("window 1 of 2"), std::string::npos) << d.hold;
  d = balance_step(steady_window(sim), limits_for(sim), &state);
  ASSERT_TRUE(d.move);
  EXPECT_EQ(d.move->from, 0);
  EXPECT_EQ(d.move->to, 1);
  EXPECT_EQ(d.workers, (std::vector<int>{2, 2}));
  EXPECT_NE(d.move->reason.find("'b' is the bottleneck"), std::string::npos) << d.move->reason;
  EXPECT_NE(d.move->reason.find("from 'a'"), std::string::npos) << d.move->reason;
  sim.workers = d.workers;  // a 100/s, b 50/s: b still the bottleneck, a could give one more
  d = balance_step(steady_window(sim), limits_for(sim), &state);
  EXPECT_FALSE(d.move);
  EXPECT_NE(d.hold.find("cooling down"), std::string::npos) << d.hold;
}

TEST(PipelineBalance, OneNoisyWindowMovesNothing) {
  // A window that makes 'b' look slow, between balanced ones: the candidate resets.
  Sim sim{{"a", "b"}, {10, 20}, {2, 4}, {}, 6};
  BalanceState state;
  Sim slow = sim;
  slow.cost_ms = {10, 60};
  for (int i = 0; i < 10; ++i) {
    const BalanceDecision d = balance_step(steady_window(i % 2 ? slow : sim), limits_for(sim), &state);
    EXPECT_FALSE(d.move) << "window " << i;
  }
}

TEST(PipelineBalance, LightLoadAndThinWindowsHold) {
  Sim sim{{"a", "b"}, {10, 40}, {3, 1}, {}, 4};
  BalanceWindow w = steady_window(sim);
  for (auto& s : w.stages) {  // half the bottleneck's rate offered: nothing waits
    s.done /= 2;
    s.busy_us /= 2;
    s.queue_depth_mean = 0;
  }
  BalanceState state;
  for (int i = 0; i < 5; ++i) {
    const BalanceDecision d = balance_step(w, limits_for(sim), &state);
    EXPECT_FALSE(d.move);
    EXPECT_NE(d.hold.find("not loaded"), std::string::npos) << d.hold;
    EXPECT_EQ(d.bottleneck, 1);
  }
  BalanceWindow thin = steady_window(sim);
  thin.stages[0].done = 3;
  const BalanceDecision d = balance_step(thin, limits_for(sim), &state);
  EXPECT_FALSE(d.move);
  EXPECT_EQ(d.bottleneck, -1);
  EXPECT_NE(d.hold.find("'a' finished 3 items"), std::string::npos) << d.hold;
}

TEST(PipelineBalance, SerialBottleneckKeepsOneWorker) {
  Sim sim{{"a", "serial"}, {10, 40}, {3, 1}, {3, 1}, 4};
  BalanceState state;
  for (int i = 0; i < 5; ++i) {
    const BalanceDecision d = balance_step(steady_window(sim), limits_for(sim), &state);
    EXPECT_FALSE(d.move);
    EXPECT_NE(d.hold.find("may not take more workers"), std::string::npos) << d.hold;
  }
}

TEST(PipelineBalance, UnusedBudgetGrowsTheBottleneck) {
  Sim sim{{"a", "b"}, {10, 40}, {1, 1}, {}, 5};
  BalanceState state;
  int from_budget = 0;
  for (int i = 0; i < 30; ++i) {
    const BalanceDecision d = balance_step(steady_window(sim), limits_for(sim), &state);
    if (d.move && d.move->from == -1) {
      ++from_budget;
      EXPECT_NE(d.move->reason.find("unused budget"), std::string::npos) << d.move->reason;
    }
    sim.workers = d.workers;
  }
  EXPECT_EQ(from_budget, 3);  // 1 + 1 -> 5 workers
  EXPECT_EQ(sim.workers, (std::vector<int>{1, 4}));
}

TEST(PipelineBalance, DonorKeepsItsMinimumAndTheMargin) {
  // b is the bottleneck (50/s); a has 2 workers (200/s) but a minimum of 2: no donor.
  BalanceWindow w = steady_window(Sim{{"a", "b"}, {10, 20}, {2, 1}, {}, 3});
  w.stages[0].min_workers = 2;
  BalanceLimits lim;
  lim.worker_budget = 3;
  BalanceState state;
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(balance_step(w, lim, &state).move);
  // a 2 x 10 ms (200/s) against b 1 x 6 ms (167/s): a with one worker (100/s) is worse than b now.
  Sim close{{"a", "b"}, {10, 6}, {2, 1}, {}, 3};
  BalanceState s2;
  for (int i = 0; i < 4; ++i) {
    const BalanceDecision d = balance_step(steady_window(close), limits_for(close), &s2);
    EXPECT_FALSE(d.move);
    EXPECT_NE(d.hold.find("would drop to 100.0/s"), std::string::npos) << d.hold;
  }
}

TEST(PipelineBalance, LimitsComeFromTheRebalanceOptions) {
  RebalanceOptions ro;
  ro.margin = 0.25;
  ro.min_items = 3;
  ro.confirm_windows = 4;
  ro.cooldown_windows = 5;
  const BalanceLimits lim = balance_limits(ro, 7);
  EXPECT_EQ(lim.worker_budget, 7);
  EXPECT_EQ(lim.margin, 0.25);
  EXPECT_EQ(lim.min_done, 3u);
  EXPECT_EQ(lim.confirm_windows, 4);
  EXPECT_EQ(lim.cooldown_windows, 5);
  // The defaults of both agree: options left alone decide as the decision's own defaults do.
  const BalanceLimits defaults = balance_limits(RebalanceOptions{}, 1);
  const BalanceLimits plain;
  EXPECT_EQ(defaults.margin, plain.margin);
  EXPECT_EQ(defaults.min_done, plain.min_done);
  EXPECT_EQ(defaults.confirm_windows, plain.confirm_windows);
  EXPECT_EQ(defaults.cooldown_windows, plain.cooldown_windows);
}

}  // namespace
}  // namespace streamline::runtime
