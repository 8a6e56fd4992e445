// The scheduler with a FakeClock and a fake executor: no inference, deterministic batches.

#include "runtime/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <limits>
#include <mutex>
#include <set>
#include <thread>

#include "core/cpu_set.h"

namespace streamline::runtime {
namespace {

using namespace std::chrono_literals;

// Records every batch; can hold chosen requests (by id) until released; answers each request
// with an output "id" = [id]. A batch holding a poisoned request fails as a whole, every request
// of it answered with that request's error (as one bad index fails a real run).
class FakeExecutor {
 public:
  explicit FakeExecutor(FakeClock* clock = nullptr, int64_t compute_us = 0) : clock_(clock), compute_us_(compute_us) {}

  BatchExecutor fn() {
    return [this](int instance, std::span<const InferRequest* const> reqs, std::span<InferResponse> out) {
      std::unique_lock<std::mutex> lock(mu_);
      std::vector<uint64_t> ids;
      for (const auto* r : reqs) ids.push_back(r->id);
      batches_.push_back(ids);
      instances_.push_back(instance);
      ++running_;
      cv_.notify_all();
      cv_.wait(lock, [&] {
        for (uint64_t id : ids)
          if (held_.count(id)) return false;
        return true;
      });
      --running_;
      if (clock_) clock_->advance_us(compute_us_);
      for (uint64_t id : ids)
        if (poisoned_.count(id)) {
          for (auto& r : out) r.status = invalid_argument("request " + std::to_string(id) + " has a bad index");
          return;
        }
      for (size_t i = 0; i < reqs.size(); ++i) {
        if (fail_) {
          out[i].status = internal_error("executor failed");
          continue;
        }
        out[i].outputs["id"] = Tensor::from_vector<int64_t>(Shape{1}, {static_cast<int64_t>(reqs[i]->id)});
      }
    };
  }
  void hold(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    held_.insert(id);
  }
  void release(uint64_t id) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_.erase(id);
    }
    cv_.notify_all();
  }
  void set_fail() { fail_ = true; }
  void set_compute_us(int64_t us) {
    std::lock_guard<std::mutex> lock(mu_);
    compute_us_ = us;
  }
  void poison(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    poisoned_.insert(id);
  }
  // Waits until `n` batches have started.
  bool wait_batches(size_t n, std::chrono::milliseconds timeout = 5000ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return batches_.size() >= n; });
  }
  bool wait_running(int n, std::chrono::milliseconds timeout = 5000ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return running_ >= n; });
  }
  std::vector<std::vector<uint64_t>> batches() {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_;
  }
  std::vector<int> instances() {
    std::lock_guard<std::mutex> lock(mu_);
    return instances_;
  }

 private:
  FakeClock* clock_;
  int64_t compute_us_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<uint64_t>> batches_;
  std::vector<int> instances_;
  std::set<uint64_t> held_;
  std::set<uint64_t> poisoned_;
  int running_ = 0;
  std::atomic<bool> fail_{false};
};

InferRequest req(uint64_t id, int priority = -1, int64_t timeout_us = 0) {
  InferRequest r;
  r.id = id;
  r.priority = priority;
  r.timeout_us = timeout_us;
  return r;
}

std::future<InferResponse> submit(Scheduler& s, InferRequest r, uint32_t key = 0, int rows = 1) {
  auto p = std::make_shared<std::promise<InferResponse>>();
  auto f = p->get_future();
  s.enqueue(std::move(r), rows, key, [p](InferResponse resp) { p->set_value(std::move(resp)); });
  return f;
}

bool ready(std::future<InferResponse>& f, std::chrono::milliseconds wait = 0ms) {
  return f.wait_for(wait) == std::future_status::ready;
}

struct Fixture {
  FakeClock clock;
  FakeExecutor exec;
  std::unique_ptr<Scheduler> sched;
  Fixture(BatchPolicy p, int instances = 1, int64_t compute_us = 0) : exec(&clock, compute_us) {
    SchedulerOptions so;
    so.serving.instances = instances;
    so.serving.batching = p;
    so.serving.clock = &clock;
    sched = std::make_unique<Scheduler>(so, exec.fn());
    EXPECT_TRUE(sched->start().ok());
  }
};

BatchPolicy policy(int max_batch, int64_t delay_us) {
  BatchPolicy p;
  p.max_batch_size = max_batch;
  p.max_queue_delay_us = delay_us;
  return p;
}

TEST(Scheduler, FullBatchLaunchesAtOnce) {
  Fixture fx(policy(4, 1'000'000));
  std::vector<std::future<InferResponse>> fs;
  for (uint64_t i = 0; i < 4; ++i) fs.push_back(submit(*fx.sched, req(i)));
  for (auto& f : fs) {
    InferResponse r = f.get();
    EXPECT_TRUE(r.status.ok());
    EXPECT_EQ(r.batch_size, 4);
    EXPECT_EQ(r.queue_us, 0);
  }
  EXPECT_EQ(fx.exec.batches(), (std::vector<std::vector<uint64_t>>{{0, 1, 2, 3}}));
}

TEST(Scheduler, WaitsForQueueDelayOnTheInjectedClock) {
  Fixture fx(policy(8, 1000));
  std::vector<std::future<InferResponse>> fs;
  for (uint64_t i = 0; i < 3; ++i) fs.push_back(submit(*fx.sched, req(i)));
  EXPECT_FALSE(ready(fs[0], 30ms));
  fx.clock.advance_us(999);
  fx.sched->wake();
  EXPECT_FALSE(ready(fs[0], 30ms));
  EXPECT_TRUE(fx.exec.batches().empty());
  fx.clock.advance_us(1);
  fx.sched->wake();
  for (auto& f : fs) {
    InferResponse r = f.get();
    EXPECT_TRUE(r.status.ok());
    EXPECT_EQ(r.batch_size, 3);
    EXPECT_EQ(r.queue_us, 1000);
  }
  EXPECT_EQ(fx.exec.batches(), (std::vector<std::vector<uint64_t>>{{0, 1, 2}}));
}

TEST(Scheduler, PendingBatchGrowsWhileInstancesAreBusy) {
  Fixture fx(policy(8, 0));
  fx.exec.hold(0);
  auto f0 = submit(*fx.sched, req(0));
  ASSERT_TRUE(fx.exec.wait_running(1));
  std::vector<std::future<InferResponse>> fs;
  for (uint64_t i = 1; i <= 5; ++i) fs.push_back(submit(*fx.sched, req(i)));
  EXPECT_FALSE(ready(fs[0], 20ms));
  fx.exec.release(0);
  EXPECT_EQ(f0.get().batch_size, 1);
  for (auto& f : fs) EXPECT_EQ(f.get().batch_size, 5);
  EXPECT_EQ(fx.exec.batches(), (std::vector<std::vector<uint64_t>>{{0}, {1, 2, 3, 4, 5}}));
  const ServingStats s = fx.sched->stats();
  EXPECT_EQ(s.batch_size_hist, (std::map<int, uint64_t>{{1, 1}, {5, 1}}));
  EXPECT_EQ(s.batches, 2u);
}

TEST(Scheduler, InstancesRunConcurrently) {
  Fixture fx(policy(1, 0), /*instances=*/2);
  fx.exec.hold(0);
  fx.exec.hold(1);
  auto f0 = submit(*fx.sched, req(0));
  auto f1 = submit(*fx.sched, req(1));
  ASSERT_TRUE(fx.exec.wait_running(2));
  const auto inst = fx.exec.instances();
  EXPECT_EQ(std::set<int>(inst.begin(), inst.end()), (std::set<int>{0, 1}));
  EXPECT_EQ(fx.sched->stats().in_flight, 2);
  fx.exec.release(0);
  fx.exec.release(1);
  EXPECT_TRUE(f0.get().status.ok());
  EXPECT_TRUE(f1.get().status.ok());
  EXPECT_EQ(fx.sched->stats().in_flight, 0);
}

TEST(Scheduler, QueueFullIsRefusedOnTheCallingThread) {
  BatchPolicy p = policy(1, 0);
  p.queue.max_queue_size = 2;
  Fixture fx(p);
  fx.exec.hold(0);
  auto f0 = submit(*fx.sched, req(0));
  ASSERT_TRUE(fx.exec.wait_running(1));
  auto f1 = submit(*fx.sched, req(1));
  auto f2 = submit(*fx.sched, req(2));
  auto f3 = submit(*fx.sched, req(3));
  ASSERT_TRUE(ready(f3));  // answered before submit returned
  EXPECT_EQ(f3.get().status.code(), StatusCode::kResourceExhausted);
  fx.exec.release(0);
  EXPECT_TRUE(f0.get().status.ok());
  EXPECT_TRUE(f1.get().status.ok());
  EXPECT_TRUE(f2.get().status.ok());
  const ServingStats s = fx.sched->stats();
  EXPECT_EQ(s.accepted, 3u);
  EXPECT_EQ(s.succeeded, 3u);
  EXPECT_EQ(s.failures.at(StatusCode::kResourceExhausted), 1u);
}

TEST(Scheduler, TimeoutRejects) {
  BatchPolicy p = policy(8, 1'000'000);
  p.queue.default_timeout_us = 500;
  Fixture fx(p);
  auto f0 = submit(*fx.sched, req(0));
  auto f1 = submit(*fx.sched, req(1, -1, 2000));  // own, longer budget
  fx.clock.advance_us(600);
  fx.sched->wake();
  EXPECT_EQ(f0.get().status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(ready(f1, 20ms));
  fx.clock.advance_us(1400);
  fx.sched->wake();
  EXPECT_EQ(f1.get().status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(fx.exec.batches().empty());
  const ServingStats s = fx.sched->stats();
  EXPECT_EQ(s.failures.at(StatusCode::kDeadlineExceeded), 2u);
  EXPECT_EQ(s.queued, 0);
  EXPECT_EQ(s.in_flight, 0);
}

TEST(Scheduler, TimeoutOverrideCanBeDisallowed) {
  BatchPolicy p = policy(1, 0);
  p.queue.allow_timeout_override = false;
  Fixture fx(p);
  fx.exec.hold(0);
  auto f0 = submit(*fx.sched, req(0));
  ASSERT_TRUE(fx.exec.wait_running(1));
  auto f1 = submit(*fx.sched, req(1, -1, 100));  // ignored: no default timeout
  fx.clock.advance_us(1000);
  fx.exec.release(0);
  EXPECT_TRUE(f0.get().status.ok());
  EXPECT_TRUE(f1.get().status.ok());
}

TEST(Scheduler, TimeoutDelayKeepsTheRequestBehindOthers) {
  BatchPolicy p = policy(1, 0);
  p.queue.timeout_action = TimeoutAction::kDelay;
  Fixture fx(p);
  fx.exec.hold(0);
  auto f0 = submit(*fx.sched, req(0));
  ASSERT_TRUE(fx.exec.wait_running(1));
  auto fa = submit(*fx.sched, req(10, -1, 100));
  auto fb = submit(*fx.sched, req(11));
  fx.clock.advance_us(200);  // request 10 is now late
  fx.exec.release(0);
  EXPECT_TRUE(fa.get().status.ok());
  EXPECT_TRUE(fb.get().status.ok());
  EXPECT_EQ(fx.exec.batches(), (std::vector<std::vector<uint64_t>>{{0}, {11}, {10}}));
}

TEST(Scheduler, HigherPriorityRunsFirst) {
  BatchPolicy p = policy(1, 0);
  p.priority_levels = 2;
  p.default_priority = 1;
  Fixture fx(p);
  fx.exec.hold(0);
  auto f0 = submit(*fx.sched, req(0));
  ASSERT_TRUE(fx.exec.wait_running(1));
  auto l1 = submit(*fx.sched, req(1));  // default: low
  auto l2 = submit(*fx.sched, req(2, 1));
  auto h = submit(*fx.sched, req(3, 0));
  fx.exec.release(0);
  for (auto* f : {&f0, &l1, &l2, &h}) EXPECT_TRUE(f->get().status.ok());
  EXPECT_EQ(fx.exec.batches(), (std::vector<std::vector<uint64_t>>{{0}, {3}, {1}, {2}}));
}

TEST(Scheduler, ShapeKeysAreNeverMixed) {
  Fixture fx(policy(4, 1'000'000));
  std::vector<std::future<InferResponse>> fs;
  for (uint64_t i = 0; i < 8; ++i) fs.push_back(submit(*fx.sched, req(i), static_cast<uint32_t>(i % 2)));
  for (auto& f : fs) EXPECT_EQ(f.get().batch_size, 4);
  auto b = fx.exec.batches();
  std::sort(b.begin(), b.end());
  EXPECT_EQ(b, (std::vector<std::vector<uint64_t>>{{0, 2, 4, 6}, {1, 3, 5, 7}}));
}

TEST(Scheduler, RowsCountTowardsTheBatch) {
  Fixture fx(policy(4, 1'000'000));
  auto a = submit(*fx.sched, req(0), 0, 3);
  auto b = submit(*fx.sched, req(1), 0, 1);
  EXPECT_EQ(a.get().batch_size, 4);
  EXPECT_EQ(b.get().batch_size, 4);
  EXPECT_EQ(fx.sched->stats().batch_size_hist, (std::map<int, uint64_t>{{4, 1}}));
}

TEST(Scheduler, ShutdownCancelAnswersQueuedRequests) {
  Fixture fx(policy(1, 0));
  fx.exec.hold(0);
  auto f0 = submit(*fx.sched, req(0));
  ASSERT_TRUE(fx.exec.wait_running(1));
  std::vector<std::future<InferResponse>> fs;
  for (uint64_t i = 1; i <= 3; ++i) fs.push_back(submit(*fx.sched, req(i)));
  std::thread stopper([&] { fx.sched->shutdown(ShutdownMode::kCancel); });
  for (auto& f : fs) EXPECT_EQ(f.get().status.code(), StatusCode::kCancelled);
  auto late = submit(*fx.sched, req(9));
  EXPECT_EQ(late.get().status.code(), StatusCode::kUnavailable);
  fx.exec.release(0);
  stopper.join();
  EXPECT_TRUE(f0.get().status.ok());  // a running batch finishes
  const ServingStats s = fx.sched->stats();
  EXPECT_EQ(s.failures.at(StatusCode::kCancelled), 3u);
  EXPECT_EQ(s.failures.at(StatusCode::kUnavailable), 1u);
  EXPECT_EQ(s.in_flight, 0);
}

TEST(Scheduler, ShutdownDrainRunsQueuedRequestsWithoutWaiting) {
  Fixture fx(policy(8, 1'000'000'000));
  std::vector<std::future<InferResponse>> fs;
  for (uint64_t i = 0; i < 3; ++i) fs.push_back(submit(*fx.sched, req(i)));
  fx.sched->shutdown(ShutdownMode::kDrain);
  for (auto& f : fs) {
    ASSERT_TRUE(ready(f));
    EXPECT_TRUE(f.get().status.ok());
  }
}

TEST(Scheduler, NeverStartedSchedulerCancelsOnShutdown) {
  FakeClock clock;
  FakeExecutor exec;
  SchedulerOptions so;
  so.serving.clock = &clock;
  Scheduler s(so, exec.fn());
  auto f = submit(s, req(0));
  s.shutdown(ShutdownMode::kDrain);
  EXPECT_EQ(f.get().status.code(), StatusCode::kCancelled);
}

TEST(Scheduler, FailedInstanceStartFailsStart) {
  FakeClock clock;
  FakeExecutor exec;
  SchedulerOptions so;
  so.serving.instances = 2;
  so.serving.clock = &clock;
  so.on_instance_start = [](int i) { return i == 1 ? unavailable("no device") : ok_status(); };
  Scheduler s(so, exec.fn());
  const Status st = s.start();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("instance 1"), std::string::npos);
}

// A server's front-end threads run in the background role and may start a model's scheduler (a
// load on request); its workers, which run the inferences, take the compute role all the same.
TEST(Scheduler, WorkersRunAsComputeThreadsWhoeverStartsThem) {
  FakeClock clock;
  FakeExecutor exec;
  std::mutex mu;
  std::vector<core::ThreadRole> roles;
  core::ThreadRole starter = core::ThreadRole::kCompute;
  std::thread front_end([&] {
    ASSERT_TRUE(core::set_current_thread_role(core::ThreadRole::kBackground));
    starter = core::current_thread_role();
    SchedulerOptions so;
    so.serving.instances = 2;
    so.serving.clock = &clock;
    so.on_instance_start = [&](int) {
      std::lock_guard<std::mutex> lock(mu);
      roles.push_back(core::current_thread_role());
      return ok_status();
    };
    Scheduler s(so, exec.fn());
    ASSERT_TRUE(s.start().ok());
    s.shutdown(ShutdownMode::kDrain);
  });
  front_end.join();
  EXPECT_EQ(starter, core::ThreadRole::kBackground);
  ASSERT_EQ(roles.size(), 2u);
  for (core::ThreadRole r : roles) EXPECT_EQ(r, core::ThreadRole::kCompute);
}

TEST(Scheduler, PreserveOrderingDeliversInSubmissionOrder) {
  BatchPolicy p = policy(1, 0);
  p.preserve_ordering = true;
  Fixture fx(p, /*instances=*/2);
  fx.exec.hold(0);
  std::mutex mu;
  std::vector<uint64_t> order;
  auto cb = [&](InferResponse r) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(r.id);
  };
  fx.sched->enqueue(req(0), 1, 0, cb);
  ASSERT_TRUE(fx.exec.wait_running(1));
  fx.sched->enqueue(req(1), 1, 0, cb);
  fx.sched->enqueue(req(2), 1, 0, cb);
  // Instance 0 is held with request 0, so instance 1 runs 1 and then 2; a worker finishes (and would
  // deliver) a batch's responses before it takes the next batch, so once the third batch has started,
  // request 1's response has been handed to the scheduler.
  ASSERT_TRUE(fx.exec.wait_batches(3));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(order.empty());  // 1 finished but waits for 0
  }
  fx.exec.release(0);
  fx.sched->shutdown(ShutdownMode::kDrain);
  EXPECT_EQ(order, (std::vector<uint64_t>{0, 1, 2}));
}

TEST(Scheduler, ExecutorErrorsAreResponses) {
  Fixture fx(policy(2, 0));
  fx.exec.set_fail();
  auto f = submit(*fx.sched, req(0));
  EXPECT_EQ(f.get().status.code(), StatusCode::kInternal);
  EXPECT_EQ(fx.sched->stats().failures.at(StatusCode::kInternal), 1u);
}

TEST(Scheduler, AFailedBatchIsRetriedRequestByRequest) {
  Fixture fx(policy(4, 1'000'000), 1, /*compute_us=*/100);
  fx.exec.poison(1);
  fx.exec.poison(3);
  std::vector<std::future<InferResponse>> fs;
  for (uint64_t i = 0; i < 4; ++i) fs.push_back(submit(*fx.sched, req(i)));  // one full batch
  std::vector<InferResponse> rs;
  for (auto& f : fs) rs.push_back(f.get());
  for (uint64_t i : {0, 2}) {
    ASSERT_TRUE(rs[i].status.ok()) << i << ": " << rs[i].status.to_string();
    EXPECT_EQ(rs[i].outputs.at("id").data<int64_t>()[0], static_cast<int64_t>(i));
    EXPECT_EQ(rs[i].batch_size, 1);                                    // it ran alone in the end
    EXPECT_EQ(rs[i].compute_us, static_cast<int64_t>(100 * (i + 2)));  // the failed batch, the runs alone so far
  }
  for (uint64_t i : {1, 3}) {  // each bad request gets its own error, not the other's
    EXPECT_EQ(rs[i].status.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(rs[i].status.message(), "request " + std::to_string(i) + " has a bad index");
    EXPECT_EQ(rs[i].id, i);
  }
  EXPECT_EQ(fx.exec.batches(), (std::vector<std::vector<uint64_t>>{{0, 1, 2, 3}, {0}, {1}, {2}, {3}}));
  const ServingStats s = fx.sched->stats();
  EXPECT_EQ(s.succeeded, 2u);
  EXPECT_EQ(s.failures.at(StatusCode::kInvalidArgument), 2u);
  EXPECT_EQ(s.batch_size_hist, (std::map<int, uint64_t>{{1, 4}, {4, 1}}));
  EXPECT_EQ(s.queued, 0);
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_EQ(s.instance_busy_us, (std::vector<int64_t>{500}));
}

TEST(Scheduler, RequestsFailingAloneToo) {
  Fixture fx(policy(2, 1'000'000));
  fx.exec.set_fail();  // every run fails: the retry answers each request with its own failure
  auto a = submit(*fx.sched, req(0));
  auto b = submit(*fx.sched, req(1));
  EXPECT_EQ(a.get().status.code(), StatusCode::kInternal);
  EXPECT_EQ(b.get().status.code(), StatusCode::kInternal);
  EXPECT_EQ(fx.exec.batches(), (std::vector<std::vector<uint64_t>>{{0, 1}, {0}, {1}}));
}

TEST(Scheduler, TimeoutsNearInt64MaxSaturate) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  BatchPolicy p = policy(1, 0);
  Fixture fx(p);
  fx.clock.set_us(5'000'000);  // enqueue time + timeout would wrap past INT64_MAX
  fx.exec.hold(0);
  auto f0 = submit(*fx.sched, req(0));
  ASSERT_TRUE(fx.exec.wait_running(1));
  auto f1 = submit(*fx.sched, req(1, -1, kMax));
  auto f2 = submit(*fx.sched, req(2, -1, kMax - 1));
  auto f3 = submit(*fx.sched, req(3, -1, kMax - 5'000'000));  // exactly INT64_MAX: no deadline
  auto f4 = submit(*fx.sched, req(4, -1, kMax / 2));          // a real deadline, far ahead
  fx.clock.advance_us(3'600'000'000);                         // an hour later, still queued
  fx.sched->wake();
  for (auto* f : {&f1, &f2, &f3, &f4}) EXPECT_FALSE(ready(*f, 10ms));
  fx.exec.release(0);
  for (auto* f : {&f0, &f1, &f2, &f3, &f4}) {
    const InferResponse r = f->get();
    EXPECT_TRUE(r.status.ok()) << r.id << ": " << r.status.to_string();
  }
  EXPECT_EQ(fx.sched->stats().failures.count(StatusCode::kDeadlineExceeded), 0u);
}

TEST(Scheduler, DefaultTimeoutNearInt64MaxSaturates) {
  BatchPolicy p = policy(1, 0);
  p.queue.default_timeout_us = std::numeric_limits<int64_t>::max();
  Fixture fx(p);
  fx.clock.set_us(1'000'000);
  auto f = submit(*fx.sched, req(0));
  EXPECT_TRUE(f.get().status.ok());
}

TEST(Scheduler, StatsTimesFollowTheClock) {
  Fixture fx(policy(2, 500), 1, /*compute_us=*/300);
  auto a = submit(*fx.sched, req(0));
  fx.clock.advance_us(100);
  auto b = submit(*fx.sched, req(1));  // full: launches at t=100
  const InferResponse ra = a.get(), rb = b.get();
  EXPECT_EQ(ra.queue_us, 100);
  EXPECT_EQ(rb.queue_us, 0);
  EXPECT_EQ(ra.compute_us, 300);
  const ServingStats s = fx.sched->stats();
  EXPECT_EQ(s.queue.count, 2u);
  EXPECT_DOUBLE_EQ(s.queue.sum_us, 100);
  EXPECT_DOUBLE_EQ(s.compute.sum_us, 600);
  EXPECT_DOUBLE_EQ(s.total.p99_us, 400);
  EXPECT_DOUBLE_EQ(s.compute.p50_us, 300);
}

// Every submitted request gets exactly one response, whatever the outcome, from many threads.
TEST(Scheduler, ConcurrentSubmittersEachGetOneResponse) {
  BatchPolicy p = policy(8, 200);
  p.queue.max_queue_size = 64;
  p.queue.default_timeout_us = 50'000;
  SchedulerOptions so;
  so.serving.instances = 2;
  so.serving.batching = p;  // real clock
  FakeExecutor exec;
  Scheduler sched(so, exec.fn());
  ASSERT_TRUE(sched.start().ok());
  constexpr int kThreads = 8, kPerThread = 200;
  std::vector<std::atomic<int>> answers(kThreads * kPerThread);
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const uint64_t id = static_cast<uint64_t>(t * kPerThread + i);
        sched.enqueue(req(id, i % 2), 1, static_cast<uint32_t>(i % 3), [&, id](InferResponse r) {
          answers[id].fetch_add(1);
          if (r.id != id) failed.fetch_add(1000000);
          (r.status.ok() ? ok : failed).fetch_add(1);
        });
      }
    });
  for (auto& t : ts) t.join();
  sched.shutdown(ShutdownMode::kDrain);
  for (size_t i = 0; i < answers.size(); ++i) ASSERT_EQ(answers[i].load(), 1) << "request " << i;
  EXPECT_EQ(ok.load() + failed.load(), kThreads * kPerThread);
  const ServingStats s = sched.stats();
  EXPECT_EQ(s.succeeded, static_cast<uint64_t>(ok.load()));
  EXPECT_EQ(s.failed, static_cast<uint64_t>(failed.load()));
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_EQ(s.queued, 0);
  uint64_t rows = 0;
  for (const auto& [size, n] : s.batch_size_hist) {
    EXPECT_LE(size, 8);
    rows += static_cast<uint64_t>(size) * n;
  }
  EXPECT_EQ(rows, s.succeeded);
}

// Deadline-aware admission: after enough runs to know their length (10 ms each on the fake
// clock), a request that would wait behind a held batch and five queued ones (about 55 ms) is
// refused at once when its timeout is 20 ms, with the estimate in the message; one with 100 ms, or
// with no timeout, is queued and answered. With admission off the same request waits and times out.
TEST(Scheduler, AdmissionRefusesWhatCannotStartInTime) {
  for (bool admission : {true, false}) {
    BatchPolicy p = policy(1, 0);
    p.queue.admission = admission;
    Fixture fx(p, /*instances=*/1, /*compute_us=*/10'000);
    for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(submit(*fx.sched, req(i)).get().status.ok());
    fx.exec.hold(100);
    auto running = submit(*fx.sched, req(100));
    ASSERT_TRUE(fx.exec.wait_running(1));
    std::vector<std::future<InferResponse>> queued;
    for (uint64_t i = 101; i <= 105; ++i) queued.push_back(submit(*fx.sched, req(i)));
    auto tight = submit(*fx.sched, req(200, -1, /*timeout_us=*/20'000));
    auto loose = submit(*fx.sched, req(201, -1, /*timeout_us=*/100'000));
    auto none = submit(*fx.sched, req(202));
    if (admission) {
      ASSERT_TRUE(ready(tight)) << "refused on the submitting thread";
      const InferResponse r = tight.get();
      EXPECT_EQ(r.status.code(), StatusCode::kResourceExhausted) << r.status.to_string();
      EXPECT_NE(r.status.message().find("refused at admission"), std::string::npos) << r.status.message();
      EXPECT_NE(r.status.message().find("5 request(s) queued ahead"), std::string::npos) << r.status.message();
      EXPECT_NE(r.status.message().find("timeout of 20.0 ms"), std::string::npos) << r.status.message();
      EXPECT_EQ(fx.sched->stats().refused_at_admission, 1u);
    } else {
      EXPECT_FALSE(ready(tight, 20ms));
    }
    EXPECT_FALSE(ready(loose, 20ms));
    fx.exec.release(100);
    EXPECT_TRUE(running.get().status.ok());
    for (auto& f : queued) EXPECT_TRUE(f.get().status.ok());
    if (!admission) {
      // Five runs of 10 ms passed before it could start: it timed out in the queue.
      EXPECT_EQ(tight.get().status.code(), StatusCode::kDeadlineExceeded);
      EXPECT_EQ(fx.sched->stats().refused_at_admission, 0u);
    }
    EXPECT_TRUE(loose.get().status.ok());
    EXPECT_TRUE(none.get().status.ok());
  }
}

// The model's latency objective: a request whose queueing plus run would exceed it is refused even
// without a timeout of its own.
TEST(Scheduler, AdmissionHoldsRequestsToTheLatencyObjective) {
  BatchPolicy p = policy(1, 0);
  p.queue.latency_objective_us = 35'000;
  Fixture fx(p, /*instances=*/1, /*compute_us=*/10'000);
  for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(submit(*fx.sched, req(i)).get().status.ok());
  fx.exec.hold(100);
  auto running = submit(*fx.sched, req(100));
  ASSERT_TRUE(fx.exec.wait_running(1));
  auto second = submit(*fx.sched, req(101));  // waits half a run, runs one: 15 ms
  auto third = submit(*fx.sched, req(102));   // 25 ms
  auto fourth = submit(*fx.sched, req(103));  // 35 ms: still within
  auto fifth = submit(*fx.sched, req(104));   // 45 ms: refused
  ASSERT_TRUE(ready(fifth));
  const InferResponse r = fifth.get();
  EXPECT_EQ(r.status.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status.message().find("latency objective of 35.0 ms"), std::string::npos) << r.status.message();
  fx.exec.release(100);
  for (auto* f : {&running, &second, &third, &fourth}) EXPECT_TRUE(f->get().status.ok());
}

// Refusals teach admission nothing, so run times learnt under a heavy load could refuse a model's
// every request for good. Once every instance has sat idle for kStaleIdleUs, one request is let
// through whatever the estimate, and its run refreshes it: here the runs got ten times faster,
// and after a few such probes requests are admitted one after another again.
TEST(Scheduler, AdmissionRefreshesStaleRunTimesInsteadOfLockingTheModelOut) {
  BatchPolicy p = policy(1, 0);
  p.queue.latency_objective_us = 5'000;
  Fixture fx(p, /*instances=*/1, /*compute_us=*/10'000);
  for (uint64_t i = 0; i < RunTimeModel::kMinObservations; ++i)
    ASSERT_TRUE(submit(*fx.sched, req(i)).get().status.ok());  // nothing known yet: admitted
  while (fx.sched->busy_instances() > 0) std::this_thread::yield();
  const InferResponse slow = submit(*fx.sched, req(50)).get();
  EXPECT_EQ(slow.status.code(), StatusCode::kResourceExhausted) << "10 ms runs against a 5 ms objective";
  fx.exec.set_compute_us(1'000);
  int idle_waits = 0, in_a_row = 0;
  for (uint64_t id = 100; in_a_row < 20 && idle_waits <= 10; ++id) {
    while (fx.sched->busy_instances() > 0) std::this_thread::yield();  // the last run's instance is free
    const InferResponse r = submit(*fx.sched, req(id)).get();
    if (r.status.ok()) {
      ++in_a_row;
      continue;
    }
    ASSERT_EQ(r.status.code(), StatusCode::kResourceExhausted) << r.status.to_string();
    in_a_row = 0;
    fx.clock.advance_us(kStaleIdleUs);  // idle long enough for the next one to be a probe
    ++idle_waits;
  }
  EXPECT_EQ(in_a_row, 20);
  EXPECT_GE(idle_waits, 2);  // the first probe alone does not bring a 10 ms mean under 5 ms
  EXPECT_LE(idle_waits, 10);
}

}  // namespace
}  // namespace streamline::runtime
