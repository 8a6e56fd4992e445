// `streamline perf`: load against a running KServe v2 server (ours, Triton, any), with the main
// options of Triton's perf_analyzer and its latency report (-f), so that what was built on
// perf_analyzer's numbers reads ours.
//
//   streamline perf -m resnet50 -i grpc --concurrency-range 1:8:2 -p 10000 -f report.csv
//   streamline perf -m resnet50 -u localhost:8000 --request-rate-range 100:400:100 --async --json
//   streamline perf -m bert -b 4 --shape input_ids:128 --input-data data.json
//
// It reads the model's metadata from the server, makes the inputs (--input-data: seeded random
// values, zeros, or perf_analyzer's JSON file; variable dimensions from --shape, else -b for the
// first and 1 for the others), checks that one request succeeds, then measures each step: a
// warm-up of --warmup-s, then a window of --measurement-interval ms (or --seconds) over which
// it counts the responses that arrive (inferences/s, a request of batch B counting B), their
// latency percentiles and where the time went on the client, and reads the server's statistics
// at both ends of the window for the server-side split (queue, compute input/infer/output).
// perf_run.h has the loads (--concurrency-range or --request-rate-range, --sync or --async);
// perf_report.h the reports.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <sstream>

#include "cli_common.h"
#include "cli_flags.h"
#include "commands.h"
#include "perf_client.h"
#include "perf_input.h"
#include "perf_report.h"
#include "perf_run.h"
#include "preflight.h"
#include "progress.h"

namespace streamline::tools {
namespace {

constexpr double kDefaultWindowS = 5;  // perf_analyzer's default measurement interval
constexpr size_t kMaxRateSteps = 4096;

struct PerfFlags {
  std::string model;                      // -m
  std::string version;                    // -x; "" = the server's choice
  std::string url;                        // -u; "" = the protocol's default
  std::string protocol = "http";          // -i
  std::string concurrency_range;          // "" = 1
  std::string request_rate_range;         // "" = closed loop
  double request_rate = 0;                // --request-rate R: the range R
  std::string distribution = "constant";  // --request-distribution
  int max_threads = 16;                   // sync request rate: senders; async: HTTP I/O threads
  double seconds = 0;                     // --seconds; 0 = not given
  int64_t measurement_ms = 0;             // -p / --measurement-interval; 0 = not given
  double warmup_s = 1;                    // per step
  int percentile = -1;                    // --percentile; -1 = not given
  std::vector<std::string> shapes;        // NAME:d0,d1 or NAME=d0,d1
  int64_t batch = 0;                      // -b; 0 = not given
  std::string input_data = "random";      // random, zero or a JSON file
  uint32_t seed = 0;                      // random data
  std::string latency_report;             // -f
  bool verbose_csv = false;               // more columns in -f
  bool async = false;                     // --async (default --sync)
  bool sync = false;
  bool json = false;
  bool csv = false;
};

// "start[:end[:step]]" of request rates: start, start+step, ... up to end (step 1 by default).
Result<std::vector<double>> parse_rate_range(const std::string& text) {
  const std::string form = "expected start[:end[:step]] with rates above 0 and at most 1e+06 (requests/s)";
  std::vector<double> v;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ':')) {
    char* end = nullptr;
    const double x = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !std::isfinite(x))
      return invalid_argument("'" + item + "' is not a number; " + form);
    if (x <= 0 || x > kMaxRate) return invalid_argument(item + " is out of range; " + form);
    v.push_back(x);
  }
  if (v.empty() || v.size() > 3 || text.back() == ':') return invalid_argument("'" + text + "': " + form);
  const double start = v[0], stop = v.size() > 1 ? v[1] : v[0], step = v.size() > 2 ? v[2] : 1.0;
  if (stop < start) return invalid_argument("end " + fmt(stop) + " is below start " + fmt(start) + "; " + form);
  std::vector<double> rates;
  for (size_t i = 0;; ++i) {
    const double r = start + static_cast<double>(i) * step;
    if (r > stop * (1 + 1e-9)) break;
    if (rates.size() == kMaxRateSteps)
      return invalid_argument("'" + text + "' makes more than " + std::to_string(kMaxRateSteps) + " steps");
    rates.push_back(r);
  }
  return rates;
}

// perf_analyzer's --shape NAME:d0,d1 (split at the last ':') or ours, NAME=d0,d1.
Result<std::string> normalize_shape(const std::string& s) {
  if (s.find('=') != std::string::npos) return s;
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return invalid_argument("--shape expects NAME:d0,d1,... or NAME=d0,d1,..., got '" + s + "'");
  return s.substr(0, colon) + "=" + s.substr(colon + 1);
}

// Concrete shapes for the model's inputs: --shape wins; else variable dims become -b (first
// dimension, default 1) or 1, each printed once on stderr. `batch` receives the rows a request
// carries.
Result<std::vector<RemoteTensor>> resolve_inputs(const RemoteModel& m, const InputFlags& flags, int64_t* batch) {
  std::vector<RemoteTensor> out = m.inputs;
  std::vector<bool> given(out.size(), false);
  for (const auto& s : flags.shapes) {
    const size_t eq = s.find('=');
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

int perf(const PerfFlags& f) {
  auto fail = [](const std::string& what, const Status& s, int code = kRunFailed) {
    std::cerr << "error: " << what << s.message() << std::endl;
    return code;
  };
  auto usage_or_run = [](const Status& s) {
    return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound ? kUsageError : kRunFailed;
  };
  // Everything the flags name is checked before the server is asked anything.
  const bool open_loop = !f.request_rate_range.empty() || f.request_rate > 0;
  std::vector<int> concurrency;
  std::vector<double> rates;
  if (open_loop) {
    std::ostringstream single;
    single << f.request_rate;
    auto r = parse_rate_range(f.request_rate_range.empty() ? single.str() : f.request_rate_range);
    if (!r.ok()) return fail("--request-rate-range: ", r.status(), kUsageError);
    rates = *r;
  } else {
    auto c =
        parse_count_range("--concurrency-range", f.concurrency_range.empty() ? "1" : f.concurrency_range, 1, kMaxCount);
    if (!c.ok()) return fail("", c.status(), kUsageError);
    concurrency = *c;
  }
  InputFlags in;
  in.batch = f.batch;
  in.seed = f.seed;
  for (const auto& s : f.shapes) {
    auto n = normalize_shape(s);
    if (!n.ok()) return fail("", n.status(), kUsageError);
    in.shapes.push_back(*n);
  }
  if (f.input_data != "random" && f.input_data != "zero")
    if (Status s = check_input_file("--input-data", f.input_data); !s.ok()) return fail("", s, kUsageError);
  if (!f.latency_report.empty())
    if (Status s = check_output_file("--latency-report-file", f.latency_report); !s.ok())
      return fail("", s, kUsageError);

  auto client = PerfClient::create(f.protocol, f.url);
  if (!client.ok()) return fail("", client.status(), kUsageError);
  const std::string what = "model '" + f.model + "'" + (f.version.empty() ? "" : " version " + f.version) + ": ";
  auto meta = (*client)->metadata(f.model, f.version);
  if (!meta.ok()) return fail(meta.status().code() == StatusCode::kUnavailable ? "" : what, meta.status());
  int64_t batch = 1;
  auto shaped = resolve_inputs(*meta, in, &batch);
  if (!shaped.ok()) return fail("", shaped.status(), kUsageError);
  auto requests = make_perf_requests(*shaped, meta->inputs, batch, f.input_data, f.seed);
  if (!requests.ok()) return fail("", requests.status(), usage_or_run(requests.status()));
  std::vector<std::string> outputs;
  for (const auto& o : meta->outputs) outputs.push_back(o.name);
  if (Status s = (*client)->prepare(f.model, f.version, *requests, outputs); !s.ok()) return fail("", s);

  LoadOptions lo;
  lo.warmup_s = f.warmup_s;
  lo.window_s = f.seconds > 0          ? f.seconds
                : f.measurement_ms > 0 ? static_cast<double>(f.measurement_ms) / 1000.0
                                       : kDefaultWindowS;
  lo.async = f.async;
  lo.max_threads = f.max_threads;
  lo.poisson = f.distribution == "poisson";
  lo.batch = batch;
  lo.percentiles = {50, 90, 95, 99};
  if (f.percentile > 0 && std::find(lo.percentiles.begin(), lo.percentiles.end(), f.percentile) == lo.percentiles.end())
    lo.percentiles.push_back(f.percentile);
  std::sort(lo.percentiles.begin(), lo.percentiles.end());
  lo.model = meta->name.empty() ? f.model : meta->name;
  lo.version = f.version;
  PerfRun run(**client, requests->size(), lo);
  if (Status s = run.probe(); !s.ok()) return fail(what + "the first request failed: ", s);

  const size_t total = open_loop ? rates.size() : concurrency.size();
  ProgressOptions po;
  po.title = "perf";
  po.unit = "steps";
  po.total = static_cast<int64_t>(total);
  po.enabled = !f.json && !f.csv;
  const auto step_note = [&](size_t i) {
    return open_loop ? fmt(rates[i], 1) + " req/s" : "concurrency " + std::to_string(concurrency[i]);
  };
  po.note = step_note(0);
  Progress progress(po);
  const double step_s = lo.warmup_s + lo.window_s;
  std::vector<StepResult> results;
  for (size_t i = 0; i < total; ++i) {
    progress.set_note(step_note(i));
    progress.set_expected_end(Progress::Clock::now() + std::chrono::duration_cast<Progress::Clock::duration>(
                                                           std::chrono::duration<double>(step_s * (total - i))));
    auto r = open_loop ? run.rate_step(rates[i]) : run.concurrency_step(concurrency[i]);
    if (!r.ok()) {
      progress.finish();
      return fail("", r.status());
    }
    if (r->errors > 0)
      progress.message("warning: " + std::to_string(r->errors) + " failed requests at " + step_note(i) +
                       "; first: " + r->first_error);
    results.push_back(std::move(*r));
    progress.advance();
  }
  progress.finish();

  ReportOptions ro;
  ro.request_rate = open_loop;
  ro.verbose = f.verbose_csv;
  ro.percentile = f.percentile;
  if (f.json) {
    std::cout << perf_json(f.model, f.protocol, (*client)->endpoint(), results, ro) << std::endl;
  } else if (f.csv) {
    std::cout << perf_csv(results) << std::flush;
  } else {
    std::string shapes;
    for (const auto& t : *shaped) {
      std::string dims;
      for (int64_t d : t.shape) dims += (dims.empty() ? "" : ",") + std::to_string(d);
      shapes += (shapes.empty() ? "" : " ") + t.name + "=" + t.datatype + "[" + dims + "]";
    }
    std::cout << "model: " << f.model << (f.version.empty() ? "" : " version " + f.version) << " (" << f.protocol
              << ", " << (*client)->endpoint() << ", " << (f.async ? "async" : "sync") << ")\ninputs: " << shapes
              << (requests->size() > 1 ? " (" + std::to_string(requests->size()) + " data entries)" : "") << "\n";
    if (open_loop) std::cout << "request distribution: " << f.distribution << "\n";
    std::cout << "measurement window: " << fmt(lo.window_s * 1000, 0) << " ms\n\n";
    print_perf_table(results, ro);
  }
  if (!f.latency_report.empty())
    if (Status s = write_latency_report(f.latency_report, results, ro); !s.ok()) return fail("", s);
  return kExitOk;
}

}  // namespace

Runner add_perf_command(CLI::App& app) {
  auto f = std::make_shared<PerfFlags>();
  CLI::App* c = app.add_subcommand(
      "perf", "Measure a running KServe v2 server (HTTP or gRPC) with perf_analyzer's options and report");
  c->add_option("-m,--model", f->model, "Model name on the server")->required();
  c->add_option("-x,--model-version", f->version, "Model version (default: the server's choice)");
  c->add_option("-u,--url", f->url, "host:port (default localhost:8000 for http, localhost:8001 for grpc)");
  c->add_option("-i,--protocol", f->protocol, "http or grpc")->check(CLI::IsMember({"http", "grpc"}));
  auto* conc = c->add_option("--concurrency-range", f->concurrency_range,
                             "start[:end[:step]] requests kept in flight (default 1)")
                   ->check(count_range(1, kMaxCount));
  auto* range = c->add_option("--request-rate-range", f->request_rate_range,
                              "start[:end[:step]] open loop at these requests/s (step default 1)")
                    ->check(CLI::Validator(
                        [](std::string& v) {
                          auto r = parse_rate_range(v);
                          return r.ok() ? std::string() : r.status().message();
                        },
                        "START[:END[:STEP]]"))
                    ->excludes(conc);
  c->add_option("--request-rate", f->request_rate, "Open loop at R requests/s (--request-rate-range R)")
      ->check(number_range(0, kMaxRate, true, "requests per second"))
      ->excludes(conc)
      ->excludes(range);
  c->add_option("--request-distribution", f->distribution, "Open loop: constant gaps or poisson arrivals")
      ->check(CLI::IsMember({"constant", "poisson"}));
  c->add_option("--max-threads", f->max_threads,
                "Sync open loop: sending threads; async: HTTP I/O threads (default 16)")
      ->check(int_range(1, kMaxCount));
  auto* seconds = c->add_option("--seconds", f->seconds, "Measured time per step in seconds (default 5)")
                      ->check(seconds_range(false));
  c->add_option("-p,--measurement-interval", f->measurement_ms, "Measured time per step in ms (default 5000)")
      ->check(int_range(1, static_cast<int64_t>(kMaxSeconds) * 1000, "milliseconds"))
      ->excludes(seconds);
  c->add_option("--warmup-s", f->warmup_s, "Warm-up per step in seconds, not measured (default 1)")
      ->check(seconds_range(true));
  c->add_option("--percentile", f->percentile, "Report this latency percentile too (and in -f, instead of the average)")
      ->check(int_range(1, 99));
  c->add_option("--shape", f->shapes, "NAME:d0,d1,... (or NAME=d0,d1,...) input shape (repeatable)");
  c->add_option("-b,--batch", f->batch, "Batch size: rows per request for a dynamic first dimension (default 1)")
      ->check(int_range(1, kMaxBatch));
  c->add_option("--input-data", f->input_data, "random, zero, or a JSON file in perf_analyzer's format");
  c->add_option("-f,--latency-report-file", f->latency_report, "Write perf_analyzer's CSV latency report here");
  c->add_flag("--verbose-csv", f->verbose_csv, "-f: also the average latency and the client's send/receive split");
  auto* async = c->add_flag("-a,--async", f->async, "Keep requests in flight from a few completion threads");
  c->add_flag("--sync", f->sync, "One thread per request in flight (the default)")->excludes(async);
  auto* json = c->add_flag("--json", f->json, "Print one JSON object");
  c->add_flag("--csv", f->csv, "Print CSV: a header line and a line per step")->excludes(json);
  return [f] { return perf(*f); };
}

}  // namespace streamline::tools
