// `streamline perf`: load against a running KServe v2 server (ours, Triton, any), in the manner of
// Triton's perf_analyzer.
//
//   streamline perf -m resnet50 -i grpc --concurrency-range 1:8:2 --seconds 10
//   streamline perf -m resnet50 -u localhost:8000 --request-rate 200 --json
//
// It reads the model's metadata from the server, makes seeded random inputs for its shapes
// (variable dimensions: --shape, else --batch for the first and 1 for the others), checks that one
// request succeeds, then measures each step: C closed-loop workers (each sends its next request
// when the last one is answered), or with --request-rate, requests sent at Poisson arrival times
// by a pool of workers. Each worker owns its connection. A step warms up for --warmup-s, then
// counts the responses that arrive in the next --seconds: throughput (inferences/s, a request of
// batch B counting B), latency percentiles of the successful ones, and the errors.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "cli_common.h"
#include "cli_flags.h"
#include "commands.h"
#include "perf_client.h"
#include "progress.h"
#include "serve/model_config.h"

namespace streamline::tools {
namespace {

using Clock = std::chrono::steady_clock;

struct PerfFlags {
  std::string model;
  std::string url;  // "" = the protocol's default
  std::string protocol = "http";
  std::string concurrency_range = "1";
  double request_rate = 0;  // 0 = closed loop
  int max_threads = 16;     // workers sending at --request-rate
  double seconds = 5;
  double warmup_s = 1;
  InputFlags in;
  bool json = false;
  bool csv = false;
};

struct StepResult {
  int concurrency = 0;  // workers
  double throughput = 0;
  double p50 = 0, p90 = 0, p95 = 0, p99 = 0;  // ms
  uint64_t requests = 0;                      // answered inside the window, errors included
  uint64_t errors = 0;
  std::string first_error;
};

// What one worker saw inside the measured window.
struct WorkerTally {
  std::vector<double> latency_ms;  // successful requests
  uint64_t errors = 0;
  std::string first_error;

  void record(const Status& s, Clock::time_point sent, Clock::time_point answered) {
    if (s.ok()) {
      latency_ms.push_back(std::chrono::duration<double, std::milli>(answered - sent).count());
    } else {
      ++errors;
      if (first_error.empty()) first_error = s.to_string();
    }
  }
};

// Poisson arrivals shared by the workers of an open-loop step: each takes the next send time.
class ArrivalSchedule {
 public:
  ArrivalSchedule(double rate, Clock::time_point first) : gap_s_(rate), next_(first) {}
  Clock::time_point take() {
    std::lock_guard<std::mutex> lock(mu_);
    const Clock::time_point t = next_;
    next_ += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap_s_(rng_)));
    return t;
  }

 private:
  std::mutex mu_;
  std::mt19937_64 rng_{7};
  std::exponential_distribution<double> gap_s_;
  Clock::time_point next_;
};

// Concrete shapes for the model's inputs: --shape NAME=dims wins; else variable dims become
// --batch (first dimension, default 1) or 1, each printed once on stderr. `batch` receives the
// rows a request carries.
Result<std::vector<RemoteTensor>> resolve_inputs(const RemoteModel& m, const InputFlags& flags, int64_t* batch) {
  std::vector<RemoteTensor> out = m.inputs;
  std::vector<bool> given(out.size(), false);
  for (const auto& s : flags.shapes) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0) return invalid_argument("--shape expects NAME=d0,d1,..., got '" + s + "'");
    const std::string name = s.substr(0, eq);
    auto it = std::find_if(out.begin(), out.end(), [&](const RemoteTensor& t) { return t.name == name; });
    if (it == out.end()) {
      std::string names;
      for (const auto& t : m.inputs) names += (names.empty() ? "" : ", ") + t.name;
      return invalid_argument("--shape: model '" + m.name + "' has no input '" + name + "' (inputs: " + names + ")");
    }
    SL_ASSIGN_OR_RETURN(it->shape, parse_dims(s, s.substr(eq + 1)));
    given[static_cast<size_t>(it - out.begin())] = true;
  }
  std::vector<DeclaredInput> declared;
  for (const auto& t : m.inputs) declared.push_back({t.name, t.shape, {}});
  SL_ASSIGN_OR_RETURN(FilledDims filled, fill_dynamic_dims(declared, given, flags.batch, true));
  for (const auto& n : filled.notes) std::cerr << "note: " << n << "\n";
  std::cerr << std::flush;
  *batch = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!given[i]) out[i].shape = filled.dims[i];
    const auto& declared_dims = m.inputs[i].shape;
    if (i == 0 && !declared_dims.empty() && declared_dims[0] < 0 && !out[i].shape.empty()) *batch = out[i].shape[0];
  }
  return out;
}

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(dims[i]);
  }
  s += ']';
  return s;
}

class PerfRun {
 public:
  PerfRun(const PerfFlags& f, PerfClient& client, int64_t batch) : f_(f), client_(client), batch_(batch) {}

  // Connections for `n` workers, made once and reused by later steps.
  Status ensure_connections(size_t n) {
    while (conns_.size() < n) {
      SL_ASSIGN_OR_RETURN(auto c, client_.connect());
      conns_.push_back(std::move(c));
    }
    return ok_status();
  }

  // One request through a fresh connection: the model must answer before anything is measured.
  Status probe() {
    SL_RETURN_IF_ERROR(ensure_connections(1));
    return conns_[0]->infer();
  }

  Result<StepResult> step(int workers, double rate) {
    SL_RETURN_IF_ERROR(ensure_connections(static_cast<size_t>(workers)));
    const Clock::time_point begin = Clock::now();
    const Clock::time_point start = begin + to_duration(f_.warmup_s);
    const Clock::time_point stop = start + to_duration(f_.seconds);
    std::vector<WorkerTally> tallies(static_cast<size_t>(workers));
    ArrivalSchedule schedule(rate > 0 ? rate : 1.0, begin);
    auto worker = [&](int w) {
      PerfConnection& conn = *conns_[static_cast<size_t>(w)];
      WorkerTally& tally = tallies[static_cast<size_t>(w)];
      for (;;) {
        if (rate > 0) {
          const Clock::time_point at = schedule.take();
          if (at >= stop) return;
          std::this_thread::sleep_until(at);
        }
        const Clock::time_point sent = Clock::now();
        const Status s = conn.infer();
        const Clock::time_point answered = Clock::now();
        if (answered >= start && answered < stop) tally.record(s, sent, answered);
        if (answered >= stop) return;
        // A server that is gone or draining answers at once; do not spin on it.
        if (s.code() == StatusCode::kUnavailable) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    };
    std::vector<std::thread> threads;
    for (int w = 1; w < workers; ++w) threads.emplace_back(worker, w);
    worker(0);
    for (auto& t : threads) t.join();

    StepResult r;
    r.concurrency = workers;
    std::vector<double> lat;
    for (auto& t : tallies) {
      lat.insert(lat.end(), t.latency_ms.begin(), t.latency_ms.end());
      r.errors += t.errors;
      if (r.first_error.empty()) r.first_error = t.first_error;
    }
    r.requests = lat.size() + r.errors;
    r.throughput = static_cast<double>(lat.size()) * static_cast<double>(batch_) / std::max(1e-9, f_.seconds);
    r.p50 = percentile(lat, 50);
    r.p90 = percentile(lat, 90);
    r.p95 = percentile(lat, 95);
    r.p99 = percentile(lat, 99);
    return r;
  }

 private:
  static Clock::duration to_duration(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }

  const PerfFlags& f_;
  PerfClient& client_;
  int64_t batch_;
  std::vector<std::unique_ptr<PerfConnection>> conns_;
};

void print_results(const PerfFlags& f, const std::string& endpoint, const std::vector<RemoteTensor>& inputs,
                   const std::vector<StepResult>& steps) {
  if (f.json) {
    std::ostringstream o;
    o << "{\"model\": \"" << json_escape(f.model) << "\", \"protocol\": \"" << f.protocol << "\", \"url\": \""
      << json_escape(endpoint) << "\"";
    if (f.request_rate > 0) o << ", \"request_rate\": " << fmt(f.request_rate);
    o << ", \"steps\": [";
    for (size_t i = 0; i < steps.size(); ++i) {
      const StepResult& s = steps[i];
      o << (i ? ", " : "") << "{\"concurrency\": " << s.concurrency << ", \"throughput\": " << fmt(s.throughput)
        << ", \"latency_ms\": {\"p50\": " << fmt(s.p50, 4) << ", \"p90\": " << fmt(s.p90, 4)
        << ", \"p95\": " << fmt(s.p95, 4) << ", \"p99\": " << fmt(s.p99, 4) << "}, \"requests\": " << s.requests
        << ", \"errors\": " << s.errors << "}";
    }
    o << "]}";
    std::cout << o.str() << std::endl;
    return;
  }
  if (f.csv) {
    std::cout << "concurrency,throughput,p50_ms,p90_ms,p95_ms,p99_ms,requests,errors\n";
    for (const auto& s : steps)
      std::cout << s.concurrency << "," << fmt(s.throughput) << "," << fmt(s.p50, 4) << "," << fmt(s.p90, 4) << ","
                << fmt(s.p95, 4) << "," << fmt(s.p99, 4) << "," << s.requests << "," << s.errors << "\n";
    std::cout << std::flush;
    return;
  }
  std::string shapes;
  for (const auto& t : inputs) shapes += (shapes.empty() ? "" : " ") + t.name + "=" + t.datatype + shape_text(t.shape);
  std::cout << "model: " << f.model << " (" << f.protocol << ", " << endpoint << ")\ninputs: " << shapes << "\n";
  if (f.request_rate > 0) std::cout << "request rate: " << fmt(f.request_rate) << "/s (Poisson)\n";
  std::cout << "\n";
  std::vector<std::vector<std::string>> rows = {{f.request_rate > 0 ? "workers" : "concurrency", "throughput/s",
                                                 "p50 ms", "p90 ms", "p95 ms", "p99 ms", "requests", "errors"}};
  for (const auto& s : steps)
    rows.push_back({std::to_string(s.concurrency), fmt(s.throughput, 1), fmt(s.p50), fmt(s.p90), fmt(s.p95), fmt(s.p99),
                    std::to_string(s.requests), std::to_string(s.errors)});
  print_table(rows);
}

int perf(const PerfFlags& f) {
  auto fail = [](const std::string& what, const Status& s, int code = kRunFailed) {
    std::cerr << "error: " << what << s.message() << std::endl;
    return code;
  };
  auto steps = parse_count_range("--concurrency-range", f.concurrency_range, 1, kMaxCount);
  if (!steps.ok()) return fail("", steps.status(), kUsageError);
  auto client = PerfClient::create(f.protocol, f.url);
  if (!client.ok()) return fail("", client.status(), kUsageError);
  auto meta = (*client)->metadata(f.model);
  if (!meta.ok()) {
    if (meta.status().code() == StatusCode::kUnavailable) return fail("", meta.status());
    return fail("model '" + f.model + "': ", meta.status());
  }
  int64_t batch = 1;
  auto inputs = resolve_inputs(*meta, f.in, &batch);
  if (!inputs.ok()) return fail("", inputs.status(), kUsageError);
  std::vector<Tensor> values;
  for (size_t i = 0; i < inputs->size(); ++i) {
    const RemoteTensor& t = (*inputs)[i];
    const DType dtype = serve::dtype_from_kserve(t.datatype);
    if (dtype == DType::kUndefined || dtype_size(dtype) == 0)
      return fail("", unsupported("input '" + t.name + "': datatype " + t.datatype + " is not supported"));
    auto value = random_tensor(dtype, Shape(t.shape), f.in.seed + static_cast<uint32_t>(i));
    if (!value.ok()) return fail("input '" + t.name + "': ", value.status(), kUsageError);
    values.push_back(std::move(*value));
  }
  std::vector<std::string> outputs;
  for (const auto& o : meta->outputs) outputs.push_back(o.name);
  const Status prepared = (*client)->prepare(f.model, *inputs, values, outputs);
  if (!prepared.ok()) return fail("", prepared);

  PerfRun run(f, **client, batch);
  const Status probe = run.probe();
  if (!probe.ok()) return fail("model '" + f.model + "': the first request failed: ", probe);
  std::vector<StepResult> results;
  const bool open_loop = f.request_rate > 0;
  const std::vector<int> plan = open_loop ? std::vector<int>{f.max_threads} : *steps;
  ProgressOptions po;
  po.title = "perf";
  po.unit = "steps";
  po.total = static_cast<int64_t>(plan.size());
  po.enabled = !f.json && !f.csv;
  const auto step_note = [&](int c) {
    return open_loop ? fmt(f.request_rate, 1) + " req/s, " + std::to_string(c) + " workers"
                     : "concurrency " + std::to_string(c);
  };
  po.note = step_note(plan.front());
  Progress progress(po);
  const double step_s = f.warmup_s + f.seconds;
  for (size_t i = 0; i < plan.size(); ++i) {
    const int c = plan[i];
    progress.set_note(step_note(c));
    progress.set_expected_end(Progress::Clock::now() + std::chrono::duration_cast<Progress::Clock::duration>(
                                                           std::chrono::duration<double>(step_s * (plan.size() - i))));
    auto r = run.step(c, f.request_rate);
    if (!r.ok()) {
      progress.finish();
      return fail("", r.status());
    }
    if (r->errors > 0)
      progress.message("warning: " + std::to_string(r->errors) + " failed requests at concurrency " +
                       std::to_string(c) + "; first: " + r->first_error);
    results.push_back(std::move(*r));
    progress.advance();
  }
  progress.finish();
  print_results(f, (*client)->endpoint(), *inputs, results);
  return kExitOk;
}

}  // namespace

Runner add_perf_command(CLI::App& app) {
  auto f = std::make_shared<PerfFlags>();
  CLI::App* c = app.add_subcommand("perf", "Measure a running KServe v2 server (HTTP or gRPC): throughput and latency");
  c->add_option("-m,--model", f->model, "Model name on the server")->required();
  c->add_option("-u,--url", f->url, "host:port (default localhost:8000 for http, localhost:8001 for grpc)");
  c->add_option("-i,--protocol", f->protocol, "http or grpc")->check(CLI::IsMember({"http", "grpc"}));
  c->add_option("--concurrency-range", f->concurrency_range, "start[:end[:step]] closed-loop workers (default 1)")
      ->check(count_range(1, kMaxCount));
  c->add_option("--request-rate", f->request_rate, "Open loop: Poisson arrivals at R requests/s")
      ->check(number_range(0, kMaxRate, true, "requests per second"));
  c->add_option("--max-threads", f->max_threads, "Open loop: workers sending requests (default 16)")
      ->check(int_range(1, kMaxCount));
  c->add_option("--seconds", f->seconds, "Measured time per step in seconds (default 5)")->check(seconds_range(false));
  c->add_option("--warmup-s", f->warmup_s, "Warm-up per step in seconds, not measured (default 1)")
      ->check(seconds_range(true));
  add_input_flags(c, f->in, false);
  auto* json = c->add_flag("--json", f->json, "Print one JSON object");
  c->add_flag("--csv", f->csv, "Print CSV: a header line and a line per step")->excludes(json);
  return [f] { return perf(*f); };
}

}  // namespace streamline::tools
