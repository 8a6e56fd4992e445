// ServerCore::metrics_text: the Prometheus text exposition format (version 0.0.4). Each family is
// written whole (HELP, TYPE, then its samples for every model) as the format requires.

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <fstream>
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
  ServingStats stats;
  std::map<StatusCode, uint64_t> failures;  // runtime failures plus refusals at the front
};

class Exposition {
 public:
  void family(const char* name, const char* type, const char* help) {
    out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
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
  // Pass 1: one snapshot per served model, merged with the refusals counted here.
  std::vector<ModelSample> models;
  std::map<StatusCode, uint64_t> refused;
  for (const auto& m : repo_.ready_models()) {
    ModelSample s;
    s.name = m->config.name;
    s.version = m->version;
    s.stats = m->serving->stats();
    s.failures = s.stats.failures;
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
  x.family("streamline_inference_request_success_total", "counter", "Inference requests answered with outputs.");
  for (const auto& m : models)
    x.sample("streamline_inference_request_success_total", model_labels(m), static_cast<double>(m.stats.succeeded));
  x.family("streamline_inference_request_failure_total", "counter",
           "Inference requests answered with an error, by status code (refusals included).");
  for (const auto& m : models)
    for (const auto& [code, n] : m.failures)
      x.sample("streamline_inference_request_failure_total", with(model_labels(m), "reason", status_code_name(code)),
               static_cast<double>(n));
  x.family("streamline_inference_admission_refused_total", "counter",
           "Requests refused on arrival because the estimated queueing and run time exceeded their timeout or "
           "the model's latency objective (counted in the failures too, as ResourceExhausted).");
  for (const auto& m : models)
    x.sample("streamline_inference_admission_refused_total", model_labels(m),
             static_cast<double>(m.stats.refused_at_admission));
  x.family("streamline_inference_count_total", "counter", "Rows inferred (a request of n rows counts n).");
  for (const auto& m : models) {
    uint64_t rows = 0;
    for (const auto& [b, n] : m.stats.batch_size_hist) rows += static_cast<uint64_t>(b) * n;
    x.sample("streamline_inference_count_total", model_labels(m), static_cast<double>(rows));
  }
  x.family("streamline_inference_exec_count_total", "counter", "Model executions (batches run).");
  for (const auto& m : models)
    x.sample("streamline_inference_exec_count_total", model_labels(m), static_cast<double>(m.stats.batches));
  const std::pair<const char*, const LatencySummary ServingStats::*> sums[] = {
      {"streamline_inference_request_duration_us_total", &ServingStats::total},
      {"streamline_inference_queue_duration_us_total", &ServingStats::queue},
      {"streamline_inference_compute_duration_us_total", &ServingStats::compute},
  };
  const char* sum_help[] = {"Microseconds from enqueue to response, summed over successful requests.",
                            "Microseconds spent queued, summed over successful requests.",
                            "Microseconds spent computing (batch run incl. concat and split), summed over "
                            "successful requests."};
  for (size_t i = 0; i < 3; ++i) {
    x.family(sums[i].first, "counter", sum_help[i]);
    for (const auto& m : models) x.sample(sums[i].first, model_labels(m), (m.stats.*(sums[i].second)).sum_us);
  }
  summary(x, "streamline_inference_request_duration_us",
          "Request latency (queue + compute) in microseconds; quantiles over the recent window.", models,
          &ServingStats::total);
  summary(x, "streamline_inference_queue_duration_us",
          "Queueing time in microseconds; quantiles over the recent window.", models, &ServingStats::queue);
  summary(x, "streamline_inference_compute_duration_us",
          "Compute time in microseconds; quantiles over the recent window.", models, &ServingStats::compute);
  x.family("streamline_inference_pending_requests", "gauge", "Requests waiting in the queue now.");
  for (const auto& m : models)
    x.sample("streamline_inference_pending_requests", model_labels(m), static_cast<double>(m.stats.queued));
  x.family("streamline_inference_batch_size", "histogram", "Rows per model execution.");
  for (const auto& m : models) {
    uint64_t rows = 0;
    for (const auto& [b, n] : m.stats.batch_size_hist) rows += static_cast<uint64_t>(b) * n;
    for (int le : {1, 2, 4, 8, 16, 32, 64}) {
      uint64_t below = 0;
      for (const auto& [b, n] : m.stats.batch_size_hist)
        if (b <= le) below += n;
      x.sample("streamline_inference_batch_size_bucket", with(model_labels(m), "le", std::to_string(le)),
               static_cast<double>(below));
    }
    x.sample("streamline_inference_batch_size_bucket", with(model_labels(m), "le", "+Inf"),
             static_cast<double>(m.stats.batches));
    x.sample("streamline_inference_batch_size_sum", model_labels(m), static_cast<double>(rows));
    x.sample("streamline_inference_batch_size_count", model_labels(m), static_cast<double>(m.stats.batches));
  }
  x.family("streamline_instance_busy_us_total", "counter", "Microseconds each instance spent running batches.");
  for (const auto& m : models)
    for (size_t i = 0; i < m.stats.instance_busy_us.size(); ++i)
      x.sample("streamline_instance_busy_us_total", {{"model", m.name}, {"instance", std::to_string(i)}},
               static_cast<double>(m.stats.instance_busy_us[i]));
  x.family("streamline_model_ready", "gauge", "1 when the model is served, else 0.");
  for (const auto& e : repo_.index())
    x.sample("streamline_model_ready", {{"model", e.name}}, e.state == ModelState::kReady ? 1 : 0);
  x.family("streamline_server_refused_total", "counter",
           "Requests refused before reaching a model (unknown model, draining, shape), by status code.");
  for (const auto& [code, n] : refused)
    x.sample("streamline_server_refused_total", {{"reason", status_code_name(code)}}, static_cast<double>(n));
  x.family("streamline_server_in_flight", "gauge", "Requests accepted by the server and not yet answered.");
  x.sample("streamline_server_in_flight", {}, static_cast<double>(in_flight_.load()));
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
