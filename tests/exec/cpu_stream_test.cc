// CPU streams and events (record/wait across threads, generations instead of resets) and the
// backend registry that makes execution contexts.

#include "exec/cpu_stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "exec/backend.h"
#include "exec/eager_executor.h"

namespace streamline {
namespace {

TEST(CpuStream, WaitSeesEverythingTheRecorderDidBefore) {
  exec::CpuEvent ready;
  EXPECT_EQ(ready.stamp(), 0u);
  int payload = 0;  // written by the producer, read by the consumer; ordered only by the event
  std::promise<void> consumer_waiting;
  std::thread producer([&] {
    exec::CpuStream s(1);
    s.begin_run(1);
    consumer_waiting.get_future().wait();  // record only once the consumer is about to wait
    payload = 42;
    s.record(ready);
    s.end_run();
  });
  exec::CpuStream consumer(0);
  consumer.begin_run(1);
  consumer_waiting.set_value();
  consumer.wait(ready);
  EXPECT_EQ(payload, 42);
  consumer.end_run();
  producer.join();
  EXPECT_EQ(ready.stamp(), 1u);
}

TEST(CpuStream, AnEventOfAnEarlierRunDoesNotSatisfyAWaitOfALaterOne) {
  exec::CpuEvent ready;
  {
    exec::CpuStream s(0);
    s.begin_run(1);
    s.record(ready);
    s.wait(ready);  // recorded in this run: returns at once
    s.end_run();
  }
  std::atomic<bool> recorded_in_run2{false};
  std::promise<void> consumer_waiting;
  std::thread producer([&] {
    exec::CpuStream s(1);
    s.begin_run(2);
    consumer_waiting.get_future().wait();
    recorded_in_run2.store(true, std::memory_order_relaxed);
    s.record(ready);
    s.end_run();
  });
  exec::CpuStream consumer(0);
  consumer.begin_run(2);
  consumer_waiting.set_value();
  consumer.wait(ready);  // the stamp of run 1 is stale: this waits for run 2's record
  EXPECT_TRUE(recorded_in_run2.load(std::memory_order_relaxed));
  consumer.end_run();
  producer.join();
  EXPECT_EQ(ready.stamp(), 2u);
}

TEST(Backends, OneBackendPerDeviceAndAClearErrorForAMissingOne) {
  exec::BackendRegistry registry;
  ASSERT_TRUE(registry.add(exec::make_cpu_backend()).ok());
  const Status twice = registry.add(exec::make_cpu_backend());
  EXPECT_EQ(twice.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(twice.message().find("registered already"), std::string::npos) << twice.to_string();
  EXPECT_FALSE(registry.add(nullptr).ok());

  auto cpu = registry.find(ops::Device::kCpu);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  EXPECT_EQ((*cpu)->device_count(), 1);
  auto kernels = (*cpu)->kernels();
  ASSERT_TRUE(kernels.ok());
  EXPECT_EQ(*kernels, &ops::default_cpu_registry());

  auto cuda = registry.find(ops::Device::kCuda);
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(cuda.status().message().find("no CUDA backend"), std::string::npos) << cuda.status().to_string();
  EXPECT_FALSE(registry.has(ops::Device::kCuda));
}

TEST(Backends, CpuContextsRunEagerPlansOnlyThroughRunValues) {
  exec::BackendRegistry registry;
  ASSERT_TRUE(registry.add(exec::make_cpu_backend()).ok());
  auto weights = (*registry.find(ops::Device::kCpu))->attach_model();
  ASSERT_TRUE(weights.ok());
  EXPECT_EQ((*weights)->bytes(), 0u);
  auto ctx = (*weights)->make_context({});
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  EXPECT_EQ((*ctx)->device(), "cpu");
  EXPECT_EQ((*ctx)->arena_bytes(), 0u);
  const plan::ExecutionPlan planned;  // not eager
  std::vector<AnyValue> outs;
  const Status s = (*ctx)->run_values(planned, {}, &outs, {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();

  exec::EagerExecutionContext eager;
  std::vector<Tensor> touts;
  EXPECT_EQ(eager.run(planned, {}, &touts, {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(eager.device(), "eager");
}

}  // namespace
}  // namespace streamline
