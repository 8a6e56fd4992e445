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
#include "exec/trace.h"
#include "preflight.h"
#include "progress.h"
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

std::string hist_json(const std::map<int, uint64_t>& h) {
  std::string o = "{";
  for (const auto& [size, n] : h)
    o += (o.size() > 1 ? ", " : "") + ("\"" + std::to_string(size) + "\": ") + std::to_string(n);
  return o + "}";
}

std::string hist_text(const std::map<int, uint64_t>& h) {
  std::string o;
  for (const auto& [size, n] : h) o += (o.empty() ? "" : " ") + std::to_string(size) + ":" + std::to_string(n);
  return o.empty() ? "-" : o;
}

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
  auto plan = (*model)->plan_for(*shapes);
  if (!plan.ok()) {
    std::cerr << "error: " << plan.status().to_string() << std::endl;
    return 2;
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
  const int streams = (*plan)->num_streams;
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
      << ", \"batch_size_hist\": " << hist_json({{static_cast<int>(batch), lat_ms.size()}}) << ", \"rejected\": 0"
      << ", \"arena_bytes\": " << (*plan)->arena_bytes << ", \"steps\": " << (*plan)->steps.size() << "}";
    std::cout << o.str() << std::endl;
    return 0;
  }
  std::cout << "model: " << f.model.path << "\ndevice: " << (*model)->device().to_string() << " ("
            << ops::precision_name((*model)->options().precision) << ")\ninputs: " << shape_str
            << "\nstreams: " << streams << " x " << threads << " threads, concurrency: " << clients
            << ", steps: " << (*plan)->steps.size() << ", arena: " << fmt((*plan)->arena_bytes / 1048576.0, 1)
            << " MiB\n\n";
  print_table({{"runs", "rejected", "p50 ms", "p90 ms", "p99 ms", "mean ms", "throughput/s"},
               {std::to_string(lat_ms.size()), "0", fmt(p50), fmt(p90), fmt(p99), fmt(mean), fmt(throughput, 1)}});
  std::cout << "\nbatch sizes (size:runs): " << hist_text({{static_cast<int>(batch), lat_ms.size()}}) << "\n";
  return 0;
}

// Responses that complete inside the measured window [start, stop), from client threads or
// response callbacks. Counting completions (not starts) keeps throughput right when latency is
// longer than the window.
struct Samples {
  using time_point = std::chrono::steady_clock::time_point;
  time_point start, stop;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<double> lat_ms;
  uint64_t ok = 0, rejected = 0;
  std::map<StatusCode, uint64_t> failures;
  std::string first_error;
  bool done = false;             // --max-runs reached
  Progress* progress = nullptr;  // counts the responses, when set

  void add(const InferResponse& r, double ms, time_point at, int max_runs) {
    if (at < start || at >= stop) return;
    std::lock_guard<std::mutex> lock(mu);
    if (done) return;
    if (progress) progress->advance();
    if (r.status.ok()) {
      ++ok;
      lat_ms.push_back(ms);
    } else {
      ++rejected;
      ++failures[r.status.code()];
      if (first_error.empty()) first_error = r.status.to_string();
    }
    if (max_runs > 0 && ok + rejected >= static_cast<uint64_t>(max_runs)) {
      done = true;
      cv.notify_all();
    }
  }
  // Waits until the window closes or --max-runs is reached; returns when that was.
  time_point wait_end() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_until(lock, stop, [&] { return done; });
    done = true;
    return std::min(stop, std::chrono::steady_clock::now());
  }
};

std::map<int, uint64_t> hist_diff(const std::map<int, uint64_t>& after, const std::map<int, uint64_t>& before) {
  std::map<int, uint64_t> d;
  for (const auto& [size, n] : after) {
    auto it = before.find(size);
    const uint64_t delta = n - (it == before.end() ? 0 : it->second);
    if (delta) d[size] = delta;
  }
  return d;
}

int bench_serving(const BenchFlags& f, std::shared_ptr<Model> model, const std::vector<Shape>& shapes,
                  const std::vector<Tensor>& inputs) {
  using clock = std::chrono::steady_clock;
  ServingOptions so;
  so.instances = std::max(1, f.instances);
  so.batching.max_batch_size = std::max(1, f.max_batch);
  so.batching.max_queue_delay_us = std::max<int64_t>(0, f.max_queue_delay_us);
  so.batching.queue.max_queue_size = f.max_queue_size;
  so.batching.queue.default_timeout_us = f.timeout_us;
  so.threads_per_instance = f.threads_per_instance > 0 ? f.threads_per_instance
                            : f.model.threads > 0      ? std::max(1, f.model.threads / so.instances)
                                                       : 0;
  so.pin = f.model.pin_threads;
  auto served = ServingModel::create(model, so);
  if (!served.ok()) {
    std::cerr << "error: " << served.status().to_string() << std::endl;
    return 2;
  }
  ServingModel& m = **served;
  InferRequest proto;
  for (size_t i = 0; i < inputs.size(); ++i) proto.inputs[model->inputs()[i].name] = inputs[i];
  const int64_t rows = shapes.empty() || shapes[0].rank() == 0 ? 1 : shapes[0][0];
  const auto secs = [](double s) {
    return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
  };
  const auto t_begin = clock::now();
  Samples samples;
  samples.start = t_begin + secs(f.warmup);
  samples.stop = samples.start + secs(f.seconds);
  Progress progress(bench_progress(f));
  progress.set_expected_end(samples.stop);
  samples.progress = &progress;
  const bool open_loop = f.request_rate > 0;
  const int clients = std::max(1, f.concurrency);
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  std::atomic<int64_t> outstanding{0};
  std::mutex done_mu;
  std::condition_variable done_cv;
  if (open_loop) {
    // Open loop: Poisson arrivals at the given rate, whatever the runtime's pace. Latency counts
    // from the intended arrival, so a late generator cannot hide queueing.
    workers.emplace_back([&] {
      std::mt19937_64 rng(f.in.seed + 17);
      std::exponential_distribution<double> gap(f.request_rate);
      for (auto t = t_begin + secs(gap(rng)); !stop.load(); t += secs(gap(rng))) {
        std::this_thread::sleep_until(t);
        if (stop.load()) break;
        outstanding.fetch_add(1);
        m.submit(proto, [&, t](InferResponse r) {
          const auto now = clock::now();
          samples.add(r, std::chrono::duration<double, std::milli>(now - t).count(), now, f.max_runs);
          if (outstanding.fetch_sub(1) == 1) {
            std::lock_guard<std::mutex> lock(done_mu);
            done_cv.notify_all();
          }
        });
      }
    });
  } else {
    // Closed loop: each client sends its next request when its last one is answered.
    for (int c = 0; c < clients; ++c)
      workers.emplace_back([&] {
        while (!stop.load()) {
          const auto a = clock::now();
          InferResponse r = m.infer(proto);
          const auto b = clock::now();
          samples.add(r, std::chrono::duration<double, std::milli>(b - a).count(), b, f.max_runs);
          // A refused client pauses before it retries, so refusals cannot spin and starve the instances.
          if (!r.status.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      });
  }
  std::this_thread::sleep_until(samples.start);
  progress.set_note("measuring");
  const ServingStats before = m.stats();
  const auto t_end = samples.wait_end();
  progress.set_note("stopping");
  const ServingStats after = m.stats();
  // Requests still queued after the window are cancelled (and not counted); the clients and the
  // generator then stop.
  stop = true;
  m.shutdown(ShutdownMode::kCancel);
  for (auto& w : workers) w.join();
  {
    std::unique_lock<std::mutex> lock(done_mu);
    done_cv.wait(lock, [&] { return outstanding.load() == 0; });
  }
  samples.progress = nullptr;
  progress.finish();
  const std::map<int, uint64_t> hist = hist_diff(after.batch_size_hist, before.batch_size_hist);
  if (samples.ok == 0) {
    std::cerr << "error: no request completed in the measured window"
              << (samples.first_error.empty() ? "" : ": " + samples.first_error) << std::endl;
    return 1;
  }
  const double elapsed = std::max(1e-9, std::chrono::duration<double>(t_end - samples.start).count());
  const std::vector<double>& lat = samples.lat_ms;
  const double throughput = static_cast<double>(samples.ok) * static_cast<double>(rows) / elapsed;
  const double p50 = percentile(lat, 50), p90 = percentile(lat, 90), p99 = percentile(lat, 99);
  double mean = 0;
  for (double x : lat) mean += x;
  mean /= static_cast<double>(lat.size());
  const double mean_batch = [&] {
    uint64_t n = 0, total = 0;
    for (const auto& [size, c] : hist) n += c, total += static_cast<uint64_t>(size) * c;
    return n ? static_cast<double>(total) / static_cast<double>(n) : 0.0;
  }();
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
      << json_escape(shape_str) << "\", \"requests\": " << samples.ok + samples.rejected << ", \"runs\": " << samples.ok
      << ", \"rejected\": " << samples.rejected << ", \"seconds\": " << fmt(elapsed)
      << ", \"throughput\": " << fmt(throughput) << ", \"latency_ms\": {\"p50\": " << fmt(p50, 4)
      << ", \"p90\": " << fmt(p90, 4) << ", \"p99\": " << fmt(p99, 4) << ", \"mean\": " << fmt(mean, 4)
      << ", \"min\": " << fmt(percentile(lat, 0), 4) << "}"
      << ", \"queue_ms\": {\"p50\": " << fmt(after.queue.p50_us / 1000, 4)
      << ", \"p99\": " << fmt(after.queue.p99_us / 1000, 4)
      << "}, \"compute_ms\": {\"p50\": " << fmt(after.compute.p50_us / 1000, 4)
      << ", \"p99\": " << fmt(after.compute.p99_us / 1000, 4) << "}"
      << ", \"batch_size_hist\": " << hist_json(hist) << ", \"mean_batch\": " << fmt(mean_batch) << ", \"failures\": {";
    bool first = true;
    for (const auto& [code, n] : samples.failures) {
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
               {std::to_string(samples.ok + samples.rejected), std::to_string(samples.rejected), fmt(p50), fmt(p90),
                fmt(p99), fmt(mean), fmt(throughput, 1), fmt(mean_batch, 2)}});
  std::cout << "\nbatch sizes (size:runs): " << hist_text(hist)
            << "\nqueue p50/p99 ms: " << fmt(after.queue.p50_us / 1000) << " / " << fmt(after.queue.p99_us / 1000)
            << ", compute p50/p99 ms: " << fmt(after.compute.p50_us / 1000) << " / " << fmt(after.compute.p99_us / 1000)
            << "\n";
  if (samples.rejected) std::cout << "first rejection: " << samples.first_error << "\n";
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
      ->check(int_range(1, kMaxCount));
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
  c->add_flag("--json", f->json, "Print one JSON object");
  return [f] { return bench(*f); };
}

}  // namespace streamline::tools
