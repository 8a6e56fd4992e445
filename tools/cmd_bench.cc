// `streamline bench`: repeated inference; latency percentiles and throughput.

#include <chrono>
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
  Session session(*model);
  exec::TraceRecorder trace(20000);
  RunOptions ro;
  using clock = std::chrono::steady_clock;
  auto run = [&]() -> bool {
    auto r = session.run(*inputs, ro);
    if (!r.ok()) std::cerr << "error: " << r.status().to_string() << std::endl;
    return r.ok();
  };
  // Warm-up: at least one run.
  const auto w0 = clock::now();
  do {
    if (!run()) return 1;
  } while (std::chrono::duration<double>(clock::now() - w0).count() < f.warmup);
  if (!f.trace.empty()) ro.observer = &trace;  // measured runs only
  std::vector<double> lat_ms;
  const auto t0 = clock::now();
  double elapsed = 0;
  do {
    const auto a = clock::now();
    if (!run()) return 1;
    const auto b = clock::now();
    lat_ms.push_back(std::chrono::duration<double, std::milli>(b - a).count());
    elapsed = std::chrono::duration<double>(b - t0).count();
  } while ((elapsed < f.seconds || lat_ms.size() < 3) && (f.max_runs <= 0 || static_cast<int>(lat_ms.size()) < f.max_runs));
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
      << ", \"streams\": " << streams << ", \"threads_per_stream\": " << threads << ", \"batch\": " << batch
      << ", \"shapes\": \"" << json_escape(shape_str) << "\", \"runs\": " << lat_ms.size()
      << ", \"seconds\": " << fmt(elapsed) << ", \"throughput\": " << fmt(throughput)
      << ", \"latency_ms\": {\"p50\": " << fmt(p50, 4) << ", \"p90\": " << fmt(p90, 4) << ", \"p99\": " << fmt(p99, 4)
      << ", \"mean\": " << fmt(mean, 4) << ", \"min\": " << fmt(percentile(lat_ms, 0), 4) << "}"
      << ", \"arena_bytes\": " << (*plan)->arena_bytes << ", \"steps\": " << (*plan)->steps.size() << "}";
    std::cout << o.str() << std::endl;
    return 0;
  }
  std::cout << "model: " << f.model.path << "\ninputs: " << shape_str << "\nstreams: " << streams
            << " x " << threads << " threads"
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
  c->add_flag("--json", f->json, "Print one JSON object");
  return [f] { return bench(*f); };
}

}  // namespace streamline::tools
