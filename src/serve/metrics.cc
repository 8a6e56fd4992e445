// ServerCore::metrics_text: the Prometheus text exposition format (version 0.0.4). Each family is
// written whole (HELP, TYPE, then its samples for every model) as the format requires. streamline's
// own families come first, then (ServerOptions::triton_metric_names) Triton's nv_inference_* ones
// with Triton's names, labels and units, so dashboards and alerts made for Triton read them.

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <utility>

#include "serve/server_core.h"

namespace streamline::serve {
namespace {

using Labels = std::vector<std::pair<const char*, std::string>>;

// Label values escape backslash, double quote and newline.
std::string escape_label(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : "NaN";
}

struct ModelSample {
  std::string name, version;
  ServingStats stats;                       // since the server started (Repository::cumulative_stats)
  std::map<StatusCode, uint64_t> failures;  // runtime failures plus refusals at the front
  uint64_t rows = 0;                        // inferences: rows run, summed over executions
};

using HistogramField = const LatencyHistogram ServingStats::*;

Labels with(Labels l, const char* key, std::string value);

class Exposition {
 public:
  void family(const char* name, const char* type, const char* help) {
    out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  // One histogram's series: cumulative buckets in milliseconds (le), +Inf, _sum and _count.
  void histogram(const std::string& name, const Labels& labels, const LatencyHistogram& h) {
    uint64_t below = 0;
    for (size_t i = 0; i < h.bounds_us.size(); ++i) {
      below += i < h.counts.size() ? h.counts[i] : 0;
      sample(name + "_bucket", with(labels, "le", number(h.bounds_us[i] / 1000.0)), static_cast<double>(below));
    }
    sample(name + "_bucket", with(labels, "le", "+Inf"), static_cast<double>(h.count));
    sample(name + "_sum", labels, h.sum_us / 1000.0);
    sample(name + "_count", labels, static_cast<double>(h.count));
  }
  void sample(const std::string& name, const Labels& labels, double value) {
    out_ << name;
    if (!labels.empty()) {
      out_ << '{';
      for (size_t i = 0; i < labels.size(); ++i)
        out_ << (i ? "," : "") << labels[i].first << "=\"" << escape_label(labels[i].second) << '"';
      out_ << '}';
    }
    out_ << ' ' << number(value) << '\n';
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

Labels model_labels(const ModelSample& m) {
  return {{"model", m.name}, {"version", m.version}};
}

Labels with(Labels l, const char* key, std::string value) {
  l.emplace_back(key, std::move(value));
  return l;
}

// Triton's failure reasons: REJECTED (timed out or refused by the scheduler), CANCELED, BACKEND
// (the run failed), OTHER (refused before the model: unknown model, bad request, draining).
const char* triton_reason(StatusCode c) {
  switch (c) {
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kResourceExhausted:
      return "REJECTED";
    case StatusCode::kCancelled:
      return "CANCELED";
    case StatusCode::kInternal:
      return "BACKEND";
    default:
      return "OTHER";
  }
}

void counter_family(Exposition& x, const char* name, const char* help, const std::vector<ModelSample>& models,
                    const std::function<double(const ModelSample&)>& value) {
  x.family(name, "counter", help);
  for (const auto& m : models) x.sample(name, model_labels(m), value(m));
}

void histogram_family(Exposition& x, const char* name, const char* help, const std::vector<ModelSample>& models,
                      HistogramField field) {
  x.family(name, "histogram", help);
  for (const auto& m : models) x.histogram(name, model_labels(m), m.stats.*field);
}

// Triton's names (docs: user_guide/metrics.md): counters without _total, microsecond sums, the
// pending count, and the first-response histogram in milliseconds (one response per request
// here, so it is the request duration's).
void triton_families(Exposition& x, const std::vector<ModelSample>& models) {
  counter_family(x, "nv_inference_request_success", "Number of successful inference requests, all batch sizes", models,
                 [](const ModelSample& m) { return static_cast<double>(m.stats.succeeded); });
  x.family("nv_inference_request_failure", "counter", "Number of failed inference requests, all batch sizes");
  for (const auto& m : models) {
    std::map<std::string, uint64_t> by_reason{{"REJECTED", 0}, {"CANCELED", 0}, {"BACKEND", 0}, {"OTHER", 0}};
    for (const auto& [code, n] : m.failures) by_reason[triton_reason(code)] += n;
    for (const auto& [reason, n] : by_reason)
      x.sample("nv_inference_request_failure", with(model_labels(m), "reason", reason), static_cast<double>(n));
  }
  counter_family(x, "nv_inference_count", "Number of inferences performed (does not include cached requests)", models,
                 [](const ModelSample& m) { return static_cast<double>(m.rows); });
  counter_family(x, "nv_inference_exec_count",
                 "Number of model executions performed (does not include cached requests)", models,
                 [](const ModelSample& m) { return static_cast<double>(m.stats.batches); });
  counter_family(x, "nv_inference_request_duration_us", "Cumulative inference request duration in microseconds", models,
                 [](const ModelSample& m) { return m.stats.total.sum_us; });
  counter_family(x, "nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds", models,
                 [](const ModelSample& m) { return m.stats.queue.sum_us; });
  counter_family(x, "nv_inference_compute_input_duration_us", "Cumulative compute input duration in microseconds",
                 models, [](const ModelSample& m) { return m.stats.compute_input.sum_us; });
  counter_family(x, "nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds",
                 models, [](const ModelSample& m) { return m.stats.compute_infer.sum_us; });
  counter_family(x, "nv_inference_compute_output_duration_us",
                 "Cumulative inference compute output duration in microseconds", models,
                 [](const ModelSample& m) { return m.stats.compute_output.sum_us; });
  x.family("nv_inference_pending_request_count", "gauge",
           "Instantaneous number of pending requests awaiting execution per-model.");
  for (const auto& m : models)
    x.sample("nv_inference_pending_request_count", model_labels(m), static_cast<double>(m.stats.queued));
  histogram_family(x, "nv_inference_first_response_histogram_ms",
                   "Duration from request to first response in milliseconds", models, &ServingStats::total_hist);
}

// CPU seconds (user + system) from /proc/self/stat; -1 when unreadable.
double process_cpu_seconds() {
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return -1;
  std::istringstream fields(text.substr(paren + 1));
  std::string f;
  double utime = 0, stime = 0;
  // Fields after the name start at field 3 (state); utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::strtod(f.c_str(), nullptr);
    if (i == 15) stime = std::strtod(f.c_str(), nullptr);
  }
  const long ticks = sysconf(_SC_CLK_TCK);
  return ticks > 0 ? (utime + stime) / static_cast<double>(ticks) : -1;
}

// Resident set size from /proc/self/statm (second field, in pages); -1 when unreadable.
double process_resident_bytes() {
  std::ifstream in("/proc/self/statm");
  double size = 0, resident = -1;
  if (!(in >> size >> resident)) return -1;
  return resident * static_cast<double>(sysconf(_SC_PAGESIZE));
}

void summary(Exposition& x, const char* name, const char* help, const std::vector<ModelSample>& models,
             const LatencySummary ServingStats::*field) {
  x.family(name, "summary", help);
  for (const auto& m : models) {
    const LatencySummary& s = m.stats.*field;
    const double nan = std::nan("");
    const std::pair<const char*, double> qs[] = {{"0.5", s.p50_us}, {"0.9", s.p90_us}, {"0.99", s.p99_us}};
    for (const auto& [q, v] : qs) x.sample(name, with(model_labels(m), "quantile", q), s.count ? v : nan);
    x.sample(std::string(name) + "_sum", model_labels(m), s.sum_us);
    x.sample(std::string(name) + "_count", model_labels(m), static_cast<double>(s.count));
  }
}

}  // namespace

std::string ServerCore::metrics_text() const {
  // Pass 1: one snapshot per served model (its counters since the server started, reloads
  // included), merged with the refusals counted here.
  std::vector<ModelSample> models;
  std::map<StatusCode, uint64_t> refused;
  for (const auto& m : repo_.ready_models()) {
    ModelSample s;
    s.name = m->config.name;
    s.version = m->version;
    s.stats = repo_.cumulative_stats(*m);
    s.failures = s.stats.failures;
    for (const auto& [b, n] : s.stats.batch_size_hist) s.rows += static_cast<uint64_t>(b) * n;
    models.push_back(std::move(s));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, codes] : front_failures_) {
      for (const auto& [code, n] : codes) refused[code] += n;
      for (auto& m : models)
        if (m.name == name)
          for (const auto& [code, n] : codes) m.failures[code] += n;
    }
  }

  // Pass 2: the families.
  Exposition x;
  counter_family(x, "streamline_inference_request_success_total", "Inference requests answered with outputs.", models,
                 [](const ModelSample& m) { return static_cast<double>(m.stats.succeeded); });
  x.family("streamline_inference_request_failure_total", "counter",
           "Inference requests answered with an error, by status code (refusals included).");
  for (const auto& m : models)
    for (const auto& [code, n] : m.failures)
      x.sample("streamline_inference_request_failure_total", with(model_labels(m), "reason", status_code_name(code)),
               static_cast<double>(n));
  counter_family(x, "streamline_inference_admission_refused_total",
                 "Requests refused on arrival because the estimated queueing and run time exceeded their timeout "
                 "or the model's latency objective (counted in the failures too, as ResourceExhausted).",
                 models, [](const ModelSample& m) { return static_cast<double>(m.stats.refused_at_admission); });
  counter_family(x, "streamline_inference_count_total", "Rows inferred (a request of n rows counts n).", models,
                 [](const ModelSample& m) { return static_cast<double>(m.rows); });
  counter_family(x, "streamline_inference_exec_count_total", "Model executions (batches run).", models,
                 [](const ModelSample& m) { return static_cast<double>(m.stats.batches); });
  counter_family(x, "streamline_inference_request_duration_us_total",
                 "Microseconds from enqueue to response, summed over successful requests.", models,
                 [](const ModelSample& m) { return m.stats.total.sum_us; });
  counter_family(x, "streamline_inference_queue_duration_us_total",
                 "Microseconds spent queued, summed over successful requests.", models,
                 [](const ModelSample& m) { return m.stats.queue.sum_us; });
  counter_family(x, "streamline_inference_compute_duration_us_total",
                 "Microseconds spent computing (batch run incl. concat and split), summed over successful requests.",
                 models, [](const ModelSample& m) { return m.stats.compute.sum_us; });
  counter_family(x, "streamline_inference_compute_input_duration_us_total",
                 "Microseconds spent gathering a batch's inputs, summed over successful requests.", models,
                 [](const ModelSample& m) { return m.stats.compute_input.sum_us; });
  counter_family(x, "streamline_inference_compute_infer_duration_us_total",
                 "Microseconds spent running the model, summed over successful requests.", models,
                 [](const ModelSample& m) { return m.stats.compute_infer.sum_us; });
  counter_family(x, "streamline_inference_compute_output_duration_us_total",
                 "Microseconds spent splitting and copying outputs, summed over successful requests.", models,
                 [](const ModelSample& m) { return m.stats.compute_output.sum_us; });
  summary(x, "streamline_inference_request_duration_us",
          "Request latency (queue + compute) in microseconds; quantiles over the recent window.", models,
          &ServingStats::total);
  summary(x, "streamline_inference_queue_duration_us",
          "Queueing time in microseconds; quantiles over the recent window.", models, &ServingStats::queue);
  summary(x, "streamline_inference_compute_duration_us",
          "Compute time in microseconds; quantiles over the recent window.", models, &ServingStats::compute);
  histogram_family(x, "streamline_inference_request_duration_ms",
                   "Request latency (queue + compute) in milliseconds, successful requests.", models,
                   &ServingStats::total_hist);
  histogram_family(x, "streamline_inference_queue_duration_ms", "Queueing time in milliseconds.", models,
                   &ServingStats::queue_hist);
  histogram_family(x, "streamline_inference_compute_input_duration_ms",
                   "Compute input time (gathering the batch's inputs) in milliseconds.", models,
                   &ServingStats::compute_input_hist);
  histogram_family(x, "streamline_inference_compute_infer_duration_ms",
                   "Compute infer time (the model's run) in milliseconds.", models, &ServingStats::compute_infer_hist);
  histogram_family(x, "streamline_inference_compute_output_duration_ms",
                   "Compute output time (splitting and copying the outputs) in milliseconds.", models,
                   &ServingStats::compute_output_hist);
  {
    // Refusals answered without running, per model (also models no longer served, as counters do).
    std::lock_guard<std::mutex> lock(mu_);
    x.family("streamline_inference_refusal_duration_ms", "histogram",
             "Server time of requests refused without running (queue full, admission, shutting down), from the "
             "decoded request to its answer, in milliseconds.");
    for (const auto& [name, h] : refusal_us_)
      x.histogram("streamline_inference_refusal_duration_ms", {{"model", name}}, h);
  }
  x.family("streamline_inference_pending_requests", "gauge", "Requests waiting in the queue now.");
  for (const auto& m : models)
    x.sample("streamline_inference_pending_requests", model_labels(m), static_cast<double>(m.stats.queued));
  x.family("streamline_inference_batch_size", "histogram", "Rows per model execution.");
  for (const auto& m : models) {
    for (int le : {1, 2, 4, 8, 16, 32, 64}) {
      uint64_t below = 0;
      for (const auto& [b, n] : m.stats.batch_size_hist)
        if (b <= le) below += n;
      x.sample("streamline_inference_batch_size_bucket", with(model_labels(m), "le", std::to_string(le)),
               static_cast<double>(below));
    }
    x.sample("streamline_inference_batch_size_bucket", with(model_labels(m), "le", "+Inf"),
             static_cast<double>(m.stats.batches));
    x.sample("streamline_inference_batch_size_sum", model_labels(m), static_cast<double>(m.rows));
    x.sample("streamline_inference_batch_size_count", model_labels(m), static_cast<double>(m.stats.batches));
  }
  x.family("streamline_instance_busy_us_total", "counter", "Microseconds each instance spent running batches.");
  for (const auto& m : models)
    for (size_t i = 0; i < m.stats.instance_busy_us.size(); ++i)
      x.sample("streamline_instance_busy_us_total",
               {{"model", m.name}, {"version", m.version}, {"instance", std::to_string(i)}},
               static_cast<double>(m.stats.instance_busy_us[i]));
  // The online controller (models with latency_slo_ms): its decisions and the settings in force.
  x.family(
      "streamline_controller_decisions_total", "counter",
      "Changes the online controller made, by knob (queue_delay, preferred_batch, instances, threads) and direction.");
  for (const auto& m : models)
    for (const auto& [key, n] : m.stats.controller.decisions)
      x.sample("streamline_controller_decisions_total",
               {{"model", m.name}, {"version", m.version}, {"knob", key.first}, {"direction", key.second}},
               static_cast<double>(n));
  x.family("streamline_controller_active_instances", "gauge", "Instances taking batches now.");
  for (const auto& m : models)
    x.sample("streamline_controller_active_instances", model_labels(m),
             static_cast<double>(m.stats.controller.active_instances));
  x.family("streamline_controller_threads_per_instance", "gauge", "Intra-op threads of each active instance now.");
  for (const auto& m : models)
    x.sample("streamline_controller_threads_per_instance", model_labels(m),
             static_cast<double>(m.stats.controller.threads_per_instance));
  x.family("streamline_controller_queue_delay_us", "gauge", "Queue delay the batcher uses now, in microseconds.");
  for (const auto& m : models)
    x.sample("streamline_controller_queue_delay_us", model_labels(m),
             static_cast<double>(m.stats.controller.queue_delay_us));
  x.family("streamline_controller_preferred_batch", "gauge", "Preferred batch size in force now (0 = none).");
  for (const auto& m : models)
    x.sample("streamline_controller_preferred_batch", model_labels(m),
             static_cast<double>(m.stats.controller.preferred_batch));
  x.family("streamline_core_budget_cores", "gauge", "Cores the models' controllers share.");
  x.sample("streamline_core_budget_cores", {}, static_cast<double>(repo_.core_budget()->cores()));
  x.family("streamline_core_budget_held", "gauge", "Cores held now by the controlled models' active instances.");
  x.sample("streamline_core_budget_held", {}, static_cast<double>(repo_.core_budget()->held_by_others(nullptr)));
  x.family("streamline_core_budget_idle_cores", "gauge",
           "Cores the controlled models' instances left idle in their last control windows (lendable).");
  x.sample("streamline_core_budget_idle_cores", {}, repo_.core_budget()->idle_cores());
  x.family("streamline_model_ready", "gauge", "1 when the model is served, else 0.");
  for (const auto& e : repo_.index())
    x.sample("streamline_model_ready", {{"model", e.name}}, e.state == ModelState::kReady ? 1 : 0);
  x.family("streamline_server_refused_total", "counter",
           "Requests refused before reaching a model (unknown model, draining, shape), by status code.");
  for (const auto& [code, n] : refused)
    x.sample("streamline_server_refused_total", {{"reason", status_code_name(code)}}, static_cast<double>(n));
  x.family("streamline_server_in_flight", "gauge", "Requests accepted by the server and not yet answered.");
  x.sample("streamline_server_in_flight", {}, static_cast<double>(in_flight_.load()));
  if (options_.triton_metric_names) triton_families(x, models);
  const double cpu = process_cpu_seconds();
  if (cpu >= 0) {
    x.family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
    x.sample("process_cpu_seconds_total", {}, cpu);
  }
  const double rss = process_resident_bytes();
  if (rss >= 0) {
    x.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    x.sample("process_resident_memory_bytes", {}, rss);
  }
  return x.str();
}

}  // namespace streamline::serve
