// `streamline tune MODEL`: measures serving configurations of a model on this machine (instances,
// threads per instance, streams and elastic threads, max batch and queue delay, and device and
// precision where a GPU is visible) under a given load, with successive halving (or a full grid,
// for comparison), and writes what it found: the table of trials, the frontier of throughput
// against p99, an SVG of that frontier and a Triton-format config.pbtxt of the chosen settings.
//
//   streamline tune model.onnx --latency-budget-ms 20 --concurrency 8 --max-minutes 5
//   streamline tune model.onnx --request-rate 300 --out tuned/    # open loop: lowest p99 that keeps up

#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "cli_common.h"
#include "cli_flags.h"
#include "commands.h"
#include "core/cpu_set.h"
#include "preflight.h"
#include "progress.h"
#include "runtime/device.h"
#include "serving_load.h"
#include "streamline/serving.h"
#include "tune_search.h"

namespace streamline::tools {
namespace {

using Clock = std::chrono::steady_clock;

struct TuneFlags {
  std::string path;
  InputFlags in;
  double latency_budget_ms = 0;
  int concurrency = 0;  // 0 = not given (8)
  double request_rate = 0;
  double max_minutes = 10;
  double trial_seconds = 0;  // first round's window; 0 = from --max-minutes
  double warmup_seconds = 0.3;
  int eta = 3;
  std::string search = "halving";
  int cores = 0;  // 0 = the usable cores
  int max_instances = 8;
  std::vector<int> max_batch_sizes = {1, 4, 8};
  std::vector<int64_t> queue_delays_us = {0, 500, 2000};
  std::vector<int> streams = {1, 2};
  std::vector<std::string> devices;  // empty = cpu, and cuda when a GPU is visible
  bool oversubscribe = false;
  std::string out;   // "" = tune-<model stem>
  std::string name;  // "" = the model's file stem
  bool json = false;
};

constexpr int kDefaultConcurrency = 8;

std::string stem_of(const std::string& path) {
  std::string s = std::filesystem::path(path).stem().string();
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-') ch = '_';
  return s.empty() ? "model" : s;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

// Loaded models by the options a configuration changes; they share nothing but the file.
class ModelCache {
 public:
  ModelCache(std::string path) : path_(std::move(path)) {}
  Result<std::shared_ptr<Model>> get(const TuneConfig& c) {
    const std::string key = std::to_string(c.threads) + "/" + std::to_string(c.streams) + "/" + (c.elastic ? "e" : "") +
                            "/" + c.device + "/" + c.precision;
    if (auto it = models_.find(key); it != models_.end()) return it->second;
    ModelOptions mo;
    mo.num_threads = c.threads;
    mo.num_streams = c.streams;
    mo.elastic_threads = c.elastic;
    mo.device = c.device;
    auto p = runtime::parse_precision(c.precision);
    if (!p.ok()) return p.status();
    mo.precision = *p;
    auto m = Model::load(path_, mo);
    if (!m.ok()) return m.status();
    models_[key] = *m;
    return *m;
  }

 private:
  std::string path_;
  std::map<std::string, std::shared_ptr<Model>> models_;
};

struct TuneContext {
  const TuneFlags* f;
  ModelCache* models;
  const std::vector<Shape>* shapes;
  const std::vector<Tensor>* inputs;
  int64_t rows = 1;
  LoadSpec load;
};

Trial measure(TuneContext& ctx, const TuneConfig& c, double seconds) {
  Trial t;
  t.config = c;
  t.seconds = seconds;
  auto model = ctx.models->get(c);
  if (!model.ok()) {
    t.error = model.status().to_string();
    return t;
  }
  ServingOptions so;
  so.instances = c.instances;
  so.threads_per_instance = c.device == "cpu" ? c.threads : 1;
  so.batching.max_batch_size = c.max_batch;
  if (c.max_batch > 1) so.batching.preferred_batch_sizes = {c.max_batch};
  so.batching.max_queue_delay_us = c.queue_delay_us;
  auto served = ServingModel::create(*model, so);
  if (!served.ok()) {
    t.error = served.status().to_string();
    return t;
  }
  InferRequest proto;
  for (size_t i = 0; i < ctx.inputs->size(); ++i) proto.inputs[(*model)->inputs()[i].name] = (*ctx.inputs)[i];
  LoadSpec load = ctx.load;
  load.seconds = seconds;
  auto r = run_load(**served, proto, ctx.rows, load);
  if (!r.ok()) {
    t.error = r.status().to_string();
    return t;
  }
  t.ok = true;
  t.throughput = r->throughput;
  t.p50_ms = r->p50_ms;
  t.p99_ms = r->p99_ms;
  t.requests = r->requests;
  t.rejected = r->rejected;
  t.mean_batch = r->mean_batch;
  return t;
}

std::string trial_json(const Trial& t) {
  std::ostringstream o;
  o << "{\"config\": \"" << json_escape(t.config.label()) << "\", \"instances\": " << t.config.instances
    << ", \"threads\": " << t.config.threads << ", \"streams\": " << t.config.streams
    << ", \"elastic\": " << (t.config.elastic ? "true" : "false") << ", \"max_batch\": " << t.config.max_batch
    << ", \"queue_delay_us\": " << t.config.queue_delay_us << ", \"device\": \"" << t.config.device
    << "\", \"precision\": \"" << t.config.precision << "\", \"round\": " << t.round
    << ", \"seconds\": " << fmt(t.seconds) << ", \"ok\": " << (t.ok ? "true" : "false");
  if (t.ok)
    o << ", \"throughput\": " << fmt(t.throughput) << ", \"p50_ms\": " << fmt(t.p50_ms, 4)
      << ", \"p99_ms\": " << fmt(t.p99_ms, 4) << ", \"requests\": " << t.requests << ", \"rejected\": " << t.rejected
      << ", \"mean_batch\": " << fmt(t.mean_batch);
  else
    o << ", \"error\": \"" << json_escape(t.error) << "\"";
  return o.str() + "}";
}

struct Outcome {
  std::vector<Trial> trials;
  bool timed_out = false;
  double measured_s = 0;
  int candidates = 0;
};

Status write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream o(p);
  o << text;
  o.close();
  if (!o) return invalid_argument("cannot write " + p.string());
  return ok_status();
}

int tune(const TuneFlags& f) {
  if (f.concurrency > 0 && f.request_rate > 0) {
    std::cerr << "error: give --concurrency or --request-rate, not both" << std::endl;
    return kUsageError;
  }
  if (f.search != "halving" && f.search != "grid") {
    std::cerr << "error: --search: '" << f.search << "' is not one of halving, grid" << std::endl;
    return kUsageError;
  }
  const std::filesystem::path out_dir = f.out.empty() ? "tune-" + stem_of(f.path) : f.out;
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) {
    std::cerr << "error: --out: cannot create " << out_dir.string() << ": " << ec.message() << std::endl;
    return kUsageError;
  }
  const auto t0 = Clock::now();
  ModelFlags mf;
  mf.path = f.path;
  auto prepared = prepare(mf, f.in, true);
  if (!prepared.ok()) {
    std::cerr << "error: " << prepared.status().to_string() << std::endl;
    return kUsageError;
  }
  const Model& base = *prepared->model;
  bool batchable = !base.inputs().empty();
  for (const TensorDesc& d : base.inputs()) batchable = batchable && !d.dims.empty() && d.dims[0] < 0;

  TuneSpace space;
  space.cores = f.cores > 0 ? f.cores : core::usable_cores();
  space.oversubscribe = f.oversubscribe;
  space.max_instances = f.max_instances;
  space.streams = f.streams;
  space.batchable = batchable;
  space.max_batch_sizes = f.max_batch_sizes;
  space.queue_delays_us = f.queue_delays_us;
  space.devices = f.devices;
  if (space.devices.empty()) {
    space.devices = {"cpu"};
    if (runtime::cuda_device_count() > 0) space.devices.push_back("cuda");
  }
  for (const std::string& d : space.devices) {
    if (d != "cpu" && d != "cuda") {
      std::cerr << "error: --devices: '" << d << "' is not one of cpu, cuda" << std::endl;
      return kUsageError;
    }
  }
  const std::vector<TuneConfig> candidates = candidate_configs(space);
  const int n = static_cast<int>(candidates.size());
  const int rounds = HalvingSearch::planned_rounds(n, f.eta);
  const bool grid = f.search == "grid";
  const int planned = grid ? n : HalvingSearch::planned_trials(n, f.eta);
  // The first round's window: given, or what fits 80% of --max-minutes after each trial's warm-up
  // and start (about warm-up + 0.3 s), within [0.2, 5] s.
  double first = f.trial_seconds;
  if (first <= 0) {
    const double units = grid ? n * std::pow(f.eta, rounds - 1) : HalvingSearch::planned_seconds(n, 1.0, f.eta);
    const double spare = 0.8 * f.max_minutes * 60 - planned * (f.warmup_seconds + 0.3);
    first = std::clamp(spare / std::max(1.0, units), 0.2, 5.0);
  }

  TuneContext ctx;
  ctx.f = &f;
  ModelCache cache(f.path);
  ctx.models = &cache;
  ctx.shapes = &prepared->shapes;
  ctx.inputs = &prepared->inputs;
  ctx.rows = prepared->shapes.empty() || prepared->shapes[0].rank() == 0 ? 1 : prepared->shapes[0][0];
  ctx.load.concurrency = f.concurrency > 0 ? f.concurrency : kDefaultConcurrency;
  ctx.load.request_rate = f.request_rate;
  ctx.load.warmup_s = f.warmup_seconds;
  ctx.load.seed = f.in.seed;
  Objective goal;
  goal.latency_budget_ms = f.latency_budget_ms;
  goal.offered_rows_per_s = f.request_rate * static_cast<double>(ctx.rows);

  ProgressOptions po;
  po.title = "tune";
  po.unit = "trials";
  po.total = planned;
  po.enabled = !f.json;
  Progress progress(po);
  const auto deadline =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(f.max_minutes * 60));
  Outcome outcome;
  outcome.candidates = n;
  auto note = [&](int round, const TuneConfig& c) {
    const std::vector<Trial> latest = latest_trials(outcome.trials);
    const Trial* best = best_trial(latest, goal);
    std::string s =
        (grid ? "" : "round " + std::to_string(round + 1) + "/" + std::to_string(rounds) + ", ") + c.label();
    if (best && best->ok)
      s += " | best " + best->config.label() + ": " + fmt(best->throughput, 1) + "/s, p99 " + fmt(best->p99_ms) + " ms";
    progress.set_note(s);
  };
  auto run_one = [&](int round, const TuneConfig& c, double seconds) {
    note(round, c);
    Trial t = measure(ctx, c, seconds);
    t.round = round;
    outcome.measured_s += t.ok ? seconds : 0;
    progress.advance();
    return t;
  };
  if (grid) {
    const double seconds = first * std::pow(f.eta, rounds - 1);
    for (const TuneConfig& c : candidates) {
      if (Clock::now() >= deadline) {
        outcome.timed_out = true;
        break;
      }
      outcome.trials.push_back(run_one(0, c, seconds));
    }
  } else {
    HalvingSearch search(candidates, first, f.eta);
    while (!search.done() && !outcome.timed_out) {
      std::vector<Trial> round;
      for (const TuneConfig& c : search.round_configs()) {
        if (Clock::now() >= deadline) {
          outcome.timed_out = true;
          break;
        }
        round.push_back(run_one(search.round(), c, search.round_seconds()));
        outcome.trials.push_back(round.back());
      }
      if (!outcome.timed_out) search.report(round, goal);
    }
  }
  progress.finish();
  const double wall_s = std::chrono::duration<double>(Clock::now() - t0).count();

  const std::vector<Trial> latest = latest_trials(outcome.trials);
  const Trial* chosen = best_trial(latest, goal);
  if (!chosen || !chosen->ok) {
    std::cerr << "error: no configuration ran"
              << (chosen ? ": " + chosen->error : std::string(" (the time limit ended the search first)")) << std::endl;
    return 1;
  }
  const bool met = meets_objective(*chosen, goal);
  const std::vector<Trial> front = frontier(latest);
  const std::string load_text = f.request_rate > 0 ? "open loop at " + fmt(f.request_rate, 1) + " requests/s"
                                                   : "closed loop, concurrency " + std::to_string(ctx.load.concurrency);
  const std::string budget_text =
      goal.latency_budget_ms > 0 ? "p99 budget " + fmt(goal.latency_budget_ms) + " ms" : "no latency budget";
  std::vector<std::string> comment = {
      "Written by `streamline tune` on " + utc_now() + " for " + std::filesystem::path(f.path).filename().string() +
          ": " + load_text + ", " + std::to_string(ctx.rows) + " row(s) per request, " + budget_text + ".",
      "Chosen: " + chosen->config.label() + ": " + fmt(chosen->throughput, 1) + " rows/s, p50 " + fmt(chosen->p50_ms) +
          " ms, p99 " + fmt(chosen->p99_ms) + " ms over " + fmt(chosen->seconds, 2) + " s" +
          (met ? "" : " (it does NOT meet the objective: the closest found)") + ".",
      "Search: " + f.search + " over " + std::to_string(n) + " configurations on " + std::to_string(space.cores) +
          " cores, " + std::to_string(outcome.trials.size()) + " trials, " + fmt(wall_s, 1) + " s" +
          (outcome.timed_out ? " (stopped at --max-minutes)" : "") + "."};
  std::string front_line = "Frontier (rows/s at p99 ms):";
  for (const Trial& t : front) front_line += " " + fmt(t.throughput, 1) + "@" + fmt(t.p99_ms);
  comment.push_back(front_line);
  const std::string name = f.name.empty() ? stem_of(f.path) : f.name;
  std::ostringstream json;
  json << "{\"model\": \"" << json_escape(f.path) << "\", \"search\": \"" << f.search << "\", \"candidates\": " << n
       << ", \"cores\": " << space.cores << ", \"load\": \"" << json_escape(load_text)
       << "\", \"latency_budget_ms\": " << fmt(goal.latency_budget_ms) << ", \"first_seconds\": " << fmt(first)
       << ", \"wall_s\": " << fmt(wall_s) << ", \"measured_s\": " << fmt(outcome.measured_s)
       << ", \"timed_out\": " << (outcome.timed_out ? "true" : "false")
       << ", \"met_objective\": " << (met ? "true" : "false") << ", \"chosen\": " << trial_json(*chosen)
       << ", \"frontier\": [";
  for (size_t i = 0; i < front.size(); ++i) json << (i ? ", " : "") << trial_json(front[i]);
  json << "], \"trials\": [";
  for (size_t i = 0; i < outcome.trials.size(); ++i) json << (i ? ", " : "") << trial_json(outcome.trials[i]);
  json << "]}";
  const std::filesystem::path config_path = out_dir / "config.pbtxt", svg_path = out_dir / "frontier.svg",
                              json_path = out_dir / "trials.json";
  for (const auto& [p, text] : std::vector<std::pair<std::filesystem::path, std::string>>{
           {config_path, tuned_config_pbtxt(name, chosen->config, batchable, comment)},
           {svg_path, frontier_svg(latest, chosen, goal, name + ": " + load_text + ", " + budget_text)},
           {json_path, json.str() + "\n"}}) {
    if (Status s = write_file(p, text); !s.ok()) {
      std::cerr << "error: " << s.message() << std::endl;
      return 1;
    }
  }
  if (f.json) {
    std::cout << json.str() << std::endl;
    return met ? 0 : 1;
  }
  std::cout << "model: " << f.path << "\nload: " << load_text << ", " << ctx.rows << " row(s) per request; "
            << budget_text << "\nsearch: " << f.search << " over " << n << " configurations on " << space.cores
            << " cores; first window " << fmt(first, 2) << " s\n\n";
  std::vector<std::vector<std::string>> rows = {
      {"round", "configuration", "seconds", "rows/s", "p50 ms", "p99 ms", "rejected", "mean batch", "objective"}};
  for (const Trial& t : outcome.trials) {
    if (!t.ok) {
      rows.push_back({std::to_string(t.round + 1), t.config.label(), fmt(t.seconds, 2), "-", "-", "-", "-", "-",
                      "failed: " + t.error.substr(0, 60)});
      continue;
    }
    rows.push_back({std::to_string(t.round + 1), t.config.label(), fmt(t.seconds, 2), fmt(t.throughput, 1),
                    fmt(t.p50_ms), fmt(t.p99_ms), std::to_string(t.rejected), fmt(t.mean_batch, 2),
                    meets_objective(t, goal) ? "met" : "missed"});
  }
  print_table(rows);
  std::cout << "\nfrontier (throughput against p99, each configuration's last trial):\n";
  std::vector<std::vector<std::string>> frows = {{"configuration", "rows/s", "p99 ms"}};
  for (const Trial& t : front) frows.push_back({t.config.label(), fmt(t.throughput, 1), fmt(t.p99_ms)});
  print_table(frows);
  std::cout << "\nchosen: " << chosen->config.label() << ": " << fmt(chosen->throughput, 1) << " rows/s, p99 "
            << fmt(chosen->p99_ms) << " ms" << (met ? "" : " (no configuration met the objective; this is the closest)")
            << "\n"
            << outcome.trials.size() << " trials in " << fmt(wall_s, 1) << " s (" << fmt(outcome.measured_s, 1)
            << " s measured)" << (outcome.timed_out ? ", stopped at --max-minutes" : "") << "\nwrote "
            << config_path.string() << ", " << svg_path.string() << ", " << json_path.string() << "\n";
  return met ? 0 : 1;
}

}  // namespace

Runner add_tune_command(CLI::App& app) {
  auto f = std::make_shared<TuneFlags>();
  CLI::App* c =
      app.add_subcommand("tune", "Measure serving configurations on this machine and write the best as a config.pbtxt");
  c->add_option("model", f->path, "ONNX model file")->required();
  add_input_flags(c, f->in, true);
  c->add_option("--latency-budget-ms", f->latency_budget_ms, "p99 latency the chosen configuration must stay within")
      ->check(number_range(0, kMaxSeconds * 1000, false, "milliseconds; 0: none"));
  c->add_option("--concurrency", f->concurrency, "Closed loop: concurrent clients (default 8)")
      ->check(int_range(1, kMaxCount));
  c->add_option("--request-rate", f->request_rate, "Open loop: Poisson arrivals at R requests/s")
      ->check(number_range(0, kMaxRate, true, "requests per second"));
  c->add_option("--max-minutes", f->max_minutes, "Time limit of the whole search")
      ->check(number_range(0, kMaxSeconds / 60, true, "minutes"));
  c->add_option("--trial-seconds", f->trial_seconds, "First round's measured window (default: from --max-minutes)")
      ->check(seconds_range(true));
  c->add_option("--warmup", f->warmup_seconds, "Warm-up of each trial in seconds")->check(seconds_range(true));
  c->add_option("--eta", f->eta, "Halving: keep the best 1/eta of each round, eta times longer")
      ->check(int_range(2, 16));
  c->add_option("--search", f->search, "halving (default) or grid (every configuration, final round's window)");
  c->add_option("--cores", f->cores, "Cores the configurations share (default: the usable cores)")
      ->check(int_range(0, kMaxThreads, "0: the usable cores"));
  c->add_option("--max-instances", f->max_instances, "Largest instance count tried")->check(int_range(1, 64));
  c->add_option("--max-batch-sizes", f->max_batch_sizes, "Max batch sizes tried (1: no batching)")
      ->delimiter(',')
      ->check(int_range(1, kMaxBatch));
  c->add_option("--queue-delays-us", f->queue_delays_us, "Queue delays tried with batching")
      ->delimiter(',')
      ->check(int_range(0, kMaxMicros, "microseconds"));
  c->add_option("--streams", f->streams, "Streams per instance tried")->delimiter(',')->check(int_range(1, 64));
  c->add_option("--devices", f->devices, "cpu and/or cuda (default: cpu, and cuda when a GPU is visible)")
      ->delimiter(',');
  c->add_flag("--oversubscribe", f->oversubscribe, "Also try configurations using up to twice the cores");
  c->add_option("--out", f->out, "Folder for config.pbtxt, frontier.svg and trials.json (default tune-<model>)");
  c->add_option("--name", f->name, "Model name in config.pbtxt (default: the file's stem)");
  c->add_flag("--json", f->json, "Print one JSON object instead of the tables");
  return [f] { return tune(*f); };
}

}  // namespace streamline::tools
