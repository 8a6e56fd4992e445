#include "runtime/stats.h"

#include <algorithm>
#include <cmath>

namespace streamline::runtime {
namespace {

// Nearest-rank percentile of sorted samples.
double nearest_rank(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const size_t i = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(sorted.size()))) - 1;
  return sorted[i];
}

}  // namespace

void LatencyWindow::add(double v) {
  ring_[next_] = v;
  next_ = (next_ + 1) % ring_.size();
  filled_ = std::min(filled_ + 1, ring_.size());
  ++count_;
  sum_ += v;
}

LatencySummary LatencyWindow::summarize() const {
  LatencySummary s;
  s.count = count_;
  s.sum_us = sum_;
  std::vector<double> v(ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(filled_));
  std::sort(v.begin(), v.end());
  s.p50_us = nearest_rank(v, 50);
  s.p90_us = nearest_rank(v, 90);
  s.p99_us = nearest_rank(v, 99);
  return s;
}

void StatsRecorder::on_accepted() {
  std::lock_guard<std::mutex> lock(mu_);
  ++accepted_;
  ++in_flight_;
  ++queued_;
}

void StatsRecorder::on_batch(int rows, int requests) {
  std::lock_guard<std::mutex> lock(mu_);
  ++batches_;
  ++hist_[rows];
  queued_ -= requests;
}

void StatsRecorder::on_busy(int instance, int64_t us) {
  std::lock_guard<std::mutex> lock(mu_);
  if (instance < 0) return;
  if (static_cast<size_t>(instance) >= busy_.size()) busy_.resize(instance + 1, 0);
  busy_[instance] += us;
}

void StatsRecorder::on_dequeued(int requests) {
  std::lock_guard<std::mutex> lock(mu_);
  queued_ -= requests;
}

void StatsRecorder::on_response(const Status& status, bool accepted, int64_t queue_us, int64_t compute_us) {
  std::lock_guard<std::mutex> lock(mu_);
  if (accepted) --in_flight_;
  if (status.ok()) {
    ++succeeded_;
    queue_.add(static_cast<double>(queue_us));
    compute_.add(static_cast<double>(compute_us));
    total_.add(static_cast<double>(queue_us + compute_us));
  } else {
    ++failed_;
    ++failures_[status.code()];
  }
}

void StatsRecorder::on_admission_refused() {
  std::lock_guard<std::mutex> lock(mu_);
  ++admission_refused_;
}

ServingStats StatsRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  ServingStats s;
  s.accepted = accepted_;
  s.succeeded = succeeded_;
  s.failed = failed_;
  s.refused_at_admission = admission_refused_;
  s.failures = failures_;
  s.queue = queue_.summarize();
  s.compute = compute_.summarize();
  s.total = total_.summarize();
  s.batch_size_hist = hist_;
  s.batches = batches_;
  s.in_flight = in_flight_;
  s.queued = queued_;
  s.instance_busy_us = busy_;
  return s;
}

}  // namespace streamline::runtime
