#pragma once
// The dynamic batcher's decision: a pure function of the queue, the time and the policy.
//
//   std::vector<QueuedItem> view = ...;                  // queued requests, arrival order
//   Decision d = decide(view, clock.now_us(), policy);
//   for (size_t i : d.expired) reject(i);                // DeadlineExceeded
//   if (d.action == Decision::Action::kLaunch) run(d.launch);   // indices, batch order
//   else if (d.action == Decision::Action::kWait) sleep_until(d.wait_until_us);
//
// No threads, no clock, no state: the scheduler calls it whenever an instance is free, and tests
// call it with hand-made views.
//
// Rules, in order:
//  1. Expiry: with TimeoutAction::kReject an item whose deadline <= now is listed in `expired` and
//     takes no further part. With kDelay it stays, at a priority below every other level.
//  2. Order: live items by (effective priority, arrival).
//  3. Groups: items with equal shape_key, in that order; a group ranks by its first item. Items
//     of different keys are never batched together.
//  4. A group's batch takes its items in order while their rows fit in max_batch_size (the first
//     always fits; a later one that does not fit is skipped and makes the batch "full").
//  5. A group launches when its batch is full (rows >= max_batch_size, or an item was skipped),
//     when it holds the largest preferred batch size (cut to exactly that), or when its oldest
//     item has waited max_queue_delay_us (cut to the largest preferred size it holds, if any).
//  6. The first group (by rank) that launches wins. If none does: wait until the earliest time a
//     group's delay runs out or a live kReject deadline passes; with no live items: idle.

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "streamline/serving.h"

namespace streamline::runtime {

inline constexpr int64_t kNoDeadline = std::numeric_limits<int64_t>::max();

// One queued request as the batcher sees it.
struct QueuedItem {
  int64_t enqueue_us = 0;
  int64_t deadline_us = kNoDeadline;  // absolute; kNoDeadline = none
  uint32_t shape_key = 0;             // equal keys <=> same dtypes and non-batch dims
  int priority = 0;                   // 0 = highest
  int rows = 1;                       // first-dimension size this request brings
};

// Queued requests in arrival order.
using QueueView = std::span<const QueuedItem>;

struct Decision {
  enum class Action {
    kIdle,    // nothing to run; wait for a new request
    kWait,    // wait until wait_until_us (or a new request) and decide again
    kLaunch,  // run `launch` now
  };
  Action action = Action::kIdle;
  std::vector<size_t> launch;            // kLaunch: indices into the view, in batch order
  int64_t wait_until_us = 0;             // kWait
  std::vector<size_t> expired;           // any action: indices to answer DeadlineExceeded now
  int rows = 0;                          // kLaunch: rows in the batch
};
const char* decision_action_name(Decision::Action a);

[[nodiscard]] Decision decide(QueueView queue, int64_t now_us, const BatchPolicy& policy);

// InvalidArgument when the policy cannot be used (sizes out of range, negative delays ...).
[[nodiscard]] Status validate_policy(const BatchPolicy& policy);

}  // namespace streamline::runtime
