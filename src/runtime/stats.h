#pragma once
// Per-model serving counters: outcomes by status code, latency sums and sliding-window
// percentiles, the batch-size histogram and the requests in flight.
//
//   StatsRecorder stats(4096);
//   stats.on_accepted();
//   stats.on_batch(rows, requests);
//   stats.on_response(status, /*accepted=*/true, response);   // its queue and compute times
//   ServingStats s = stats.snapshot();          // any thread, while serving
//
// Thread-safe: every method takes one short lock. The windows are fixed-size rings allocated once.

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "streamline/serving.h"

namespace streamline::runtime {

// The last `capacity` samples of one quantity, plus the all-time count and sum.
class LatencyWindow {
 public:
  explicit LatencyWindow(size_t capacity) : ring_(std::max<size_t>(1, capacity)) {}
  void add(double v);
  // count/sum over all samples; percentiles over the window.
  LatencySummary summarize() const;

 private:
  std::vector<double> ring_;
  size_t next_ = 0;
  size_t filled_ = 0;
  uint64_t count_ = 0;
  double sum_ = 0;
};

class StatsRecorder {
 public:
  // `buckets_us`: the latency histograms' bounds (empty = kDefaultLatencyBucketsUs).
  explicit StatsRecorder(size_t window, std::vector<double> buckets_us = {});

  // A request entered the queue.
  void on_accepted();
  // A batch of `rows` rows was taken from the queue (requests leave the queue).
  void on_batch(int rows, int requests);
  // Instance `instance` spent `us` running a batch.
  void on_busy(int instance, int64_t us);
  // Requests left the queue without running (expired, cancelled).
  void on_dequeued(int requests);
  // A batch of `rows` rows ran; its compute input, infer and output times.
  void on_batch_timing(int rows, int64_t input_us, int64_t infer_us, int64_t output_us);
  // A response was delivered. `accepted` says whether the request had entered the queue (refusals
  // at submit have not); its times (queue_us, compute_us and the compute parts) are recorded for
  // successes only.
  void on_response(const Status& status, bool accepted, const InferResponse& timing);
  // A request was refused at admission (its on_response comes too).
  void on_admission_refused();

  ServingStats snapshot() const;

 private:
  mutable std::mutex mu_;
  uint64_t accepted_ = 0, succeeded_ = 0, failed_ = 0, batches_ = 0, admission_refused_ = 0;
  int64_t in_flight_ = 0, queued_ = 0;
  std::map<StatusCode, uint64_t> failures_;
  std::map<int, uint64_t> hist_;
  std::map<int, BatchTiming> batch_timing_;
  std::vector<int64_t> busy_;
  LatencyWindow queue_, compute_, total_, input_, infer_, output_;
  LatencyHistogram total_hist_, queue_hist_, input_hist_, infer_hist_, output_hist_;
};

}  // namespace streamline::runtime
