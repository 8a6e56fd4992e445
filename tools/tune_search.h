#pragma once
// The search behind `streamline tune`: the serving configurations worth trying on a machine, how
// measured trials rank under a latency budget, successive halving over them, the frontier of
// throughput against p99, and what the command writes (an SVG of the frontier and a
// Triton-format config.pbtxt). Pure functions and one small state machine, so tests drive them
// with scripted measurements instead of real load.
//
//   TuneSpace space;  space.cores = 2;  space.max_batch_sizes = {1, 4, 8};
//   Objective goal;   goal.latency_budget_ms = 20;
//   HalvingSearch search(candidate_configs(space), /*first_seconds=*/1.0, /*eta=*/3);
//   while (!search.done()) {
//     std::vector<Trial> round;
//     for (const TuneConfig& c : search.round_configs()) round.push_back(measure(c, search.round_seconds()));
//     search.report(round, goal);
//   }
//   const std::vector<Trial> latest = latest_trials(search.trials());
//   const Trial* best = best_trial(latest, goal);
//
// Successive halving: every candidate is measured for first_seconds, the best 1/eta of them (by
// rank_before) go on to a round eta times as long, until one is left. With n candidates that costs
// about n * first_seconds * rounds, against n * first_seconds * eta^(rounds-1) for a grid at the
// final round's length.

#include <cstdint>
#include <string>
#include <vector>

namespace streamline::tools {

// One serving configuration: what ServingOptions and ModelOptions get.
struct TuneConfig {
  int instances = 1;
  int threads = 1;       // intra-op threads per instance
  int streams = 1;       // streams per instance (its threads are shared among them)
  bool elastic = false;  // elastic threads across the streams (streams > 1 only)
  int max_batch = 1;     // 1 = no dynamic batching
  int64_t queue_delay_us = 0;
  std::string device = "cpu";  // "cpu" or "cuda"
  std::string precision = "fp32";

  // "2x1 s1 b8 d500us" (+ " elastic", + " cuda fp16").
  std::string label() const;
  bool operator==(const TuneConfig&) const = default;
};

// What to try. Threads per instance take every instance count's share of the cores and half of
// it; instance counts are 1, 2, 4, ... up to max_instances and the core count.
struct TuneSpace {
  // Cores the configurations may use together (instances x threads); at least 1.
  int cores = 1;
  // Also try configurations that use up to twice the cores.
  bool oversubscribe = false;
  // Largest instance count tried on the CPU.
  int max_instances = 8;
  // Streams per instance to try (each at most the instance's threads).
  std::vector<int> streams = {1, 2};
  // Whether requests of the model can be merged into batches (its first dimension is free).
  bool batchable = true;
  // Largest batch sizes to try (1 = no batching); used when batchable.
  std::vector<int> max_batch_sizes = {1, 4, 8};
  // Queue delays to try with batching (max_batch > 1).
  std::vector<int64_t> queue_delays_us = {0, 500, 2000};
  // Devices: "cpu", "cuda". CUDA configurations run 1 or 2 instances of one host thread each.
  std::vector<std::string> devices = {"cpu"};
  // Precisions tried on CUDA ("fp32", "tf32", "fp16"); the CPU runs fp32.
  std::vector<std::string> cuda_precisions = {"fp32", "fp16"};
};

// Every configuration of the space, in a stable order, without duplicates.
std::vector<TuneConfig> candidate_configs(const TuneSpace& space);

// What a trial is judged by.
struct Objective {
  // p99 latency a configuration must stay within; <= 0: no budget.
  double latency_budget_ms = 0;
  // Open loop at this rate (requests/s): configurations are judged by p99 among those that keep
  // up (throughput at least 95% of the offered rows/s). 0: closed loop, judged by throughput.
  double offered_rows_per_s = 0;
};

// One measurement of one configuration.
struct Trial {
  TuneConfig config;
  int round = 0;          // 0-based
  double seconds = 0;     // length of the measured window asked for
  bool ok = false;        // it ran (false: it could not be built or answered nothing)
  std::string error;      // why not, when !ok
  double throughput = 0;  // rows per second
  double p50_ms = 0, p99_ms = 0;
  uint64_t requests = 0, rejected = 0;
  double mean_batch = 0;
};

// ok, nothing rejected, and p99 within the budget (and keeping up with an open-loop rate).
bool meets_objective(const Trial& t, const Objective& goal);
// Whether `a` ranks before `b`: ok first, then meeting the objective, then the objective's measure
// (throughput, or p99 for open loop), then fewer cores, then the label (a total order).
bool rank_before(const Trial& a, const Trial& b, const Objective& goal);
// The best trial by rank_before; null when `trials` is empty.
const Trial* best_trial(const std::vector<Trial>& trials, const Objective& goal);
// The answer points into its argument: a temporary would leave it dangling.
const Trial* best_trial(std::vector<Trial>&& trials, const Objective& goal) = delete;
// Each configuration's last (longest) trial, in first-seen order.
std::vector<Trial> latest_trials(const std::vector<Trial>& trials);
// The trials no other one beats on both throughput (higher) and p99 (lower), by throughput.
std::vector<Trial> frontier(const std::vector<Trial>& trials);

class HalvingSearch {
 public:
  // eta >= 2; first_seconds > 0. An empty candidate list is done at once.
  HalvingSearch(std::vector<TuneConfig> candidates, double first_seconds, int eta = 3);

  bool done() const { return current_.empty(); }
  int round() const { return round_; }
  // What to measure in this round, and for how long.
  const std::vector<TuneConfig>& round_configs() const { return current_; }
  double round_seconds() const;
  // The round's trials (any order; a configuration missing from them is dropped). The best
  // ceil(n / eta) go on; the search is done when the round had one configuration.
  void report(const std::vector<Trial>& trials, const Objective& goal);
  // Every trial reported so far.
  const std::vector<Trial>& trials() const { return trials_; }

  // Trials and measured seconds the search takes for n candidates (for progress and budgets).
  static int planned_trials(int n, int eta);
  static double planned_seconds(int n, double first_seconds, int eta);
  // Rounds it takes; a grid search measures every candidate for first_seconds * eta^(rounds-1).
  static int planned_rounds(int n, int eta);

 private:
  std::vector<TuneConfig> current_;
  double first_seconds_;
  int eta_;
  int round_ = 0;
  std::vector<Trial> trials_;
};

// An SVG scatter plot of the trials (p99 ms across, throughput up), the frontier drawn as a line,
// the budget as a dashed line and `chosen` ringed. `title` goes on top.
std::string frontier_svg(const std::vector<Trial>& trials, const Trial* chosen, const Objective& goal,
                         const std::string& title);

// A config.pbtxt for the chosen configuration that both Triton's parser and streamline serve read:
// name, platform onnxruntime_onnx, max_batch_size (batchable models), instance_group, dynamic
// batching when max_batch > 1, and streamline's parameters (threads, streams, elastic_threads,
// precision). `comment_lines` go on top, each as a "# " line.
std::string tuned_config_pbtxt(const std::string& name, const TuneConfig& c, bool batchable,
                               const std::vector<std::string>& comment_lines);

}  // namespace streamline::tools
