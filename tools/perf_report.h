#pragma once
// What `streamline perf` measured per step, and the reports it writes: the table, --json, --csv
// (ours), and -f / --latency-report-file, the CSV of Triton's perf_analyzer with its column
// names, order, units (microseconds) and row order (increasing throughput), so that sheets and
// dashboards made for perf_analyzer's files read ours:
//
//   Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,
//   Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,
//   p50 latency,p90 latency,p95 latency,p99 latency[,Avg latency,request/response,response wait]
//
// ("Request Rate" first with --request-rate-range; a pN column more with --percentile N; the
// last three with --verbose-csv, "Avg latency" only without --percentile; the five server columns
// only when the server's statistics could be read.)

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "perf_client.h"

namespace streamline::tools {

struct StepResult {
  int concurrency = 0;      // closed loop: requests kept in flight
  double request_rate = 0;  // open loop: requests per second asked for (0 in closed loop)
  int workers = 0;          // threads or slots that carried the requests
  double window_s = 0;      // measured time
  double throughput = 0;    // inferences/s (a request of batch B counts B)
  uint64_t requests = 0;    // answered inside the window, errors included
  uint64_t errors = 0;
  std::string first_error;
  std::map<int, double> percentile_us;  // p -> latency of the successful requests
  double avg_latency_us = 0, avg_send_us = 0, avg_recv_us = 0;
  std::optional<ServerStats> server;  // the statistics' change over the window, when readable
};

struct ReportOptions {
  bool request_rate = false;  // the load is --request-rate-range ("Request Rate" column)
  bool verbose = false;       // --verbose-csv
  int percentile = -1;        // --percentile, -1 when not given
};

// Average per request of a statistic, in microseconds (0 when nothing was counted).
double stat_avg_us(const StatDuration& d);
// perf_analyzer's "Network+Server Send/Recv": the client's wait less the server's queue and
// compute time, at least 0.
double network_us(const StepResult& s);

// The latency report's text (header and one line per step).
std::string latency_report_csv(const std::vector<StepResult>& steps, const ReportOptions& o);
// Writes it to `path`; InvalidArgument naming the path when it cannot be written.
[[nodiscard]] Status write_latency_report(const std::string& path, const std::vector<StepResult>& steps,
                                          const ReportOptions& o);

// One JSON object with the configuration and the steps.
std::string perf_json(const std::string& model, const std::string& protocol, const std::string& endpoint,
                      const std::vector<StepResult>& steps, const ReportOptions& o);
// Our own CSV on stdout (--csv): one header line, one line per step, in run order.
std::string perf_csv(const std::vector<StepResult>& steps);
// The table printed by default.
void print_perf_table(const std::vector<StepResult>& steps, const ReportOptions& o);

}  // namespace streamline::tools
