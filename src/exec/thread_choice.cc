#include "exec/thread_choice.h"

#include <algorithm>

namespace streamline::exec {

void ThreadChoice::reset(int requested) {
  requested_ = requested;
  current_ = 0;
  probing_ = false;
  runs_ = 0;
  period_ = kFirstSettle;
  samples_.clear();
  probe_.clear();
}

int ThreadChoice::next(int requested) {
  if (requested != requested_) reset(requested);
  if (requested_ <= 1) return std::max(1, requested_);
  const int arm = probing_ ? 1 - current_ : current_;
  return arm == 0 ? requested_ : 1;
}

double ThreadChoice::median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

void ThreadChoice::record(double ms) {
  if (requested_ <= 1) return;
  ++runs_;
  if (!probing_) {
    samples_.push_back(ms);
    if (samples_.size() > static_cast<size_t>(kSettleRuns)) samples_.erase(samples_.begin());
    if (runs_ >= period_) {
      probing_ = true;
      runs_ = 0;
      probe_.clear();
      ++probes_;
    }
    return;
  }
  if (runs_ > 1) probe_.push_back(ms);  // the first probe run pays wake-ups and first builds
  const double current = median(samples_);
  const bool hopeless = runs_ > 1 && ms >= kAbandon * current;
  if (runs_ < kProbeRuns && !hopeless) return;
  probing_ = false;
  runs_ = 0;
  if (!hopeless && median(probe_) <= kMargin * current) {
    current_ = 1 - current_;
    samples_ = probe_;
    period_ = kSettleRuns;
  } else {
    period_ = std::min(2 * period_, kMaxPeriod);
  }
}

}  // namespace streamline::exec
