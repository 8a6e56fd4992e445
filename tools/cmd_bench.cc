// `streamline bench`: repeated inference; latency percentiles and throughput.
//
// Two paths. Direct (default): each of --concurrency clients owns a Session and runs it in a
// closed loop. Serving (any of --instances, --max-batch, --max-queue-delay-us, --request-rate):
// requests go through a ServingModel (instances sharing the weights, dynamic batching), from
// --concurrency closed-loop clients or, with --request-rate R, from an open-loop generator with
// Poisson arrivals at R requests/s. Both report latency percentiles over requests, throughput,
// the batch-size histogram and the requests rejected.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <limits>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "cli_common.h"
#include "cli_flags.h"
#include "commands.h"
#include "core/cpu_set.h"
#include "exec/trace.h"
#include "ops/kernel.h"
#include "plan/execution_plan.h"
#include "preflight.h"
#include "progress.h"
#include "runtime/device.h"
#include "runtime/instance_pool.h"
#include "serving_load.h"
#include "streamline/serving.h"

namespace streamline::tools {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchFlags {
  ModelFlags model;
  InputFlags in;
  std::string trace;
  double seconds = 10;
  double warmup = 2;
  int max_runs = 0;
  bool json = false;
  int concurrency = 1;
  bool fixed_threads = false;  // every run on --threads' count, never one thread by measurement
  // Serving path; unset values keep the direct path.
  int instances = 0;  // 0 = not given
  int max_batch = 0;  // 0 = not given
  int64_t max_queue_delay_us = -1;
  double request_rate = 0;       // requests/s, Poisson arrivals; 0 = closed loop
  int threads_per_instance = 0;  // 0 = --threads / instances
  int max_queue_size = 0;
  int64_t timeout_us = 0;

  bool serving() const { return instances > 0 || max_batch > 0 || max_queue_delay_us >= 0 || request_rate > 0; }
};

int bench_serving(const BenchFlags& f, std::shared_ptr<Model> model, const std::vector<Shape>& shapes,
                  const std::vector<Tensor>& inputs);

Clock::duration seconds_to_duration(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// The progress line of a bench run: measured runs (out of --max-runs when given: per client on
// the direct path, in all when serving), the phase, and the time left until the window closes.
ProgressOptions bench_progress(const BenchFlags& f) {
  ProgressOptions po;
  po.title = "bench";
  po.unit = f.serving() ? "requests" : "runs";
  po.total = static_cast<int64_t>(f.max_runs) * (f.serving() ? 1 : std::max(1, f.concurrency));
  po.enabled = !f.json;
  po.note = "warm-up";
  return po;
}

int bench(const BenchFlags& f) {
  if (!f.trace.empty()) {
    if (Status s = check_output_file("--trace", f.trace); !s.ok()) {
      std::cerr << "error: " << s.to_string() << std::endl;
      return kUsageError;
    }
  }
  auto prepared = prepare(f.model, f.in, true);
  if (!prepared.ok()) {
    std::cerr << "error: " << prepared.status().to_string() << std::endl;
    return 2;
  }
  auto* model = &prepared->model;
  auto* shapes = &prepared->shapes;
  auto* inputs = &prepared->inputs;
  if (f.serving()) return bench_serving(f, *model, *shapes, *inputs);
  // A shape set whose shapes depend on values computed in the run (If, Loop) has no plan: it runs
  // node by node, and the figures say so.
  auto mode = (*model)->execution_mode(*shapes);
  if (!mode.ok()) {
    std::cerr << "error: " << mode.status().to_string() << std::endl;
    return 2;
  }
  std::shared_ptr<const plan::ExecutionPlan> plan;
  if (*mode == ExecutionMode::kPlanned) {
    auto p = (*model)->plan_for(*shapes);
    if (!p.ok()) {
      std::cerr << "error: " << p.status().to_string() << std::endl;
      return 2;
    }
    plan = *p;
  } else if (!f.json) {
    std::cerr << "note: no plan for these shapes (" << (*model)->eager_reason(*shapes) << "); running node by node\n";
  }
  // Each of `concurrency` clients owns a Session (its own arena and streams) on its own thread,
  // all sharing the model; closed loop: a client sends its next request when the last returns.
  const int clients = std::max(1, f.concurrency);
  exec::TraceRecorder trace(20000);
  using clock = Clock;
  Progress progress(bench_progress(f));
  std::vector<std::vector<double>> per_client(static_cast<size_t>(clients));
  std::atomic<bool> failed{false};
  std::mutex err_mu;
  std::string first_error;
  auto client = [&](int c, clock::time_point start_at, clock::time_point stop_at) {
    Session session(*model);
    RunOptions ro;
    ro.adapt_threads = !f.fixed_threads;
    auto run = [&]() -> bool {
      auto r = session.run(*inputs, ro);
      if (!r.ok()) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (first_error.empty()) first_error = r.status().to_string();
        failed = true;
      }
      return r.ok();
    };
    do {  // warm-up: at least one run
      if (!run()) return;
    } while (clock::now() < start_at);
    if (!f.trace.empty() && c == 0) ro.observer = &trace;  // client 0's measured runs
    if (c == 0) progress.set_note("measuring");
    auto& lat = per_client[static_cast<size_t>(c)];
    for (;;) {
      const auto a = clock::now();
      if (!run()) return;
      const auto b = clock::now();
      lat.push_back(std::chrono::duration<double, std::milli>(b - a).count());
      progress.advance();
      if ((b >= stop_at && lat.size() >= 3) || (f.max_runs > 0 && static_cast<int>(lat.size()) >= f.max_runs) || failed)
        return;
    }
  };
  const auto t_start = clock::now() + seconds_to_duration(f.warmup);
  const auto t_stop = t_start + seconds_to_duration(f.seconds);
  progress.set_expected_end(t_stop);
  std::vector<std::thread> workers;
  for (int c = 1; c < clients; ++c) workers.emplace_back(client, c, t_start, t_stop);
  client(0, t_start, t_stop);
  for (auto& t : workers) t.join();
  progress.finish();
  if (failed) {
    std::cerr << "error: " << first_error << std::endl;
    return 1;
  }
  const double elapsed = std::max(1e-9, std::chrono::duration<double>(clock::now() - t_start).count());
  std::vector<double> lat_ms;
  for (const auto& v : per_client) lat_ms.insert(lat_ms.end(), v.begin(), v.end());
  const int64_t batch = (*shapes).empty() || (*shapes)[0].rank() == 0 ? 1 : (*shapes)[0][0];
  const double throughput = static_cast<double>(lat_ms.size()) * static_cast<double>(batch) / elapsed;
  const double p50 = percentile(lat_ms, 50), p90 = percentile(lat_ms, 90), p99 = percentile(lat_ms, 99);
  double mean = 0;
  for (double x : lat_ms) mean += x;
  mean /= static_cast<double>(lat_ms.size());
  if (!f.trace.empty()) {
    const Status s = trace.write(f.trace);
    if (!s.ok()) {
      std::cerr << "error: " << s.to_string() << std::endl;
      return 1;
    }
  }
  const int threads = (*model)->threads_per_stream();
  const int streams = plan ? plan->num_streams : 1;
  const int64_t arena_bytes = plan ? static_cast<int64_t>(plan->arena_bytes) : 0;
  const size_t steps = plan ? plan->steps.size() : 0;
  std::string shape_str;
  for (size_t i = 0; i < shapes->size(); ++i)
    shape_str += (i ? " " : "") + (*model)->inputs()[i].name + "=" + (*shapes)[i].to_string();
  if (f.json) {
    std::ostringstream o;
    o << "{\"model\": \"" << json_escape(f.model.path) << "\", \"device\": \"" << (*model)->device().to_string()
      << "\", \"precision\": \"" << ops::precision_name((*model)->options().precision)
      << "\", \"threads\": " << threads * streams << ", \"streams\": " << streams
      << ", \"threads_per_stream\": " << threads << ", \"concurrency\": " << clients << ", \"batch\": " << batch
      << ", \"shapes\": \"" << json_escape(shape_str) << "\", \"runs\": " << lat_ms.size()
      << ", \"seconds\": " << fmt(elapsed) << ", \"throughput\": " << fmt(throughput)
      << ", \"latency_ms\": {\"p50\": " << fmt(p50, 4) << ", \"p90\": " << fmt(p90, 4) << ", \"p99\": " << fmt(p99, 4)
      << ", \"mean\": " << fmt(mean, 4) << ", \"min\": " << fmt(percentile(lat_ms, 0), 4) << "}"
      << ", \"batch_size_hist\": " << batch_hist_json({{static_cast<int>(batch), lat_ms.size()}}) << ", \"rejected\": 0"
      << ", \"mode\": \"" << execution_mode_name(*mode) << "\", \"arena_bytes\": " << arena_bytes
      << ", \"steps\": " << steps << "}";
    std::cout << o.str() << std::endl;
    return 0;
  }
  std::cout << "model: " << f.model.path << "\ndevice: " << (*model)->device().to_string() << " ("
            << ops::precision_name((*model)->options().precision) << ")\ninputs: " << shape_str
            << "\nstreams: " << streams << " x " << threads << " threads, concurrency: " << clients << ", "
            << execution_mode_name(*mode) << ", steps: " << steps
            << ", arena: " << fmt(static_cast<double>(arena_bytes) / 1048576.0, 1) << " MiB\n\n";
  print_table({{"runs", "rejected", "p50 ms", "p90 ms", "p99 ms", "mean ms", "throughput/s"},
               {std::to_string(lat_ms.size()), "0", fmt(p50), fmt(p90), fmt(p99), fmt(mean), fmt(throughput, 1)}});
  std::cout << "\nbatch sizes (size:runs): " << batch_hist_text({{static_cast<int>(batch), lat_ms.size()}}) << "\n";
  return 0;
}

int bench_serving(const BenchFlags& f, std::shared_ptr<Model> model, const std::vector<Shape>& shapes,
                  const std::vector<Tensor>& inputs) {
  ServingOptions so;
  so.instances = std::max(1, f.instances);
  so.batching.max_batch_size = std::max(1, f.max_batch);
  so.batching.max_queue_delay_us = std::max<int64_t>(0, f.max_queue_delay_us);
  so.batching.queue.max_queue_size = f.max_queue_size;
  so.batching.queue.default_timeout_us = f.timeout_us;
  // --threads-per-instance, else --threads shared over the instances, else the usable cores.
  so.threads_per_instance = core::share_threads(f.threads_per_instance, f.model.options.num_threads, so.instances);
  so.pin = f.model.options.pin_threads;
  auto served = ServingModel::create(model, so);
  if (!served.ok()) {
    std::cerr << "error: " << served.status().to_string() << std::endl;
    return 2;
  }
  ServingModel& m = **served;
  InferRequest proto;
  for (size_t i = 0; i < inputs.size(); ++i) proto.inputs[model->inputs()[i].name] = inputs[i];
  const int64_t rows = shapes.empty() || shapes[0].rank() == 0 ? 1 : shapes[0][0];
  Progress progress(bench_progress(f));
  LoadSpec load;
  load.concurrency = f.concurrency;
  load.request_rate = f.request_rate;
  load.warmup_s = f.warmup;
  load.seconds = f.seconds;
  load.max_runs = f.max_runs;
  load.seed = f.in.seed;
  load.progress = &progress;
  const Result<LoadFigures> measured = run_load(m, proto, rows, load);
  progress.finish();
  if (!measured.ok()) {
    std::cerr << "error: " << measured.status().message() << std::endl;
    return 1;
  }
  const LoadFigures& r = *measured;
  const bool open_loop = f.request_rate > 0;
  const int clients = std::max(1, f.concurrency);
  const ServingStats& after = r.stats;
  std::string shape_str;
  for (size_t i = 0; i < shapes.size(); ++i)
    shape_str += (i ? " " : "") + model->inputs()[i].name + "=" + shapes[i].to_string();
  if (f.json) {
    std::ostringstream o;
    o << "{\"model\": \"" << json_escape(f.model.path) << "\", \"mode\": \"serving\", \"instances\": " << so.instances
      << ", \"threads_per_instance\": " << m.threads_per_instance() << ", \"max_batch\": " << so.batching.max_batch_size
      << ", \"max_queue_delay_us\": " << so.batching.max_queue_delay_us << ", \"load\": \""
      << (open_loop ? "open" : "closed") << "\", \"request_rate\": " << fmt(f.request_rate)
      << ", \"concurrency\": " << (open_loop ? 0 : clients) << ", \"batch\": " << rows << ", \"shapes\": \""
      << json_escape(shape_str) << "\", \"requests\": " << r.requests << ", \"runs\": " << r.ok
      << ", \"rejected\": " << r.rejected << ", \"seconds\": " << fmt(r.elapsed_s)
      << ", \"throughput\": " << fmt(r.throughput) << ", \"latency_ms\": {\"p50\": " << fmt(r.p50_ms, 4)
      << ", \"p90\": " << fmt(r.p90_ms, 4) << ", \"p99\": " << fmt(r.p99_ms, 4) << ", \"mean\": " << fmt(r.mean_ms, 4)
      << ", \"min\": " << fmt(r.min_ms, 4) << "}"
      << ", \"queue_ms\": {\"p50\": " << fmt(after.queue.p50_us / 1000, 4)
      << ", \"p99\": " << fmt(after.queue.p99_us / 1000, 4)
      << "}, \"compute_ms\": {\"p50\": " << fmt(after.compute.p50_us / 1000, 4)
      << ", \"p99\": " << fmt(after.compute.p99_us / 1000, 4) << "}"
      << ", \"batch_size_hist\": " << batch_hist_json(r.batch_size_hist) << ", \"mean_batch\": " << fmt(r.mean_batch)
      << ", \"failures\": {";
    bool first = true;
    for (const auto& [code, n] : r.failures) {
      o << (first ? "" : ", ") << "\"" << status_code_name(code) << "\": " << n;
      first = false;
    }
    o << "}}";
    std::cout << o.str() << std::endl;
    return 0;
  }
  std::cout << "model: " << f.model.path << "\ninputs: " << shape_str << "\nserving: " << so.instances
            << " instances x " << m.threads_per_instance() << " threads, max batch " << so.batching.max_batch_size
            << ", queue delay " << so.batching.max_queue_delay_us << " us, "
            << (open_loop ? "open loop at " + fmt(f.request_rate, 1) + " req/s"
                          : "closed loop, concurrency " + std::to_string(clients))
            << "\n\n";
  print_table({{"requests", "rejected", "p50 ms", "p90 ms", "p99 ms", "mean ms", "throughput/s", "mean batch"},
               {std::to_string(r.requests), std::to_string(r.rejected), fmt(r.p50_ms), fmt(r.p90_ms), fmt(r.p99_ms),
                fmt(r.mean_ms), fmt(r.throughput, 1), fmt(r.mean_batch, 2)}});
  std::cout << "\nbatch sizes (size:runs): " << batch_hist_text(r.batch_size_hist)
            << "\nqueue p50/p99 ms: " << fmt(after.queue.p50_us / 1000) << " / " << fmt(after.queue.p99_us / 1000)
            << ", compute p50/p99 ms: " << fmt(after.compute.p50_us / 1000) << " / " << fmt(after.compute.p99_us / 1000)
            << "\n";
  if (r.rejected) std::cout << "first rejection: " << r.first_error << "\n";
  return 0;
}

}  // namespace

Runner add_bench_command(CLI::App& app) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* c = app.add_subcommand("bench", "Run a model repeatedly and report latency and throughput");
  add_model_flags(c, f->model);
  add_input_flags(c, f->in, true);
  c->add_option("--trace", f->trace, "Write a Chrome trace-event JSON file of the measured runs");
  c->add_option("--seconds", f->seconds, "Measured time in seconds")->check(seconds_range(false));
  c->add_option("--warmup", f->warmup, "Warm-up time in seconds (at least one run)")->check(seconds_range(true));
  c->add_option("--max-runs", f->max_runs, "Stop after this many measured runs (0: no limit)")
      ->check(int_range(0, std::numeric_limits<int>::max(), "0: no limit"));
  c->add_option("--concurrency", f->concurrency, "Concurrent clients, each with its own execution context")
      ->check(int_range(1, kMaxCount));
  c->add_option("--instances", f->instances, "Serve through N instances sharing the weights")
      ->check(int_range(1, runtime::kMaxInstances));
  c->add_option("--max-batch", f->max_batch, "Serving: merge requests into batches of up to B rows (1 = no batching)")
      ->check(int_range(1, kMaxBatch));
  c->add_option("--max-queue-delay-us", f->max_queue_delay_us, "Serving: longest wait for a batch to fill (default 0)")
      ->check(int_range(0, kMaxMicros, "microseconds"));
  c->add_option("--request-rate", f->request_rate, "Serving: open loop, Poisson arrivals at R requests/s")
      ->check(number_range(0, kMaxRate, true, "requests per second"));
  c->add_option("--threads-per-instance", f->threads_per_instance, "Serving: intra-op threads per instance")
      ->check(int_range(0, kMaxThreads, "0: threads / instances"));
  c->add_option("--max-queue-size", f->max_queue_size, "Serving: queue bound; beyond it requests are rejected")
      ->check(int_range(0, std::numeric_limits<int>::max(), "0: no bound"));
  c->add_option("--timeout-us", f->timeout_us, "Serving: queueing budget per request; late ones are rejected")
      ->check(int_range(0, kMaxMicros, "microseconds; 0: none"));
  c->add_flag("--fixed-threads", f->fixed_threads,
              "Run every step on the given threads (default: one thread while that measures faster)");
  c->add_flag("--json", f->json, "Print one JSON object");
  return [f] { return bench(*f); };
}

}  // namespace streamline::tools
