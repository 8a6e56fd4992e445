// The search behind `streamline tune`, driven by scripted measurements: which configurations are
// tried, how trials rank under a budget, that successive halving finds the best configuration
// with fewer trials than the grid, the frontier, and that the config.pbtxt it writes reads back
// as the chosen settings.

#include "tools/tune_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "serve/model_config.h"

namespace streamline::tools {

// Readable failure messages.
void PrintTo(const TuneConfig& c, std::ostream* os) {
  *os << c.label();
}

namespace {

Trial ok_trial(const TuneConfig& c, double throughput, double p99) {
  Trial t;
  t.config = c;
  t.ok = true;
  t.throughput = throughput;
  t.p50_ms = p99 / 2;
  t.p99_ms = p99;
  t.requests = 100;
  return t;
}

TEST(TuneSpaceTest, ConfigurationsStayWithinTheCoresUnlessOversubscribing) {
  TuneSpace s;
  s.cores = 4;
  const auto configs = candidate_configs(s);
  ASSERT_FALSE(configs.empty());
  std::set<std::string> labels;
  for (const TuneConfig& c : configs) {
    EXPECT_LE(c.instances * c.threads, 4) << c.label();
    EXPECT_LE(c.streams, c.threads) << c.label();
    if (c.elastic) {
      EXPECT_GE(c.streams, 2) << c.label();
    }
    if (c.max_batch == 1) {
      EXPECT_EQ(c.queue_delay_us, 0) << c.label();
    }
    EXPECT_TRUE(labels.insert(c.label()).second) << "duplicate " << c.label();
  }
  // Every instance count of 1, 2 and 4 takes all the cores in one of its configurations.
  for (int i : {1, 2, 4})
    EXPECT_TRUE(std::any_of(configs.begin(), configs.end(), [&](const TuneConfig& c) {
      return c.instances == i && c.instances * c.threads == 4;
    })) << i;
  s.oversubscribe = true;
  int over = 0;
  for (const TuneConfig& c : candidate_configs(s)) {
    EXPECT_LE(c.instances * c.threads, 8) << c.label();
    over += c.instances * c.threads > 4;
  }
  EXPECT_GT(over, 0);
}

TEST(TuneSpaceTest, AModelThatCannotBatchIsTriedWithoutBatching) {
  TuneSpace s;
  s.cores = 2;
  s.batchable = false;
  for (const TuneConfig& c : candidate_configs(s)) EXPECT_EQ(c.max_batch, 1) << c.label();
  s.batchable = true;
  s.max_batch_sizes = {1, 8};
  s.queue_delays_us = {0, 1000};
  int batched = 0;
  for (const TuneConfig& c : candidate_configs(s)) batched += c.max_batch == 8;
  EXPECT_GT(batched, 0);
}

TEST(TuneSpaceTest, CudaConfigurationsTryEachPrecision) {
  TuneSpace s;
  s.cores = 2;
  s.devices = {"cpu", "cuda"};
  s.cuda_precisions = {"fp32", "fp16"};
  std::set<std::string> precisions;
  for (const TuneConfig& c : candidate_configs(s))
    if (c.device == "cuda") precisions.insert(c.precision);
  EXPECT_EQ(precisions, (std::set<std::string>{"fp16", "fp32"}));
}

TEST(TuneRankTest, TheBudgetComesBeforeThroughput) {
  TuneConfig a, b;
  b.instances = 2;
  Objective goal;
  goal.latency_budget_ms = 10;
  const Trial fast_but_late = ok_trial(a, 1000, 30), slower_in_time = ok_trial(b, 600, 8);
  EXPECT_TRUE(rank_before(slower_in_time, fast_but_late, goal));
  EXPECT_FALSE(rank_before(fast_but_late, slower_in_time, goal));
  goal.latency_budget_ms = 0;  // no budget: throughput decides
  EXPECT_TRUE(rank_before(fast_but_late, slower_in_time, goal));
  // A failed trial ranks last; a trial with rejections misses the objective.
  Trial failed;
  failed.config = a;
  EXPECT_TRUE(rank_before(slower_in_time, failed, goal));
  Trial rejecting = ok_trial(b, 2000, 1);
  rejecting.rejected = 3;
  EXPECT_FALSE(meets_objective(rejecting, goal));
  EXPECT_TRUE(rank_before(slower_in_time, rejecting, goal));
}

TEST(TuneRankTest, OpenLoopPicksTheLowestP99ThatKeepsUp) {
  TuneConfig a, b, c;
  b.instances = 2;
  c.max_batch = 4;
  Objective goal;
  goal.offered_rows_per_s = 100;
  const Trial behind = ok_trial(a, 60, 2), keeps_up = ok_trial(b, 99, 9), keeps_up_lower = ok_trial(c, 98, 5);
  const std::vector<Trial> trials = {behind, keeps_up, keeps_up_lower};
  ASSERT_NE(best_trial(trials, goal), nullptr);
  EXPECT_EQ(best_trial(trials, goal)->config, c);
}

TEST(TuneFrontierTest, DominatedTrialsAreLeftOut) {
  TuneConfig c[4];
  for (int i = 0; i < 4; ++i) c[i].instances = i + 1;
  const std::vector<Trial> trials = {ok_trial(c[0], 100, 5), ok_trial(c[1], 200, 9), ok_trial(c[2], 150, 12),
                                     ok_trial(c[3], 300, 20)};
  const std::vector<Trial> f = frontier(trials);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].config, c[0]);
  EXPECT_EQ(f[1].config, c[1]);
  EXPECT_EQ(f[2].config, c[3]);
}

// A made-up machine: throughput peaks at one configuration, p99 grows with batch and delay, and
// every measurement has a few percent of noise that shrinks with the window's length.
// The best configuration is 10% ahead of the next one; the noise of the first round's short
// windows (up to 4%) reorders the others.
struct ScriptedMachine {
  TuneConfig best;
  double best_throughput = 0;
  int measured = 0;
  double seconds = 0;
  static double base_throughput(const TuneConfig& c) {
    return 100.0 * c.instances * c.threads + 15.0 * std::log2(c.max_batch) - 5.0 * (c.streams - 1) -
           (c.elastic ? 3 : 0) + c.queue_delay_us / 200.0;
  }
  ScriptedMachine(const std::vector<TuneConfig>& configs, TuneConfig chosen) : best(std::move(chosen)) {
    for (const TuneConfig& c : configs)
      if (!(c == best)) best_throughput = std::max(best_throughput, 1.1 * base_throughput(c));
  }
  Trial measure(const TuneConfig& c, double s) {
    ++measured;
    seconds += s;
    const double tp = c == best ? best_throughput : base_throughput(c);
    const double noise = std::sin(measured * 12.9898) * 0.03 / std::sqrt(s);
    const double p99 = 5.0 + 2.0 * c.max_batch + c.queue_delay_us / 1000.0;
    return ok_trial(c, tp * (1 + noise), p99);
  }
};

TEST(HalvingSearchTest, FindsTheBestConfigurationWithFewerTrialsThanTheGrid) {
  TuneSpace s;
  s.cores = 4;
  const auto configs = candidate_configs(s);
  const int n = static_cast<int>(configs.size());
  ASSERT_GE(n, 20);
  ScriptedMachine machine(configs, configs[static_cast<size_t>(n / 2)]);
  Objective goal;
  HalvingSearch search(configs, 0.5, 3);
  std::vector<double> round_seconds;
  while (!search.done()) {
    round_seconds.push_back(search.round_seconds());
    std::vector<Trial> round;
    for (const TuneConfig& c : search.round_configs()) round.push_back(machine.measure(c, search.round_seconds()));
    search.report(round, goal);
  }
  const std::vector<Trial> latest = latest_trials(search.trials());
  const Trial* best = best_trial(latest, goal);
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->config, machine.best) << best->config.label();
  EXPECT_EQ(machine.measured, HalvingSearch::planned_trials(n, 3));
  EXPECT_EQ(static_cast<int>(round_seconds.size()), HalvingSearch::planned_rounds(n, 3));
  for (size_t r = 1; r < round_seconds.size(); ++r) EXPECT_DOUBLE_EQ(round_seconds[r], 3 * round_seconds[r - 1]);
  EXPECT_NEAR(machine.seconds, HalvingSearch::planned_seconds(n, 0.5, 3), 1e-9);
  // A grid measures every configuration for the final round's window.
  const double grid_seconds = n * round_seconds.back();
  EXPECT_LT(machine.seconds, grid_seconds / 4) << machine.seconds << " s against " << grid_seconds;
}

TEST(HalvingSearchTest, RoundsOfOneAndFailedTrials) {
  EXPECT_EQ(HalvingSearch::planned_rounds(1, 3), 1);
  EXPECT_EQ(HalvingSearch::planned_rounds(3, 3), 1);
  EXPECT_EQ(HalvingSearch::planned_rounds(4, 3), 2);
  EXPECT_EQ(HalvingSearch::planned_trials(35, 3), 35 + 12 + 4 + 2);
  HalvingSearch empty({}, 1.0, 3);
  EXPECT_TRUE(empty.done());
  // Failed trials never go on to the next round.
  TuneSpace s;
  s.cores = 2;
  const auto configs = candidate_configs(s);
  HalvingSearch search(configs, 1.0, 2);
  std::vector<Trial> round;
  for (size_t i = 0; i < configs.size(); ++i) {
    Trial t = i == 0 ? ok_trial(configs[i], 10, 1) : Trial{};
    t.config = configs[i];
    round.push_back(t);
  }
  search.report(round, Objective{});
  EXPECT_TRUE(search.done());  // one survivor: the answer already
  EXPECT_EQ(search.trials().size(), configs.size());
}

TEST(TunedConfigTest, ReadsBackAsTheChosenSettings) {
  TuneConfig c;
  c.instances = 2;
  c.threads = 3;
  c.streams = 2;
  c.elastic = true;
  c.max_batch = 8;
  c.queue_delay_us = 500;
  const std::string text = tuned_config_pbtxt("resnet", c, true, {"measured: 812 rows/s", "p99 9.1 ms"});
  EXPECT_EQ(text.rfind("# measured: 812 rows/s\n# p99 9.1 ms\n", 0), 0u) << text;
  auto parsed = serve::parse_model_config(text, "tune/config.pbtxt");
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string() << "\n" << text;
  EXPECT_EQ(parsed->name, "resnet");
  const ServingOptions so = serve::serving_options(*parsed);
  EXPECT_EQ(so.instances, 2);
  EXPECT_EQ(so.threads_per_instance, 3);
  EXPECT_EQ(so.batching.max_batch_size, 8);
  EXPECT_EQ(so.batching.max_queue_delay_us, 500);
  EXPECT_EQ(so.batching.preferred_batch_sizes, std::vector<int>{8});
  const ModelOptions mo = serve::model_options(*parsed);
  EXPECT_EQ(mo.num_streams, 2);
  EXPECT_TRUE(mo.elastic_threads);

  TuneConfig plain;
  const std::string unbatched = tuned_config_pbtxt("m", plain, false, {});
  auto p2 = serve::parse_model_config(unbatched, "m/config.pbtxt");
  ASSERT_TRUE(p2.ok()) << p2.status().to_string();
  EXPECT_EQ(serve::serving_options(*p2).batching.max_batch_size, 1);
  EXPECT_EQ(unbatched.find("dynamic_batching"), std::string::npos);
}

TEST(FrontierSvgTest, DrawsEveryTrialTheFrontierAndTheBudget) {
  TuneConfig c[3];
  for (int i = 0; i < 3; ++i) c[i].max_batch = 1 << i;
  c[2].queue_delay_us = 100;
  std::vector<Trial> trials = {ok_trial(c[0], 100, 5), ok_trial(c[1], 180, 9), ok_trial(c[2], 120, 15)};
  Objective goal;
  goal.latency_budget_ms = 12;
  const std::string svg = frontier_svg(trials, &trials[1], goal, "a <model> & load");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("a &lt;model&gt; &amp; load"), std::string::npos);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find("budget 12"), std::string::npos);
  size_t circles = 0;
  for (size_t at = svg.find("<circle"); at != std::string::npos; at = svg.find("<circle", at + 1)) ++circles;
  EXPECT_EQ(circles, 3u + 2u + 1u);  // every trial, the two frontier points, the chosen ring
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace streamline::tools
