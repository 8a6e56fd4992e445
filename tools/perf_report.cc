#include "perf_report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "cli_common.h"

namespace streamline::tools {
namespace {

// perf_analyzer writes whole microseconds, truncated.
uint64_t us(double v) {
  return v > 0 ? static_cast<uint64_t>(v) : 0;
}

std::string load_text(const StepResult& s, const ReportOptions& o) {
  std::ostringstream t;
  if (o.request_rate)
    t << s.request_rate;
  else
    t << s.concurrency;
  return t.str();
}

}  // namespace

double stat_avg_us(const StatDuration& d) {
  return d.count == 0 ? 0.0 : static_cast<double>(d.ns) / static_cast<double>(d.count) / 1000.0;
}

double network_us(const StepResult& s) {
  if (!s.server) return 0;
  const ServerStats& v = *s.server;
  const double wait = s.avg_latency_us - s.avg_send_us - s.avg_recv_us;
  const double accounted = stat_avg_us(v.queue) + stat_avg_us(v.compute_input) + stat_avg_us(v.compute_infer) +
                           stat_avg_us(v.compute_output);
  return std::max(0.0, wait - accounted);
}

std::string latency_report_csv(const std::vector<StepResult>& steps, const ReportOptions& o) {
  const bool server = !steps.empty() &&
                      std::all_of(steps.begin(), steps.end(), [](const StepResult& s) { return s.server.has_value(); });
  std::ostringstream out;
  out << (o.request_rate ? "Request Rate" : "Concurrency") << ",Inferences/Second,Client Send,";
  if (server)
    out << "Network+Server Send/Recv,Server Queue,Server Compute Input,Server Compute Infer,Server Compute Output,";
  out << "Client Recv";
  if (!steps.empty())
    for (const auto& [p, v] : steps.front().percentile_us) out << ",p" << p << " latency";
  if (o.verbose) {
    if (o.percentile < 0) out << ",Avg latency";
    out << ",request/response,response wait";
  }
  out << "\n";
  std::vector<StepResult> sorted = steps;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const StepResult& a, const StepResult& b) { return a.throughput < b.throughput; });
  for (const StepResult& s : sorted) {
    out << load_text(s, o) << "," << s.throughput << "," << us(s.avg_send_us) << ",";
    if (server) {
      const ServerStats& v = *s.server;
      out << us(network_us(s)) << "," << us(stat_avg_us(v.queue)) << "," << us(stat_avg_us(v.compute_input)) << ","
          << us(stat_avg_us(v.compute_infer)) << "," << us(stat_avg_us(v.compute_output)) << ",";
    }
    out << us(s.avg_recv_us);
    for (const auto& [p, v] : s.percentile_us) out << "," << us(v);
    if (o.verbose) {
      const uint64_t send = us(s.avg_send_us), recv = us(s.avg_recv_us), total = us(s.avg_latency_us);
      if (o.percentile < 0) out << "," << total;
      out << "," << send + recv << "," << (total > send + recv ? total - send - recv : 0);
    }
    out << "\n";
  }
  return out.str();
}

Status write_latency_report(const std::string& path, const std::vector<StepResult>& steps, const ReportOptions& o) {
  std::ofstream f(path, std::ios::trunc);
  if (!f) return invalid_argument("--latency-report-file " + path + ": cannot open it for writing");
  f << latency_report_csv(steps, o);
  f.close();
  if (!f) return invalid_argument("--latency-report-file " + path + ": writing it failed");
  return ok_status();
}

std::string perf_json(const std::string& model, const std::string& protocol, const std::string& endpoint,
                      const std::vector<StepResult>& steps, const ReportOptions& o) {
  std::ostringstream j;
  j << "{\"model\": \"" << json_escape(model) << "\", \"protocol\": \"" << protocol << "\", \"url\": \""
    << json_escape(endpoint) << "\", \"steps\": [";
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepResult& s = steps[i];
    j << (i ? ", " : "") << "{";
    if (o.request_rate) j << "\"request_rate\": " << fmt(s.request_rate) << ", ";
    j << "\"concurrency\": " << s.concurrency << ", \"workers\": " << s.workers
      << ", \"throughput\": " << fmt(s.throughput) << ", \"latency_ms\": {";
    bool first = true;
    for (const auto& [p, v] : s.percentile_us) {
      j << (first ? "" : ", ") << "\"p" << p << "\": " << fmt(v / 1000.0, 4);
      first = false;
    }
    j << ", \"avg\": " << fmt(s.avg_latency_us / 1000.0, 4) << "}, \"client_us\": {\"send\": " << fmt(s.avg_send_us)
      << ", \"recv\": " << fmt(s.avg_recv_us) << "}";
    if (s.server) {
      const ServerStats& v = *s.server;
      j << ", \"server_us\": {\"queue\": " << fmt(stat_avg_us(v.queue))
        << ", \"compute_input\": " << fmt(stat_avg_us(v.compute_input))
        << ", \"compute_infer\": " << fmt(stat_avg_us(v.compute_infer))
        << ", \"compute_output\": " << fmt(stat_avg_us(v.compute_output)) << ", \"network\": " << fmt(network_us(s))
        << ", \"requests\": " << v.success.count << ", \"executions\": " << v.execution_count << "}";
    }
    j << ", \"requests\": " << s.requests << ", \"errors\": " << s.errors << "}";
  }
  j << "]}";
  return j.str();
}

std::string perf_csv(const std::vector<StepResult>& steps) {
  std::ostringstream c;
  c << "concurrency,throughput,p50_ms,p90_ms,p95_ms,p99_ms,requests,errors\n";
  auto ms = [](const StepResult& s, int p) {
    auto it = s.percentile_us.find(p);
    return fmt(it == s.percentile_us.end() ? 0.0 : it->second / 1000.0, 4);
  };
  for (const auto& s : steps)
    c << s.concurrency << "," << fmt(s.throughput) << "," << ms(s, 50) << "," << ms(s, 90) << "," << ms(s, 95) << ","
      << ms(s, 99) << "," << s.requests << "," << s.errors << "\n";
  return c.str();
}

void print_perf_table(const std::vector<StepResult>& steps, const ReportOptions& o) {
  std::vector<std::string> head = {o.request_rate ? "rate/s" : "concurrency", "throughput/s"};
  if (!steps.empty())
    for (const auto& [p, v] : steps.front().percentile_us) head.push_back("p" + std::to_string(p) + " ms");
  for (const char* h : {"avg ms", "server queue ms", "server compute ms", "requests", "errors"}) head.emplace_back(h);
  std::vector<std::vector<std::string>> rows = {head};
  for (const auto& s : steps) {
    std::vector<std::string> r = {o.request_rate ? fmt(s.request_rate, 1) : std::to_string(s.concurrency),
                                  fmt(s.throughput, 1)};
    for (const auto& [p, v] : s.percentile_us) r.push_back(fmt(v / 1000.0));
    r.push_back(fmt(s.avg_latency_us / 1000.0));
    if (s.server) {
      const ServerStats& v = *s.server;
      r.push_back(fmt(stat_avg_us(v.queue) / 1000.0));
      r.push_back(
          fmt((stat_avg_us(v.compute_input) + stat_avg_us(v.compute_infer) + stat_avg_us(v.compute_output)) / 1000.0));
    } else {
      r.insert(r.end(), {"-", "-"});
    }
    r.push_back(std::to_string(s.requests));
    r.push_back(std::to_string(s.errors));
    rows.push_back(std::move(r));
  }
  print_table(rows);
}

}  // namespace streamline::tools
