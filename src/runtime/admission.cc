#include "runtime/admission.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace streamline::runtime {
namespace {

// Weight of a new run in its bucket's mean.
constexpr double kAlpha = 0.2;

int bucket_of(int rows) {
  int b = 0;
  for (int r = std::max(1, rows) - 1; r > 0 && b + 1 < RunTimeModel::kBuckets; r >>= 1) ++b;
  return b;
}

// Rows a bucket stands for: its upper end (1, 2, 4, 8, ...).
double bucket_rows(int b) {
  return std::ldexp(1.0, b);
}

std::string ms(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", us / 1000);
  return buf;
}

}  // namespace

void RunTimeModel::observe(int rows, int64_t run_us) {
  if (run_us < 0) return;
  const int b = bucket_of(rows);
  mean_us_[b] = count_[b] == 0 ? static_cast<double>(run_us) : (1 - kAlpha) * mean_us_[b] + kAlpha * run_us;
  ++count_[b];
  ++observations_;
}

double RunTimeModel::run_us(int rows) const {
  if (observations_ == 0) return 0;
  const int b = bucket_of(rows);
  if (count_[b] > 0) return mean_us_[b];
  // The nearest buckets seen below and above; outside them, scale the nearest one by rows.
  int lo = b - 1, hi = b + 1;
  while (lo >= 0 && count_[lo] == 0) --lo;
  while (hi < kBuckets && count_[hi] == 0) ++hi;
  const double r = std::max(1, rows);
  if (lo >= 0 && hi < kBuckets) {
    const double t = (r - bucket_rows(lo)) / (bucket_rows(hi) - bucket_rows(lo));
    return mean_us_[lo] + std::clamp(t, 0.0, 1.0) * (mean_us_[hi] - mean_us_[lo]);
  }
  if (lo >= 0) return mean_us_[lo] * r / bucket_rows(lo);
  return mean_us_[hi] * r / bucket_rows(hi);
}

AdmissionEstimate estimate_admission(const AdmissionView& v, const RunTimeModel& times) {
  AdmissionEstimate e;
  if (times.observations() < RunTimeModel::kMinObservations) return e;
  if (v.queue_budget_us <= 0 && v.latency_budget_us <= 0) return e;
  const int instances = std::max(1, v.instances);
  const int max_batch = std::max(1, v.max_batch);
  const int64_t rows_ahead = std::max<int64_t>(0, v.rows_ahead);
  const double batches_ahead = std::ceil(static_cast<double>(rows_ahead) / max_batch);
  const double batch_us =
      times.run_us(static_cast<int>(std::min<int64_t>(max_batch, std::max<int64_t>(1, rows_ahead))));
  const int free_instances = std::max(0, instances - std::clamp(v.busy_instances, 0, instances));
  // Batches that must finish before one starts for this request: those queued ahead beyond the
  // free instances, plus (all busy) the running ones, counted as half done.
  double waits = batches_ahead - free_instances + (free_instances == 0 ? 0.5 : 1.0);
  if (batches_ahead < free_instances) waits = 0;
  e.wait_us = std::max(0.0, waits) * batch_us / instances;
  e.run_us = times.run_us(std::min(max_batch, std::max(1, v.rows)));
  // Stale: nothing has run for a while (refusals learn nothing), an idle instance costs nothing.
  if (v.rows_ahead == 0 && v.busy_instances == 0 && v.idle_us > 0 &&
      static_cast<double>(v.idle_us) >= std::max(static_cast<double>(kStaleIdleUs), 4 * e.run_us))
    return e;
  const std::string ahead = std::to_string(v.requests_ahead) + " request(s) queued ahead on " +
                            std::to_string(instances) + " instance(s), " + std::to_string(v.busy_instances) + " busy";
  if (v.queue_budget_us > 0 && e.wait_us > static_cast<double>(v.queue_budget_us)) {
    e.admit = false;
    e.reason = "refused at admission: the estimated queueing time of " + ms(e.wait_us) + " (" + ahead +
               ") exceeds the request's timeout of " + ms(static_cast<double>(v.queue_budget_us));
  } else if (v.latency_budget_us > 0 && e.wait_us + e.run_us > static_cast<double>(v.latency_budget_us)) {
    e.admit = false;
    e.reason = "refused at admission: the estimated latency of " + ms(e.wait_us + e.run_us) + " (" + ms(e.wait_us) +
               " queued, " + ahead + ", and " + ms(e.run_us) + " to run) exceeds the model's latency objective of " +
               ms(static_cast<double>(v.latency_budget_us));
  }
  return e;
}

}  // namespace streamline::runtime
