// perf's latency report (-f): perf_analyzer's columns, units and row order, and the server-side
// split computed from the statistics' change over the window.

#include "tools/perf_report.h"

#include <gtest/gtest.h>

#include <sstream>

#include "tools/perf_client.h"

namespace streamline::tools {
namespace {

const char kHeader[] =
    "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,"
    "Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency";

StepResult step(int concurrency, double throughput) {
  StepResult s;
  s.concurrency = concurrency;
  s.throughput = throughput;
  s.percentile_us = {{50, 900.7}, {90, 1000}, {95, 1100}, {99, 1500}};
  s.avg_latency_us = 1000;
  s.avg_send_us = 20.9;
  s.avg_recv_us = 10;
  ServerStats v;
  v.queue = {100, 100 * 300'000};          // 300 us per request
  v.compute_input = {100, 100 * 10'000};   // 10 us
  v.compute_infer = {100, 100 * 500'000};  // 500 us
  v.compute_output = {100, 100 * 5'000};   // 5 us
  s.server = v;
  return s;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

TEST(LatencyReport, PerfAnalyzerColumnsUnitsAndRowOrder) {
  const auto l = lines(latency_report_csv({step(4, 300.5), step(1, 120), step(2, 250)}, {}));
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[0], kHeader);
  // Rows by increasing throughput; microseconds, truncated; network = 1000 - 20.9 - 10 - 815.
  EXPECT_EQ(l[1], "1,120,20,154,300,10,500,5,10,900,1000,1100,1500");
  EXPECT_EQ(l[2].substr(0, 6), "2,250,");
  EXPECT_EQ(l[3].substr(0, 8), "4,300.5,");
}

TEST(LatencyReport, VerboseAddsAverageAndClientSplit) {
  ReportOptions o;
  o.verbose = true;
  auto l = lines(latency_report_csv({step(1, 100)}, o));
  EXPECT_EQ(l[0], std::string(kHeader) + ",Avg latency,request/response,response wait");
  EXPECT_EQ(l[1].substr(l[1].size() - 12), ",1000,30,970");
  o.percentile = 85;  // perf_analyzer drops the average when a percentile is asked for
  StepResult s = step(1, 100);
  s.percentile_us[85] = 1050;
  l = lines(latency_report_csv({s}, o));
  EXPECT_NE(l[0].find(",p50 latency,p85 latency,p90 latency,"), std::string::npos) << l[0];
  EXPECT_EQ(l[0].find("Avg latency"), std::string::npos) << l[0];
}

TEST(LatencyReport, RequestRateAndNoServerColumns) {
  ReportOptions o;
  o.request_rate = true;
  StepResult s = step(3, 99.5);
  s.request_rate = 100;
  s.server.reset();
  const auto l = lines(latency_report_csv({s}, o));
  EXPECT_EQ(l[0],
            "Request Rate,Inferences/Second,Client Send,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency");
  EXPECT_EQ(l[1], "100,99.5,20,10,900,1000,1100,1500");
}

TEST(LatencyReport, NetworkTimeIsNeverNegative) {
  StepResult s = step(1, 1);
  s.avg_latency_us = 500;  // less than the server says it spent: windows do not line up exactly
  EXPECT_EQ(network_us(s), 0.0);
}

TEST(ServerStatistics, ParsedFromTritonJsonAndDiffed) {
  const std::string body = R"({"model_stats": [
    {"name": "other", "version": "1", "inference_stats": {"queue": {"count": 9, "ns": 9}}},
    {"name": "m", "version": "1", "inference_count": 12, "execution_count": 3,
     "inference_stats": {"success": {"count": 10, "ns": 5000}, "queue": {"count": 10, "ns": "2000"},
                         "compute_infer": {"count": 10, "ns": 3000}}},
    {"name": "m", "version": "2", "inference_count": 1, "inference_stats": {"queue": {"count": 1, "ns": 7}}}]})";
  auto all = parse_statistics_json(body, "m", "");
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  EXPECT_EQ(all->inference_count, 13u);
  EXPECT_EQ(all->queue.count, 11u);
  EXPECT_EQ(all->queue.ns, 2007u);
  auto v1 = parse_statistics_json(body, "m", "1");
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(v1->queue.ns, 2000u);
  EXPECT_EQ(v1->compute_infer.ns, 3000u);
  EXPECT_EQ(parse_statistics_json(body, "m", "3").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(parse_statistics_json("[]", "m", "").status().code(), StatusCode::kInternal);

  ServerStats later = *v1, earlier;
  earlier.queue = {4, 1000};
  earlier.success = {20, 1};  // a reload reset the counter: the change is 0, not a wrapped number
  const ServerStats d = stats_delta(later, earlier);
  EXPECT_EQ(d.queue.count, 6u);
  EXPECT_EQ(d.queue.ns, 1000u);
  EXPECT_EQ(d.success.count, 0u);
  EXPECT_DOUBLE_EQ(stat_avg_us(d.queue), 1000.0 / 6 / 1000);
}

}  // namespace
}  // namespace streamline::tools
