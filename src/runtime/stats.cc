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

}  // namespace streamline::runtime

namespace streamline {

LatencyHistogram::LatencyHistogram(std::vector<double> bounds)
    : bounds_us(std::move(bounds)), counts(bounds_us.size() + 1, 0) {}

void LatencyHistogram::add(double us) {
  // The first bound >= us: Prometheus' buckets are upper-inclusive (le).
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_us.begin(), bounds_us.end(), us) - bounds_us.begin());
  ++counts[i];
  ++count;
  sum_us += us;
}

bool LatencyHistogram::merge(const LatencyHistogram& other) {
  if (other.bounds_us != bounds_us || other.counts.size() != counts.size()) return false;
  for (size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
  count += other.count;
  sum_us += other.sum_us;
  return true;
}

}  // namespace streamline

namespace streamline::runtime {

StatsRecorder::StatsRecorder(size_t window, std::vector<double> buckets_us)
    : queue_(window),
      compute_(window),
      total_(window),
      input_(window),
      infer_(window),
      output_(window),
      total_hist_(buckets_us.empty() ? kDefaultLatencyBucketsUs : buckets_us),
      queue_hist_(total_hist_.bounds_us),
      input_hist_(total_hist_.bounds_us),
      infer_hist_(total_hist_.bounds_us),
      output_hist_(total_hist_.bounds_us) {}

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

void StatsRecorder::on_batch_timing(int rows, int64_t input_us, int64_t infer_us, int64_t output_us) {
  std::lock_guard<std::mutex> lock(mu_);
  BatchTiming& t = batch_timing_[rows];
  ++t.runs;
  t.input_us += static_cast<double>(input_us);
  t.infer_us += static_cast<double>(infer_us);
  t.output_us += static_cast<double>(output_us);
}

void StatsRecorder::on_response(const Status& status, bool accepted, const InferResponse& r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (accepted) --in_flight_;
  if (status.ok()) {
    ++succeeded_;
    const auto both = [](LatencyWindow& w, LatencyHistogram& h, int64_t us) {
      w.add(static_cast<double>(us));
      h.add(static_cast<double>(us));
    };
    both(queue_, queue_hist_, r.queue_us);
    compute_.add(static_cast<double>(r.compute_us));
    both(total_, total_hist_, r.queue_us + r.compute_us);
    both(input_, input_hist_, r.compute_input_us);
    both(infer_, infer_hist_, r.compute_infer_us);
    both(output_, output_hist_, r.compute_output_us);
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
  s.compute_input = input_.summarize();
  s.compute_infer = infer_.summarize();
  s.compute_output = output_.summarize();
  s.total_hist = total_hist_;
  s.queue_hist = queue_hist_;
  s.compute_input_hist = input_hist_;
  s.compute_infer_hist = infer_hist_;
  s.compute_output_hist = output_hist_;
  s.batch_size_hist = hist_;
  s.batch_timing = batch_timing_;
  s.batches = batches_;
  s.in_flight = in_flight_;
  s.queued = queued_;
  s.instance_busy_us = busy_;
  return s;
}

}  // namespace streamline::runtime
