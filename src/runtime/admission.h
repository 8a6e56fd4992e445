#pragma once
// Deadline-aware admission: whether a request can still finish within its budget, decided when
// it arrives, from the queue ahead of it and the run times seen so far. A request that cannot is
// refused at once (ResourceExhausted: HTTP 429, gRPC RESOURCE_EXHAUSTED, with the estimate in the
// message) instead of timing out in the queue, which costs the client its whole timeout and the
// server a queue slot.
//
//   RunTimeModel times;                    // learns from every run
//   times.observe(/*rows=*/4, /*run_us=*/8200);
//   AdmissionView v;  v.rows_ahead = 12;  v.instances = 2;  v.busy_instances = 2;  v.max_batch = 4;
//   v.rows = 1;  v.queue_budget_us = 20000;
//   AdmissionEstimate e = estimate_admission(v, times);
//   if (!e.admit) refuse(resource_exhausted(e.reason));
//
// Pure: no clock, no threads, no locks (the scheduler holds its own while it calls these).
// The estimate leans towards admitting: with fewer than kMinObservations runs seen it admits
// everything, a running batch counts as half done, and queue delays are not added. Nor can it
// lock a model out: refusals teach the run times nothing, so once every instance has sat idle
// with nothing queued for kStaleIdleUs (or four estimated runs, if longer) the next request is
// admitted whatever the estimate says, and its run refreshes the model.

#include <array>
#include <cstdint>
#include <string>

namespace streamline::runtime {

// Run time by batch rows: an exponentially weighted mean per power-of-two row bucket
// (1, 2, 3-4, 5-8, ...), read with linear interpolation between the buckets seen.
class RunTimeModel {
 public:
  static constexpr int kBuckets = 17;  // up to 65536 rows
  static constexpr int kMinObservations = 8;

  // One run of `rows` rows took `run_us`.
  void observe(int rows, int64_t run_us);
  // Estimated run time of a batch of `rows` rows; 0 when no run has been seen.
  double run_us(int rows) const;
  // Runs observed in all.
  int64_t observations() const { return observations_; }

 private:
  std::array<double, kBuckets> mean_us_{};
  std::array<int64_t, kBuckets> count_{};
  int64_t observations_ = 0;
};

// The queue as one arriving request sees it.
struct AdmissionView {
  int64_t rows_ahead = 0;      // rows queued that run before it (its priority or higher)
  int64_t requests_ahead = 0;  // requests queued that run before it
  int instances = 1;
  int busy_instances = 0;         // instances running a batch now
  int max_batch = 1;              // rows per run at most
  int rows = 1;                   // the request's own rows
  int64_t queue_budget_us = 0;    // its queueing timeout; 0 = none
  int64_t latency_budget_us = 0;  // its end-to-end objective (the model's SLO); 0 = none
  int64_t idle_us = 0;            // how long no instance has run and nothing was queued; 0 = busy now
};

// Idle this long, the run times are stale: the next request is admitted to measure them again.
inline constexpr int64_t kStaleIdleUs = 100'000;

struct AdmissionEstimate {
  bool admit = true;
  double wait_us = 0;  // estimated time in the queue
  double run_us = 0;   // estimated run of its batch
  std::string reason;  // when refused: what was estimated against which budget
};

AdmissionEstimate estimate_admission(const AdmissionView& v, const RunTimeModel& times);

}  // namespace streamline::runtime
