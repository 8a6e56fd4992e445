// The CUDA device layer: device queries (clean errors without a GPU), the arena's offset
// arithmetic, pinned block sizes, and on a GPU the arena, streams, events and pinned staging
// together moving data host -> device -> device -> host across two streams.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <iostream>
#include <numeric>
#include <vector>

#include "cuda/cuda_test_util.h"

namespace streamline::exec::cuda {
namespace {

TEST(CudaDevice, QueryReturnsACleanStatusEitherWay) {
  const std::string summary = backend_summary();
  EXPECT_EQ(summary.rfind("CUDA: yes (runtime ", 0), 0u) << summary;
  EXPECT_GT(cuda_versions().runtime, 0);
  EXPECT_GT(cuda_versions().cudnn, 0);
  auto n = device_count();
  if (n.ok()) {
    EXPECT_GT(*n, 0);
    auto d = query_device(0);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_FALSE(d->name.empty());
    EXPECT_GE(d->cc_major, 1);
    EXPECT_GT(d->total_memory, 0u);
    EXPECT_EQ(query_device(*n).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(summary.find("no device"), std::string::npos) << summary;
    return;
  }
  // No GPU or no driver here: every entry point reports it, nothing aborts.
  EXPECT_EQ(n.status().code(), StatusCode::kUnavailable) << n.status().to_string();
  EXPECT_FALSE(n.status().message().empty());
  EXPECT_EQ(query_device(0).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(query_devices().status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(require_device().ok());
  EXPECT_NE(summary.find("no device"), std::string::npos) << summary;
  EXPECT_FALSE(DeviceArena::create(1 << 20).ok());
  EXPECT_FALSE(CudaStream::create().ok());
  EXPECT_FALSE(EventPool::create(2).ok());
  PinnedHostPool pool;
  EXPECT_FALSE(pool.acquire(1024).ok());
}

TEST(CudaArenaOffsets, AlignsPacksAndReportsExhaustion) {
  ArenaOffsets a(1000);
  EXPECT_EQ(*a.take(10), 0u);
  EXPECT_EQ(*a.take(10), 256u);     // kDeviceAlignment by default
  EXPECT_EQ(*a.take(1, 64), 320u);  // 266 rounded up to 64
  EXPECT_EQ(a.used(), 321u);
  auto full = a.take(700);  // would start at 512 and end at 1212
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(a.used(), 321u);      // a failed take changes nothing
  EXPECT_EQ(*a.take(488), 512u);  // exactly fills the block
  EXPECT_EQ(a.used(), 1000u);
  EXPECT_FALSE(a.take(1, 1).ok());
  EXPECT_EQ(a.take(8, 3).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a.take(8, 0).status().code(), StatusCode::kInvalidArgument);
  a.reset();
  EXPECT_EQ(a.used(), 0u);
  EXPECT_EQ(a.take(SIZE_MAX).status().code(), StatusCode::kResourceExhausted);  // no wrap-around
  ArenaOffsets b(SIZE_MAX);
  EXPECT_EQ(*b.take(SIZE_MAX - 100, 1), 0u);
  EXPECT_EQ(b.take(1).status().code(), StatusCode::kResourceExhausted);  // aligning would overflow
}

TEST(CudaPinnedHostPool, BlockSizesRoundUpToPowersOfTwo) {
  EXPECT_EQ(PinnedHostPool::block_size_for(0), size_t{64} << 10);
  EXPECT_EQ(PinnedHostPool::block_size_for(1), size_t{64} << 10);
  EXPECT_EQ(PinnedHostPool::block_size_for((64 << 10) + 1), size_t{128} << 10);
  EXPECT_EQ(PinnedHostPool::block_size_for(size_t{3} << 20), size_t{4} << 20);
}

TEST(GpuDevice, ArenaStreamsEventsAndPinnedStaging) {
  SL_REQUIRE_GPU();
  auto devs = query_devices();
  ASSERT_TRUE(devs.ok()) << devs.status().to_string();
  std::cout << backend_summary() << "\n" << (*devs)[0].describe() << std::endl;

  constexpr size_t kN = 1 << 20;  // floats
  auto arena = DeviceArena::create(3 * kN * sizeof(float));
  ASSERT_TRUE(arena.ok()) << arena.status().to_string();
  auto d1 = (*arena)->take(kN * sizeof(float));
  auto d2 = (*arena)->take(kN * sizeof(float));
  ASSERT_TRUE(d1.ok() && d2.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*d1) % kDeviceAlignment, 0u);
  EXPECT_EQ((*arena)->at(kN * sizeof(float)), *d2);
  EXPECT_EQ((*arena)->take(2 * kN * sizeof(float)).status().code(), StatusCode::kResourceExhausted);

  // A device cannot hold a petabyte: a clean ResourceExhausted, and later calls still work.
  auto huge = DeviceArena::create(size_t{1} << 50);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted) << huge.status().to_string();

  auto copy = CudaStream::create(StreamPriority::kHigh);
  auto compute = CudaStream::create(StreamPriority::kNormal);
  ASSERT_TRUE(copy.ok() && compute.ok());
  EXPECT_LE(copy->priority(), compute->priority());  // lower value = higher priority
  auto events = EventPool::create(2);
  ASSERT_TRUE(events.ok());

  PinnedHostPool pool;
  std::vector<float> back(kN);
  for (int round = 0; round < 3; ++round) {
    auto in = pool.acquire(kN * sizeof(float));
    auto out = pool.acquire(kN * sizeof(float));
    ASSERT_TRUE(in.ok() && out.ok());
    std::vector<float> host(kN);
    std::iota(host.begin(), host.end(), static_cast<float>(round));
    std::memcpy(in->data(), host.data(), kN * sizeof(float));
    auto ready = (*events)->acquire();
    ASSERT_TRUE(ready.ok());
    ASSERT_EQ(cudaMemcpyAsync(*d1, in->data(), kN * sizeof(float), cudaMemcpyHostToDevice, copy->get()), cudaSuccess);
    ASSERT_TRUE(copy->record(ready->get()).ok());
    ASSERT_TRUE(compute->wait(ready->get()).ok());
    ASSERT_EQ(cudaMemcpyAsync(*d2, *d1, kN * sizeof(float), cudaMemcpyDeviceToDevice, compute->get()), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(out->data(), *d2, kN * sizeof(float), cudaMemcpyDeviceToHost, compute->get()),
              cudaSuccess);
    ASSERT_TRUE(compute->synchronize().ok());
    std::memcpy(back.data(), out->data(), kN * sizeof(float));
    EXPECT_EQ(back, host) << "round " << round;
  }
  // Blocks and events were reused, not made per round.
  EXPECT_EQ(pool.blocks(), 2u);
  EXPECT_EQ((*events)->created(), 2u);
  EXPECT_EQ((*events)->available(), 2u);
}

}  // namespace
}  // namespace streamline::exec::cuda
