// Admission's estimate as a pure function: run times learnt per batch size, the wait behind the
// queue and the running batches, and the verdict against a timeout or a latency objective.

#include "runtime/admission.h"

#include <gtest/gtest.h>

namespace streamline::runtime {
namespace {

RunTimeModel learnt(int rows, int64_t us, int n = RunTimeModel::kMinObservations) {
  RunTimeModel m;
  for (int i = 0; i < n; ++i) m.observe(rows, us);
  return m;
}

TEST(RunTimeModelTest, LearnsPerBatchSizeAndInterpolates) {
  RunTimeModel m;
  EXPECT_EQ(m.run_us(4), 0);
  for (int i = 0; i < 10; ++i) {
    m.observe(1, 1000);
    m.observe(8, 5000);
  }
  EXPECT_DOUBLE_EQ(m.run_us(1), 1000);
  EXPECT_DOUBLE_EQ(m.run_us(8), 5000);
  EXPECT_DOUBLE_EQ(m.run_us(7), 5000);  // same bucket (5-8)
  EXPECT_GT(m.run_us(4), 1000);         // between the buckets seen
  EXPECT_LT(m.run_us(4), 5000);
  EXPECT_DOUBLE_EQ(m.run_us(16), 10000);  // beyond: scaled by rows
  // A slower run moves the mean part of the way.
  m.observe(1, 2000);
  EXPECT_GT(m.run_us(1), 1000);
  EXPECT_LT(m.run_us(1), 2000);
  EXPECT_EQ(m.observations(), 21);
}

TEST(AdmissionTest, AdmitsEverythingUntilRunsAreKnown) {
  AdmissionView v;
  v.rows_ahead = 1000;
  v.requests_ahead = 1000;
  v.busy_instances = 1;
  v.queue_budget_us = 1;
  EXPECT_TRUE(estimate_admission(v, learnt(1, 10'000, RunTimeModel::kMinObservations - 1)).admit);
  EXPECT_FALSE(estimate_admission(v, learnt(1, 10'000)).admit);
}

TEST(AdmissionTest, AFreeInstanceMeansNoWait) {
  AdmissionView v;
  v.instances = 2;
  v.busy_instances = 1;
  v.queue_budget_us = 1;
  const AdmissionEstimate e = estimate_admission(v, learnt(1, 10'000));
  EXPECT_TRUE(e.admit) << e.reason;
  EXPECT_EQ(e.wait_us, 0);
  EXPECT_DOUBLE_EQ(e.run_us, 10'000);
}

TEST(AdmissionTest, WaitCountsBatchesAheadSharedByInstances) {
  AdmissionView v;
  v.instances = 2;
  v.busy_instances = 2;
  v.max_batch = 4;
  v.rows_ahead = 16;  // 4 batches of 4
  v.requests_ahead = 16;
  v.queue_budget_us = 1'000'000;
  const AdmissionEstimate e = estimate_admission(v, learnt(4, 8'000));
  EXPECT_TRUE(e.admit);
  // (4 batches + half of the running ones' turn) x 8 ms / 2 instances.
  EXPECT_DOUBLE_EQ(e.wait_us, 4.5 * 8'000 / 2);
  v.queue_budget_us = 17'000;
  const AdmissionEstimate refused = estimate_admission(v, learnt(4, 8'000));
  EXPECT_FALSE(refused.admit);
  EXPECT_NE(refused.reason.find("18.0 ms"), std::string::npos) << refused.reason;
  EXPECT_NE(refused.reason.find("16 request(s) queued ahead on 2 instance(s), 2 busy"), std::string::npos)
      << refused.reason;
}

TEST(AdmissionTest, TheLatencyObjectiveCountsTheRunToo) {
  AdmissionView v;
  v.busy_instances = 0;
  v.latency_budget_us = 9'000;
  EXPECT_FALSE(estimate_admission(v, learnt(1, 10'000)).admit);  // the run alone is too long
  v.latency_budget_us = 11'000;
  EXPECT_TRUE(estimate_admission(v, learnt(1, 10'000)).admit);
  // No budget at all: always admitted.
  v.latency_budget_us = 0;
  v.rows_ahead = 1'000'000;
  v.busy_instances = 1;
  EXPECT_TRUE(estimate_admission(v, learnt(1, 10'000)).admit);
}

TEST(AdmissionTest, AnIdleModelAdmitsAProbeWhenItsRunTimesAreStale) {
  AdmissionView v;
  v.latency_budget_us = 5'000;
  const RunTimeModel slow = learnt(1, 10'000);
  v.idle_us = 1;
  EXPECT_FALSE(estimate_admission(v, slow).admit);  // just ran: the estimate stands
  v.idle_us = kStaleIdleUs - 1;
  EXPECT_FALSE(estimate_admission(v, slow).admit);
  v.idle_us = kStaleIdleUs;
  EXPECT_TRUE(estimate_admission(v, slow).admit);
  // Runs longer than a quarter of the idle time: four of them must pass first.
  const RunTimeModel slower = learnt(1, 50'000);
  EXPECT_FALSE(estimate_admission(v, slower).admit);
  v.idle_us = 200'000;
  EXPECT_TRUE(estimate_admission(v, slower).admit);
  // Only an idle model: with a batch running or queued ahead, the estimate decides.
  v.busy_instances = 1;
  EXPECT_FALSE(estimate_admission(v, slow).admit);
  v.busy_instances = 0;
  v.rows_ahead = 1;
  v.requests_ahead = 1;
  EXPECT_FALSE(estimate_admission(v, slow).admit);
}

}  // namespace
}  // namespace streamline::runtime
