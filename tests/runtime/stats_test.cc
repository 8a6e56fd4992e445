// Latency histograms of the serving statistics: bucket placement (upper bounds inclusive, as
// Prometheus' le), merging, and what the recorder fills from a response's timings.

#include "runtime/stats.h"

#include <gtest/gtest.h>

namespace streamline::runtime {
namespace {

TEST(LatencyHistogram, PlacesSamplesInUpperInclusiveBuckets) {
  LatencyHistogram h({100, 200, 500});
  for (double us : {50.0, 100.0, 100.5, 200.0, 499.0, 501.0, 1e9}) h.add(us);
  EXPECT_EQ(h.counts, (std::vector<uint64_t>{2, 2, 1, 2}));
  EXPECT_EQ(h.count, 7u);
  EXPECT_DOUBLE_EQ(h.sum_us, 50 + 100 + 100.5 + 200 + 499 + 501 + 1e9);
}

TEST(LatencyHistogram, MergesOnlyEqualBounds) {
  LatencyHistogram a({1, 2}), b({1, 2}), c({1, 3});
  a.add(0.5);
  b.add(1.5);
  b.add(9);
  EXPECT_TRUE(a.merge(b));
  EXPECT_EQ(a.counts, (std::vector<uint64_t>{1, 1, 1}));
  EXPECT_EQ(a.count, 3u);
  EXPECT_FALSE(a.merge(c));
  EXPECT_EQ(a.count, 3u);
}

TEST(StatsRecorder, RecordsComputePartsAndHistogramsOfSuccesses) {
  StatsRecorder s(16, {1000, 10000});
  InferResponse r;
  r.queue_us = 400;
  r.compute_us = 2000;
  r.compute_input_us = 100;
  r.compute_infer_us = 1800;
  r.compute_output_us = 100;
  s.on_accepted();
  s.on_response(ok_status(), /*accepted=*/true, r);
  s.on_response(invalid_argument("bad"), /*accepted=*/false, InferResponse{});
  s.on_batch_timing(4, 100, 1800, 100);
  const ServingStats st = s.snapshot();
  EXPECT_EQ(st.succeeded, 1u);
  EXPECT_EQ(st.failed, 1u);
  EXPECT_DOUBLE_EQ(st.compute_input.sum_us, 100);
  EXPECT_DOUBLE_EQ(st.compute_infer.sum_us, 1800);
  EXPECT_DOUBLE_EQ(st.compute_output.sum_us, 100);
  EXPECT_EQ(st.total_hist.counts, (std::vector<uint64_t>{0, 1, 0}));  // 2400 us
  EXPECT_EQ(st.queue_hist.counts, (std::vector<uint64_t>{1, 0, 0}));  // 400 us
  EXPECT_EQ(st.compute_infer_hist.count, 1u);
  ASSERT_EQ(st.batch_timing.count(4), 1u);
  EXPECT_EQ(st.batch_timing.at(4).runs, 1u);
  EXPECT_DOUBLE_EQ(st.batch_timing.at(4).infer_us, 1800);
}

TEST(StatsRecorder, DefaultBucketsWhenNoneGiven) {
  StatsRecorder s(4);
  EXPECT_EQ(s.snapshot().total_hist.bounds_us, kDefaultLatencyBucketsUs);
}

}  // namespace
}  // namespace streamline::runtime
