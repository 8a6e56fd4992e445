// `streamline serve`: a model repository behind KServe v2 over HTTP and gRPC, with Prometheus
// metrics on a port of their own.
//
//   streamline serve --model-repository models                       # every model, ports 8000-8002
//   streamline serve --model-repository models --model-control-mode explicit --load-model resnet50
//
// SIGINT or SIGTERM drains: new inferences are refused (and /v2/health/ready answers 503), those
// already accepted finish (up to --drain-timeout-s), then the listeners close and it exits 0.

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <optional>

#include "cli_common.h"
#include "cli_flags.h"
#include "commands.h"
#include "core/cpu_set.h"
#include "core/logging.h"
#include "preflight.h"
#include "runtime/instance_pool.h"
#include "serve/grpc_server.h"
#include "serve/http_server.h"
#include "serve/repository.h"
#include "serve/server_core.h"

namespace streamline::tools {
namespace {

// Flags whose value is a field of the serving layer's options as it stands are bound to that
// field; the rest are converted in serve_models(): sizes in MiB, a list to parse, an inverted
// switch, the control mode. Their defaults are the options structs' own.
struct ServeFlags {
  std::string repository;
  // --instances, --threads, --core-budget.
  serve::RepositoryOptions repo;
  // --triton-metrics.
  serve::ServerOptions server;
  // --host (every endpoint's), --http-port (-1 = no HTTP endpoint), --http-threads,
  // --decode-threads, --max-connections (the metrics port's too).
  serve::HttpOptions http;
  // --grpc-port (-1 = no gRPC endpoint); the host is --host.
  serve::GrpcOptions grpc;
  int metrics_port = 8002;
  std::string control_mode = "none";
  std::vector<std::string> load_models;
  double drain_timeout_s = 30;
  double max_json_body_mb = static_cast<double>(serve::HttpOptions{}.max_json_bytes) / (1 << 20);
  double max_request_mb = static_cast<double>(serve::ServerOptions{}.max_request_bytes) / (1 << 20);
  std::string metrics_buckets_ms;   // "0.5,1,2,5": the latency histograms' bounds; "" = defaults
  bool strict_core_budget = false;  // repo.lend_idle_cores = !strict_core_budget
  bool yield_to_inference = true;   // front-end threads in the background role (SCHED_BATCH)
  // Logging as tritonserver's flags set it; unset = as SL_LOG_LEVEL says (default warning).
  std::optional<int> log_verbose;
  std::optional<bool> log_info, log_warning, log_error;
  std::string log_format = "default";
  std::string log_file;
};

// The log flags over the start-up settings.
Status apply_log_flags(const ServeFlags& f) {
  LogSettings s = log_settings();
  if (f.log_verbose) s.verbose = *f.log_verbose;
  if (f.log_info) s.info = *f.log_info;
  if (f.log_warning) s.warning = *f.log_warning;
  if (f.log_error) s.error = *f.log_error;
  s.format = f.log_format;
  s.file = f.log_file;
  return set_log_settings(s);
}

// "0.5,1,2.5" -> microseconds; positive and increasing, at most kMaxBucketBounds bounds (a fine
// histogram, e.g. 0.5 ms steps to 200 ms, is 400; each is looked up by binary search).
constexpr size_t kMaxBucketBounds = 1000;

Result<std::vector<double>> parse_buckets_ms(const std::string& text) {
  std::vector<double> out;
  if (text.empty()) return out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, end - pos);
    char* stop = nullptr;
    const double v = std::strtod(item.c_str(), &stop);
    if (item.empty() || stop != item.c_str() + item.size() || !(v > 0) || v > 3.6e6)
      return invalid_argument("--metrics-buckets-ms: '" + item +
                              "' is not a bound in milliseconds (a number above 0, at most 3600000)");
    if (!out.empty() && !(v * 1000 > out.back()))
      return invalid_argument("--metrics-buckets-ms: the bounds must increase ('" + item + "' does not)");
    out.push_back(v * 1000);
    pos = end + 1;
  }
  if (out.size() > kMaxBucketBounds)
    return invalid_argument("--metrics-buckets-ms: " + std::to_string(out.size()) + " bounds; at most " +
                            std::to_string(kMaxBucketBounds));
  return out;
}

void print_index(const serve::Repository& repo) {
  std::vector<std::vector<std::string>> rows{{"model", "version", "state", "reason"}};
  for (const serve::RepositoryEntry& e : repo.index())
    rows.push_back({e.name, e.version.empty() ? "-" : e.version, serve::model_state_name(e.state), e.reason});
  if (rows.size() == 1) rows.push_back({"(none)", "", "", ""});
  print_table(rows);
}

// The endpoints' ports are distinct and free now: checked before any model loads, so that a busy
// port fails in a moment rather than after every model has loaded.
Status check_ports(const ServeFlags& f) {
  const std::pair<const char*, int> ports[] = {
      {"--http-port", f.http.port}, {"--grpc-port", f.grpc.port}, {"--metrics-port", f.metrics_port}};
  for (size_t i = 0; i < std::size(ports); ++i)
    for (size_t j = 0; j < i; ++j)
      if (ports[i].second > 0 && ports[i].second == ports[j].second)
        return invalid_argument(std::string(ports[i].first) + " " + std::to_string(ports[i].second) + " is also the " +
                                ports[j].first + "; each endpoint needs a port of its own");
  for (const auto& [flag, port] : ports) SL_RETURN_IF_ERROR(check_port_free(flag, f.http.host, port));
  return ok_status();
}

int serve_models(const ServeFlags& f) {
  const bool explicit_control = f.control_mode == "explicit";
  if (!explicit_control && !f.load_models.empty()) {
    std::cerr << "error: --load-model needs --model-control-mode explicit" << std::endl;
    return 2;
  }
  if (Status s = apply_log_flags(f); !s.ok()) {
    std::cerr << "error: " << s.message() << std::endl;
    return kUsageError;
  }
  Result<std::vector<double>> buckets = parse_buckets_ms(f.metrics_buckets_ms);
  if (!buckets.ok()) {
    std::cerr << "error: " << buckets.status().message() << std::endl;
    return kUsageError;
  }
  if (Status s = check_ports(f); !s.ok()) {
    std::cerr << "error: " << s.to_string() << std::endl;
    return s.code() == StatusCode::kInvalidArgument ? kUsageError : kRunFailed;
  }
  // Block the shutdown signals before any thread exists, so that every thread inherits the mask
  // and only sigwait() below sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // The same way, every front-end thread (gRPC's, HTTP I/O and decoding, metrics) inherits the
  // background role from this one, while the threads that run inferences take the compute role
  // as they start. A front-end thread waking up for another request then no longer preempts a
  // running inference: two models at one client each on two cores, the larger one's compute time
  // per request was 15-30% longer with preemption.
  if (f.yield_to_inference && !core::set_current_thread_role(core::ThreadRole::kBackground))
    SL_LOG(kWarning) << "could not give the front-end threads the background role (SCHED_BATCH); they run as usual";

  serve::RepositoryOptions ro = f.repo;
  ro.latency_buckets_us = *buckets;
  ro.lend_idle_cores = !f.strict_core_budget;
  serve::Repository repo(f.repository, ro);
  if (!explicit_control) {
    Status s = repo.load_all();
    if (!s.ok()) {
      std::cerr << "error: " << s.to_string() << std::endl;
      return 1;
    }
  } else {
    for (const std::string& name : f.load_models) {
      Status s = repo.load(name);
      if (!s.ok()) std::cerr << "warning: model '" << name << "' did not load: " << s.to_string() << std::endl;
    }
  }
  print_index(repo);

  serve::ServerOptions so = f.server;
  so.allow_model_control = explicit_control;
  so.max_request_bytes = static_cast<int64_t>(f.max_request_mb * (1 << 20));
  serve::ServerCore core(repo, so);
  std::optional<serve::HttpServer> http, metrics;
  std::optional<serve::GrpcServer> grpc;
  if (f.http.port >= 0) {
    serve::HttpOptions o = f.http;
    o.max_json_bytes = static_cast<int64_t>(f.max_json_body_mb * (1 << 20));
    http.emplace(core, o);
  }
  if (f.metrics_port >= 0) {
    // /metrics alone, on one I/O thread.
    serve::HttpOptions o;
    o.host = f.http.host;
    o.port = f.metrics_port;
    o.io_threads = 1;
    o.max_connections = f.http.max_connections;
    o.metrics_only = true;
    metrics.emplace(core, o);
  }
  if (f.grpc.port >= 0) {
    serve::GrpcOptions o = f.grpc;
    o.host = f.http.host;
    grpc.emplace(core, o);
  }

  auto fail = [](const Status& s) {
    std::cerr << "error: " << s.to_string() << std::endl;
    return 1;
  };
  if (http) {
    if (Status s = http->start(); !s.ok()) return fail(s);
    std::cout << "HTTP     http://" << f.http.host << ":" << http->port() << "/v2" << std::endl;
  }
  if (grpc) {
    if (Status s = grpc->start(); !s.ok()) return fail(s);
    std::cout << "gRPC     " << f.http.host << ":" << grpc->port() << std::endl;
  }
  if (metrics) {
    if (Status s = metrics->start(); !s.ok()) return fail(s);
    std::cout << "Metrics  http://" << f.http.host << ":" << metrics->port() << "/metrics" << std::endl;
  }
  std::cout << "Serving (model control: " << f.control_mode << "); Ctrl-C drains and exits." << std::endl;

  int sig = 0;
  while (sigwait(&signals, &sig) != 0) {
  }
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(f.drain_timeout_s * 1000));
  std::cout << "\n"
            << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ": draining " << core.in_flight()
            << " requests in flight (up to " << f.drain_timeout_s << " s)" << std::endl;
  // Listeners stay open while draining so that clients get 503 and readiness probes see it.
  if (!core.drain(timeout))
    std::cerr << "warning: " << core.in_flight() << " requests still in flight after the drain timeout" << std::endl;
  if (http) http->stop();
  if (grpc) grpc->stop();
  if (metrics) metrics->stop();
  // What each model answered, so an operator (and the shutdown test) can check nothing was lost.
  for (const auto& m : core.repository().ready_models()) {
    const ServingStats st = m->serving->stats();
    std::cout << m->config.name << ": " << st.succeeded << " succeeded, " << st.failed << " failed";
    for (const auto& [code, n] : st.failures) std::cout << ", " << n << " " << status_code_name(code);
    std::cout << std::endl;
  }
  std::cout << "stopped" << std::endl;
  return 0;
}

}  // namespace

Runner add_serve_command(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* c = app.add_subcommand("serve", "Serve a model repository over KServe v2 (HTTP and gRPC)");
  c->add_option("--model-repository", f->repository, "Folder of models: NAME/[config.pbtxt], NAME/VERSION/model.onnx")
      ->required();
  // Help texts state the defaults of the options structs the flags are bound to.
  const serve::HttpOptions http_defaults;
  c->add_option("--host", f->http.host, "Address to listen on (default " + http_defaults.host + ")");
  const std::string port_note = "-1: off, 0: any free port";
  c->add_option("--http-port", f->http.port,
                "HTTP port; -1 turns HTTP off (default " + std::to_string(http_defaults.port) + ")")
      ->check(int_range(-1, 65535, port_note));
  c->add_option("--grpc-port", f->grpc.port,
                "gRPC port; -1 turns gRPC off (default " + std::to_string(serve::GrpcOptions{}.port) + ")")
      ->check(int_range(-1, 65535, port_note));
  c->add_option("--metrics-port", f->metrics_port, "Prometheus metrics port; -1 turns it off (default 8002)")
      ->check(int_range(-1, 65535, port_note));
  c->add_option("--model-control-mode", f->control_mode,
                "none: load every model at start; explicit: only --load-model, and load/unload over the API")
      ->check(CLI::IsMember({"none", "explicit"}));
  c->add_option("--load-model", f->load_models, "Model to load at start in explicit mode (repeatable)");
  c->add_option("--drain-timeout-s", f->drain_timeout_s, "At shutdown, how long to wait for requests in flight")
      ->check(seconds_range(true));
  c->add_option("--instances", f->repo.default_instances, "Instances per model unless its config.pbtxt says otherwise")
      ->check(int_range(1, runtime::kMaxInstances));
  c->add_option("--threads", f->repo.default_threads, "Intra-op threads per instance (default: cores / instances)")
      ->check(int_range(0, kMaxThreads, "0: cores / instances"));
  c->add_option("--http-threads", f->http.io_threads,
                "HTTP I/O threads (default " + std::to_string(http_defaults.io_threads) + ")")
      ->check(int_range(1, 64));
  c->add_option("--decode-threads", f->http.decode_threads,
                "Threads that decode large HTTP request bodies, off the I/O threads (default " +
                    std::to_string(http_defaults.decode_threads) + ")")
      ->check(int_range(1, 64));
  c->add_option("--max-json-body-mb", f->max_json_body_mb,
                "Largest JSON text of an HTTP request, in MiB; larger gets 413 (binary tensors are not "
                "counted; default " +
                    std::to_string(http_defaults.max_json_bytes >> 20) + ")")
      ->check(number_range(0.001, 4096.0, false));
  c->add_option("--max-request-mb", f->max_request_mb,
                "Largest request (HTTP body or gRPC message), in MiB; larger gets 413 or RESOURCE_EXHAUSTED (default " +
                    std::to_string(serve::ServerOptions{}.max_request_bytes >> 20) + ")")
      ->check(number_range(0.001, 4096.0, false));
  c->add_option("--max-connections", f->http.max_connections,
                "HTTP connections open at once (each port); more get 503 and are closed; 0 = no cap (default " +
                    std::to_string(http_defaults.max_connections) + ")")
      ->check(int_range(0, 1 << 20, "0: no cap"));
  c->add_option("--metrics-buckets-ms", f->metrics_buckets_ms,
                "Bounds of the latency histograms (request, queue, compute input/infer/output), in ms, "
                "comma-separated and increasing (default 0.1,0.25,0.5,1,2.5,...,10000)");
  c->add_option("--core-budget", f->repo.core_budget,
                "Cores the online controllers of all models share (active instances x threads stay within "
                "it); more than the machine has lets them oversubscribe (default 0: the usable cores)")
      ->check(int_range(0, 1 << 16, "0: the usable cores"));
  c->add_flag("--strict-core-budget", f->strict_core_budget,
              "Never lend cores one model's instances hold but leave idle to another model's controller "
              "(default: lend them while the instances leave whole cores idle, take them back when busy)");
  c->add_flag("--yield-to-inference,!--no-yield-to-inference", f->yield_to_inference,
              "Front-end threads (network, decoding, metrics) never preempt a running inference: they run as "
              "SCHED_BATCH, inference threads as usual (default on)");
  c->add_flag("--triton-metrics,!--no-triton-metrics", f->server.triton_metric_names,
              "Export Triton's nv_inference_* metric names beside streamline's (default on)");
  c->add_option("--log-verbose", f->log_verbose, "Verbose (debug) logging level; 0 = off (default 0)")
      ->check(int_range(0, 1000000));
  c->add_option("--log-info", f->log_info, "Log info messages (true/false; default false)");
  c->add_option("--log-warning", f->log_warning, "Log warnings (true/false; default true)");
  c->add_option("--log-error", f->log_error, "Log errors (true/false; default true)");
  c->add_option("--log-format", f->log_format, "Log line format: default or ISO8601")
      ->check(CLI::IsMember({"default", "ISO8601"}));
  c->add_option("--log-file", f->log_file, "Append the log to this file instead of stderr");
  return [f] { return serve_models(*f); };
}

}  // namespace streamline::tools
