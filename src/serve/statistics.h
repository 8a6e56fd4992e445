#pragma once
// Triton's statistics extension as plain values: ServerCore::statistics() fills them, the HTTP
// front end writes them as JSON (ServerCore::statistics_json) and the gRPC one as
// ModelStatisticsResponse (fill_statistics in grpc_codec.h). Field names and units are the
// protocol's, so each front end copies them field by field.
//
//   Result<std::vector<ModelStatistics>> stats = core.statistics("resnet50");
//   uint64_t answered = (*stats)[0].inference_stats.success.count;

#include <cstdint>
#include <string>
#include <vector>

namespace streamline::serve {

// How many events, and how long they took in all.
struct StatisticDuration {
  uint64_t count = 0;
  uint64_t ns = 0;
};

// The executions of one batch size and the time they took.
struct BatchStatistics {
  int64_t batch_size = 0;
  StatisticDuration compute_input, compute_infer, compute_output;
};

// success: requests answered, with their server time; fail: requests refused or failed (their
// time is not kept: ns 0); queue and compute_*: of the successes. There is no response cache:
// cache_hit and cache_miss stay zero.
struct InferStatistics {
  StatisticDuration success, fail, queue, compute_input, compute_infer, compute_output, cache_hit, cache_miss;
};

struct ModelStatistics {
  std::string name;
  std::string version;
  uint64_t last_inference = 0;   // when the last response was delivered, ms since the epoch; 0 = never
  uint64_t inference_count = 0;  // rows run (a batch of n counts n)
  uint64_t execution_count = 0;  // runs of the model (batches)
  InferStatistics inference_stats;
  std::vector<BatchStatistics> batch_stats;  // by batch size, ascending
};

}  // namespace streamline::serve
