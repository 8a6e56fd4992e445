#include "runtime/batcher.h"

#include <algorithm>
#include <set>
#include <string>

namespace streamline::runtime {
namespace {

// Keeps the longest prefix of `batch` whose rows do not exceed `cap` (at least one item).
int cut_batch(QueueView q, std::vector<size_t>* batch, int cap) {
  int rows = 0;
  size_t keep = 0;
  for (size_t idx : *batch) {
    const int r = std::max(1, q[idx].rows);
    if (keep > 0 && rows + r > cap) break;
    rows += r;
    ++keep;
  }
  batch->resize(keep);
  return rows;
}

}  // namespace

const char* timeout_action_name(TimeoutAction a) {
  switch (a) {
    case TimeoutAction::kReject:
      return "reject";
    case TimeoutAction::kDelay:
      return "delay";
  }
  return "?";
}

const char* decision_action_name(Decision::Action a) {
  switch (a) {
    case Decision::Action::kIdle:
      return "idle";
    case Decision::Action::kWait:
      return "wait";
    case Decision::Action::kLaunch:
      return "launch";
  }
  return "?";
}

Status validate_policy(const BatchPolicy& p) {
  if (p.max_batch_size < 1)
    return invalid_argument("max_batch_size must be >= 1, got " + std::to_string(p.max_batch_size));
  std::set<int> seen;
  for (int s : p.preferred_batch_sizes) {
    if (s < 1 || s > p.max_batch_size)
      return invalid_argument("preferred batch size " + std::to_string(s) +
                              " is outside [1, max_batch_size=" + std::to_string(p.max_batch_size) + "]");
    if (!seen.insert(s).second) return invalid_argument("preferred batch size " + std::to_string(s) + " given twice");
  }
  if (p.max_queue_delay_us < 0) return invalid_argument("max_queue_delay_us must be >= 0");
  if (p.priority_levels < 1) return invalid_argument("priority_levels must be >= 1");
  if (p.default_priority < 0 || p.default_priority >= p.priority_levels)
    return invalid_argument("default_priority " + std::to_string(p.default_priority) + " is outside [0, " +
                            std::to_string(p.priority_levels) + ")");
  if (p.queue.max_queue_size < 0) return invalid_argument("max_queue_size must be >= 0");
  if (p.queue.default_timeout_us < 0) return invalid_argument("default_timeout_us must be >= 0");
  return ok_status();
}

Decision decide(QueueView q, int64_t now_us, const BatchPolicy& p) {
  Decision d;
  const int levels = std::max(1, p.priority_levels);
  const int max_rows = std::max(1, p.max_batch_size);
  const bool reject = p.queue.timeout_action == TimeoutAction::kReject;
  int largest_pref = 0;
  for (int s : p.preferred_batch_sizes)
    if (s <= max_rows) largest_pref = std::max(largest_pref, s);

  // Pass 1: expiry and effective priorities. Timed-out kDelay items rank below every level.
  std::vector<std::pair<int, size_t>> live;  // (effective priority, index)
  live.reserve(q.size());
  int64_t wake = kNoDeadline;
  for (size_t i = 0; i < q.size(); ++i) {
    const QueuedItem& it = q[i];
    const bool late = it.deadline_us <= now_us;
    if (late && reject) {
      d.expired.push_back(i);
      continue;
    }
    int prio = std::clamp(it.priority, 0, levels - 1);
    if (late) prio = levels;
    if (!late && reject) wake = std::min(wake, it.deadline_us);
    live.emplace_back(prio, i);
  }
  if (live.empty()) return d;

  // Pass 2: priority first, arrival within a priority (indices are in arrival order).
  std::stable_sort(live.begin(), live.end(), [](const auto& a, const auto& b) { return a.first < b.first; });

  // Pass 3: one group per shape key, ranked by its best item; the first ready group launches.
  std::vector<char> grouped(live.size(), 0);
  std::vector<size_t> batch;
  for (size_t g = 0; g < live.size(); ++g) {
    if (grouped[g]) continue;
    const uint32_t key = q[live[g].second].shape_key;
    // Pass 4: fill this group's batch in order; skip what does not fit.
    batch.clear();
    int rows = 0;
    bool skipped = false;
    int64_t oldest = std::numeric_limits<int64_t>::max();
    for (size_t j = g; j < live.size(); ++j) {
      const size_t idx = live[j].second;
      if (grouped[j] || q[idx].shape_key != key) continue;
      grouped[j] = 1;
      const int r = std::max(1, q[idx].rows);
      if (batch.empty() || rows + r <= max_rows) {
        batch.push_back(idx);
        rows += r;
        oldest = std::min(oldest, q[idx].enqueue_us);
      } else {
        skipped = true;
      }
    }
    // Pass 5: launch now, or note when this group will be ready.
    const int64_t ready_at = add_saturating_us(oldest, p.max_queue_delay_us);
    int cap = 0;  // 0: the whole batch
    bool launch = false;
    if (rows >= max_rows || skipped) {
      launch = true;
    } else if (largest_pref > 0 && rows >= largest_pref) {
      launch = true;
      cap = largest_pref;
    } else if (now_us >= ready_at) {
      launch = true;
      for (int s : p.preferred_batch_sizes)
        if (s <= rows) cap = std::max(cap, s);
    } else {
      wake = std::min(wake, ready_at);
    }
    if (launch) {
      d.action = Decision::Action::kLaunch;
      d.rows = cap > 0 ? cut_batch(q, &batch, cap) : rows;
      d.launch = batch;
      return d;
    }
  }
  if (wake != kNoDeadline) {
    d.action = Decision::Action::kWait;
    d.wait_until_us = wake;
  }
  return d;
}

}  // namespace streamline::runtime
