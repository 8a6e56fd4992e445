// `streamline bench`: repeated inference; latency percentiles and throughput.

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <iostream>
#include <sstream>

#include "cli_common.h"
#include "commands.h"
#include "exec/trace.h"

namespace streamline::tools {
namespace {

struct BenchFlags {
  ModelFlags model;
  InputFlags in;
  std::string trace;
  double seconds = 10;
  double warmup = 2;
  int max_runs = 0;
  bool json = false;
  int concurrency = 1;
};

int bench(const BenchFlags& f) {
  auto model = load_model(f.model);
  if (!model.ok()) {
    std::cerr << "error: " << model.status().to_string() << std::endl;
    return 2;
  }
  auto shapes = resolve_shapes(**model, f.in);
  if (!shapes.ok()) {
    std::cerr << "error: " << shapes.status().to_string() << std::endl;
    return 2;
  }
  auto inputs = make_inputs(**model, f.in, *shapes);
  if (!inputs.ok()) {
    std::cerr << "error: " << inputs.status().to_string() << std::endl;
    return 2;
  }
  auto plan = (*model)->plan_for(*shapes);
  if (!plan.ok()) {
    std::cerr << "error: " << plan.status().to_string() << std::endl;
    return 2;
  }
  // Each of `concurrency` clients owns a Session (its own arena and streams) on its own thread,
  // all sharing the model; closed loop: a client sends its next request when the last returns.
  const int clients = std::max(1, f.concurrency);
  exec::TraceRecorder trace(20000);
  using clock = std::chrono::steady_clock;
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
    auto& lat = per_client[static_cast<size_t>(c)];
    for (;;) {
      const auto a = clock::now();
      if (!run()) return;
      const auto b = clock::now();
      lat.push_back(std::chrono::duration<double, std::milli>(b - a).count());
      if ((b >= stop_at && lat.size() >= 3) || (f.max_runs > 0 && static_cast<int>(lat.size()) >= f.max_runs) || failed)
        return;
    }
  };
  const auto t_start = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(f.warmup));
  const auto t_stop = t_start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(f.seconds));
  std::vector<std::thread> workers;
  for (int c = 1; c < clients; ++c) workers.emplace_back(client, c, t_start, t_stop);
  client(0, t_start, t_stop);
  for (auto& t : workers) t.join();
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
    o << "{\"model\": \"" << json_escape(f.model.path) << "\", \"threads\": " << threads * streams
      << ", \"streams\": " << streams << ", \"threads_per_stream\": " << threads << ", \"concurrency\": " << clients
      << ", \"batch\": " << batch
      << ", \"shapes\": \"" << json_escape(shape_str) << "\", \"runs\": " << lat_ms.size()
      << ", \"seconds\": " << fmt(elapsed) << ", \"throughput\": " << fmt(throughput)
      << ", \"latency_ms\": {\"p50\": " << fmt(p50, 4) << ", \"p90\": " << fmt(p90, 4) << ", \"p99\": " << fmt(p99, 4)
      << ", \"mean\": " << fmt(mean, 4) << ", \"min\": " << fmt(percentile(lat_ms, 0), 4) << "}"
      << ", \"arena_bytes\": " << (*plan)->arena_bytes << ", \"steps\": " << (*plan)->steps.size() << "}";
    std::cout << o.str() << std::endl;
    return 0;
  }
  std::cout << "model: " << f.model.path << "\ninputs: " << shape_str << "\nstreams: " << streams
            << " x " << threads << " threads, concurrency: " << clients
            << ", steps: " << (*plan)->steps.size() << ", arena: " << fmt((*plan)->arena_bytes / 1048576.0, 1)
            << " MiB\n\n";
  print_table({{"runs", "p50 ms", "p90 ms", "p99 ms", "mean ms", "throughput/s"},
               {std::to_string(lat_ms.size()), fmt(p50), fmt(p90), fmt(p99), fmt(mean), fmt(throughput, 1)}});
  return 0;
}

}  // namespace

Runner add_bench_command(CLI::App& app) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* c = app.add_subcommand("bench", "Run a model repeatedly and report latency and throughput");
  add_model_flags(c, f->model);
  c->add_option("--input", f->in.inputs, "NAME=FILE.npy input (repeatable)");
  c->add_option("--shape", f->in.shapes, "NAME=d0,d1,... input shape (repeatable)");
  c->add_option("--batch", f->in.batch, "Batch size for symbolic first dimensions");
  c->add_option("--trace", f->trace, "Write a Chrome trace-event JSON file of the measured runs");
  c->add_option("--seconds", f->seconds, "Measured time in seconds")->check(CLI::PositiveNumber);
  c->add_option("--warmup", f->warmup, "Warm-up time in seconds (at least one run)")->check(CLI::NonNegativeNumber);
  c->add_option("--max-runs", f->max_runs, "Stop after this many measured runs");
  c->add_option("--concurrency", f->concurrency, "Concurrent clients, each with its own execution context")
      ->check(CLI::Range(1, 1024));
  c->add_flag("--json", f->json, "Print one JSON object");
  return [f] { return bench(*f); };
}

}  // namespace streamline::tools
