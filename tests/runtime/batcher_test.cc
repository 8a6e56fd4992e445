// The batcher's pure decision function, on hand-made queue views (no threads, no clock).

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>

#include "runtime/batcher.h"

namespace streamline::runtime {
namespace {

using Action = Decision::Action;

QueuedItem item(int64_t enqueue_us, uint32_t key = 0, int priority = 0, int64_t deadline_us = kNoDeadline,
                int rows = 1) {
  QueuedItem q;
  q.enqueue_us = enqueue_us;
  q.shape_key = key;
  q.priority = priority;
  q.deadline_us = deadline_us;
  q.rows = rows;
  return q;
}

std::vector<QueuedItem> arrivals(int n, int64_t step_us = 0, uint32_t key = 0) {
  std::vector<QueuedItem> v;
  for (int i = 0; i < n; ++i) v.push_back(item(i * step_us, key));
  return v;
}

BatchPolicy policy(int max_batch, int64_t delay_us, std::vector<int> preferred = {}) {
  BatchPolicy p;
  p.max_batch_size = max_batch;
  p.max_queue_delay_us = delay_us;
  p.preferred_batch_sizes = std::move(preferred);
  return p;
}

struct Case {
  std::string name;
  std::vector<QueuedItem> queue;
  int64_t now_us;
  BatchPolicy policy;
  Action action;
  std::vector<size_t> launch;      // kLaunch
  int64_t wait_until_us = 0;       // kWait
  std::vector<size_t> expired = {};
  int rows = -1;                   // kLaunch; -1 = launch.size()
};

BatchPolicy with_priorities(BatchPolicy p, int levels) {
  p.priority_levels = levels;
  return p;
}
BatchPolicy with_delay_action(BatchPolicy p) {
  p.queue.timeout_action = TimeoutAction::kDelay;
  return p;
}

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"empty_is_idle", {}, 0, policy(8, 1000), Action::kIdle, {}});
  c.push_back({"launch_at_max", arrivals(8, 10), 70, policy(8, 1000), Action::kLaunch, {0, 1, 2, 3, 4, 5, 6, 7}});
  c.push_back({"launch_max_of_more", arrivals(10, 10), 90, policy(8, 1000), Action::kLaunch, {0, 1, 2, 3, 4, 5, 6, 7}});
  c.push_back({"wait_until_oldest_plus_delay", arrivals(3, 100), 500, policy(8, 1000), Action::kWait, {}, 1000});
  c.push_back({"launch_when_delay_reached", arrivals(3, 100), 1000, policy(8, 1000), Action::kLaunch, {0, 1, 2}});
  c.push_back({"launch_when_delay_passed", arrivals(3, 100), 5000, policy(8, 1000), Action::kLaunch, {0, 1, 2}});
  c.push_back({"zero_delay_launches_at_once", arrivals(1), 0, policy(8, 0), Action::kLaunch, {0}});
  c.push_back({"batching_off_one_at_a_time", arrivals(3), 0, policy(1, 0), Action::kLaunch, {0}});
  c.push_back({"batching_off_ignores_delay", arrivals(3), 0, policy(1, 5000), Action::kLaunch, {0}});
  c.push_back({"largest_preferred_launches", arrivals(5), 0, policy(8, 1000, {4}), Action::kLaunch, {0, 1, 2, 3}});
  c.push_back({"preferred_exact", arrivals(4), 0, policy(8, 1000, {2, 4}), Action::kLaunch, {0, 1, 2, 3}});
  c.push_back({"below_largest_preferred_waits", arrivals(3), 10, policy(8, 1000, {2, 4}), Action::kWait, {}, 1000});
  c.push_back({"delay_cuts_to_preferred", arrivals(3), 1000, policy(8, 1000, {2, 4}), Action::kLaunch, {0, 1}});
  c.push_back({"delay_no_preferred_held", arrivals(3), 1000, policy(8, 1000, {4}), Action::kLaunch, {0, 1, 2}});
  c.push_back({"never_mix_keys",
               {item(0, 0), item(1, 1), item(2, 0), item(3, 1), item(4, 0)},
               10,
               policy(8, 0),
               Action::kLaunch,
               {0, 2, 4}});
  c.push_back({"ready_group_of_other_key_launches",
               {item(0, 0), item(1, 1), item(2, 1), item(3, 1), item(4, 1)},
               10,
               policy(4, 1000),
               Action::kLaunch,
               {1, 2, 3, 4}});
  c.push_back({"groups_wait_for_earliest",
               {item(300, 0), item(100, 1)},
               200,
               policy(4, 1000),
               Action::kWait,
               {},
               1100});
  c.push_back({"priorities_first",
               {item(0, 0, 1), item(1, 0, 1), item(2, 0, 0), item(3, 0, 0)},
               10,
               with_priorities(policy(2, 0), 2),
               Action::kLaunch,
               {2, 3}});
  c.push_back({"lower_priority_fills_room",
               {item(0, 0, 1), item(1, 0, 0)},
               10,
               with_priorities(policy(4, 0), 2),
               Action::kLaunch,
               {1, 0}});
  c.push_back({"priority_clamped_to_lowest",
               {item(0, 0, 7), item(1, 0, 1), item(2, 0, 0)},
               10,
               with_priorities(policy(4, 0), 2),
               Action::kLaunch,
               {2, 0, 1}});
  c.push_back({"delay_counts_from_oldest_in_batch",
               {item(0, 0, 1), item(900, 0, 0)},
               950,
               with_priorities(policy(4, 1000), 2),
               Action::kWait,
               {},
               1000});
  c.push_back({"expired_reported_and_wait_bounded_by_deadline",
               {item(0, 0, 0, 50), item(0), item(0, 0, 0, 200)},
               100,
               policy(8, 1000),
               Action::kWait,
               {},
               200,
               {0}});
  c.push_back({"all_expired_is_idle", {item(0, 0, 0, 10), item(0, 0, 0, 20)}, 20, policy(8, 1000), Action::kIdle, {}, 0,
               {0, 1}});
  c.push_back({"expired_not_launched", {item(0, 0, 0, 10), item(0)}, 20, policy(8, 0), Action::kLaunch, {1}, 0, {0}});
  c.push_back({"delay_action_keeps_late_last",
               {item(0, 0, 0, 50), item(10)},
               100,
               with_delay_action(policy(1, 0)),
               Action::kLaunch,
               {1}});
  c.push_back({"delay_action_late_still_batched",
               {item(0, 0, 0, 50), item(10)},
               100,
               with_delay_action(policy(2, 0)),
               Action::kLaunch,
               {1, 0}});
  c.push_back({"delay_action_deadline_not_a_wake",
               {item(0, 0, 0, 50)},
               10,
               with_delay_action(policy(4, 1000)),
               Action::kWait,
               {},
               1000});
  c.push_back({"rows_fill_then_skip_means_full",
               {item(0, 0, 0, kNoDeadline, 3), item(1, 0, 0, kNoDeadline, 3), item(2, 0, 0, kNoDeadline, 3)},
               10,
               policy(8, 1000),
               Action::kLaunch,
               {0, 1},
               0,
               {},
               6});
  c.push_back({"rows_skip_then_smaller_fits",
               {item(0, 0, 0, kNoDeadline, 5), item(1, 0, 0, kNoDeadline, 4), item(2, 0, 0, kNoDeadline, 3)},
               10,
               policy(8, 1000),
               Action::kLaunch,
               {0, 2},
               0,
               {},
               8});
  c.push_back({"oversize_request_runs_alone",
               {item(0, 0, 0, kNoDeadline, 10)},
               0,
               policy(8, 1000),
               Action::kLaunch,
               {0},
               0,
               {},
               10});
  c.push_back({"rows_wait_below_max",
               {item(0, 0, 0, kNoDeadline, 2), item(1, 0, 0, kNoDeadline, 2)},
               10,
               policy(8, 1000),
               Action::kWait,
               {},
               1000});
  c.push_back({"infinite_delay_waits_for_a_full_batch", arrivals(3), 10,
               policy(8, std::numeric_limits<int64_t>::max()), Action::kIdle, {}});
  return c;
}

TEST(BatcherDecide, Table) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const Decision d = decide(c.queue, c.now_us, c.policy);
    EXPECT_EQ(decision_action_name(d.action), std::string(decision_action_name(c.action)));
    EXPECT_EQ(d.expired, c.expired);
    if (c.action == Action::kLaunch) {
      EXPECT_EQ(d.launch, c.launch);
      EXPECT_EQ(d.rows, c.rows >= 0 ? c.rows : static_cast<int>(c.launch.size()));
    } else {
      EXPECT_TRUE(d.launch.empty());
    }
    if (c.action == Action::kWait) {
      EXPECT_EQ(d.wait_until_us, c.wait_until_us);
    }
  }
}

TEST(BatcherDecide, IsPure) {
  const auto q = arrivals(5, 100);
  const BatchPolicy p = policy(4, 300, {2});
  for (int64_t now : {0, 250, 300, 1000}) {
    const Decision a = decide(q, now, p), b = decide(q, now, p);
    EXPECT_EQ(a.action, b.action);
    EXPECT_EQ(a.launch, b.launch);
    EXPECT_EQ(a.wait_until_us, b.wait_until_us);
  }
}

// Invariants over many random queues: launched items are distinct, live, of one key, fit the
// batch (or are a single oversize item); expiry is exactly the late items under kReject; a wait
// is in the future; a non-empty live queue never idles with a finite delay.
TEST(BatcherDecide, RandomInvariants) {
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 3000; ++iter) {
    BatchPolicy p;
    p.max_batch_size = 1 + static_cast<int>(rng() % 8);
    p.max_queue_delay_us = static_cast<int64_t>(rng() % 3) * 500;
    p.priority_levels = 1 + static_cast<int>(rng() % 3);
    p.queue.timeout_action = rng() % 2 ? TimeoutAction::kReject : TimeoutAction::kDelay;
    if (rng() % 2) p.preferred_batch_sizes = {1 + static_cast<int>(rng() % static_cast<unsigned>(p.max_batch_size))};
    const int n = static_cast<int>(rng() % 12);
    std::vector<QueuedItem> q;
    int64_t t = 0;
    for (int i = 0; i < n; ++i) {
      t += static_cast<int64_t>(rng() % 300);
      q.push_back(item(t, rng() % 3, static_cast<int>(rng() % 4), rng() % 3 ? kNoDeadline : t + rng() % 800,
                       1 + static_cast<int>(rng() % 3)));
    }
    const int64_t now = t + static_cast<int64_t>(rng() % 1500);
    const Decision d = decide(q, now, p);
    SCOPED_TRACE(iter);
    std::set<size_t> expired(d.expired.begin(), d.expired.end());
    for (size_t i = 0; i < q.size(); ++i) {
      const bool late = q[i].deadline_us <= now;
      EXPECT_EQ(expired.count(i) == 1, late && p.queue.timeout_action == TimeoutAction::kReject);
    }
    if (d.action == Action::kLaunch) {
      ASSERT_FALSE(d.launch.empty());
      std::set<size_t> seen;
      int rows = 0;
      for (size_t i : d.launch) {
        ASSERT_LT(i, q.size());
        EXPECT_TRUE(seen.insert(i).second);
        EXPECT_EQ(expired.count(i), 0u);
        EXPECT_EQ(q[i].shape_key, q[d.launch[0]].shape_key);
        rows += q[i].rows;
      }
      EXPECT_EQ(rows, d.rows);
      EXPECT_TRUE(rows <= p.max_batch_size || d.launch.size() == 1);
    } else if (d.action == Action::kWait) {
      EXPECT_GT(d.wait_until_us, now);
    } else {
      EXPECT_EQ(expired.size(), q.size());  // idle only when nothing live is left
    }
  }
}

TEST(BatcherPolicy, Validation) {
  EXPECT_TRUE(validate_policy(policy(8, 100, {2, 4})).ok());
  EXPECT_EQ(validate_policy(policy(0, 0)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(validate_policy(policy(4, 0, {8})).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(validate_policy(policy(4, 0, {2, 2})).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(validate_policy(policy(4, -1)).code(), StatusCode::kInvalidArgument);
  BatchPolicy p = policy(4, 0);
  p.default_priority = 3;
  EXPECT_EQ(validate_policy(p).code(), StatusCode::kInvalidArgument);
  p = policy(4, 0);
  p.queue.max_queue_size = -1;
  EXPECT_EQ(validate_policy(p).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace streamline::runtime
