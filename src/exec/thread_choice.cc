#include "exec/thread_choice.h"

#include <algorithm>

namespace streamline::exec {

void ThreadChoice::reset(int requested) {
  requested_ = requested;
  current_ = 0;
  probing_ = false;
  runs_ = 0;
  period_ = kFirstSettle;
  probed_one_ = false;
  discard_ = false;
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

bool ThreadChoice::steady() const {
  if (samples_.size() < static_cast<size_t>(kFirstSettle)) return false;
  const auto [lo, hi] = std::minmax_element(samples_.begin(), samples_.end());
  return *hi <= kSteadySpread * *lo;
}

void ThreadChoice::record(double ms) {
  if (requested_ <= 1) return;
  ++runs_;
  if (!probing_) {
    samples_.push_back(ms);
    if (samples_.size() > static_cast<size_t>(kSettleRuns)) samples_.erase(samples_.begin());
    if (runs_ >= period_ && (runs_ >= kSettleRuns || !steady())) {
      probing_ = true;
      runs_ = 0;
      probe_.clear();
      ++probes_;
      const bool probing_one = current_ == 0;
      discard_ = !probing_one || !probed_one_;
    }
    return;
  }
  const bool counted = runs_ > 1 || !discard_;
  if (counted) probe_.push_back(ms);
  const double current = median(samples_);
  const bool hopeless = counted && ms >= kAbandon * current;
  if (static_cast<int>(probe_.size()) < kProbeRuns - 1 && !hopeless) return;
  if (current_ == 0) probed_one_ = true;
  probing_ = false;
  runs_ = 0;
  if (!hopeless && median(probe_) <= kMargin * current) {
    current_ = 1 - current_;
    samples_ = probe_;
    period_ = kSettleRuns;
  } else {
    // Runs that agree wait at least kSettleRuns before the next probe; disturbed ones keep the
    // short doubling from kFirstSettle.
    const int base = steady() ? std::max(period_, kSettleRuns) : period_;
    period_ = std::min(2 * base, kMaxPeriod);
  }
}

}  // namespace streamline::exec
