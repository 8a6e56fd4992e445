#pragma once
// CUDA streams and events for the executor: non-blocking streams with a priority, and a pool of
// timing-free events so that cross-stream dependencies cost no allocation while serving.
//
//   SL_ASSIGN_OR_RETURN(CudaStream copy, CudaStream::create(StreamPriority::kHigh));
//   SL_ASSIGN_OR_RETURN(CudaStream compute, CudaStream::create(StreamPriority::kNormal));
//   SL_ASSIGN_OR_RETURN(auto events, EventPool::create(/*initial=*/16));
//   SL_ASSIGN_OR_RETURN(PooledEvent ready, events->acquire());
//   SL_RETURN_IF_ERROR(copy.record(ready.get()));     // after the host-to-device copy
//   SL_RETURN_IF_ERROR(compute.wait(ready.get()));    // compute waits for it on the device
//   // `ready` goes back to the pool when destroyed, once nothing waits on it any more.
//
// Streams are created with cudaStreamNonBlocking so they never synchronise with the legacy default
// stream. Thread-safety: a CudaStream may be used from several threads (CUDA serialises work on
// it); EventPool is thread-safe.

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <vector>

#include "core/status.h"

namespace streamline::exec::cuda {

enum class StreamPriority { kNormal, kHigh };  // kHigh: latency-critical copies and small kernels

class CudaStream {
 public:
  CudaStream() = default;
  // A non-blocking stream on the current device; Unavailable without a device.
  static Result<CudaStream> create(StreamPriority priority = StreamPriority::kNormal);
  CudaStream(CudaStream&& o) noexcept : stream_(o.stream_), priority_(o.priority_) { o.stream_ = nullptr; }
  CudaStream& operator=(CudaStream&& o) noexcept;
  ~CudaStream();

  cudaStream_t get() const { return stream_; }
  // The CUDA priority value it was created with (lower is higher priority).
  int priority() const { return priority_; }
  Status record(cudaEvent_t event) const;
  Status wait(cudaEvent_t event) const;
  // Blocks the calling thread until all work on the stream finished; reports kernel errors.
  Status synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
  int priority_ = 0;
};

class EventPool;

// An event borrowed from an EventPool; returned to it when destroyed. Move-only.
class PooledEvent {
 public:
  PooledEvent() = default;
  PooledEvent(PooledEvent&& o) noexcept : pool_(o.pool_), event_(o.event_) { o.event_ = nullptr; }
  PooledEvent& operator=(PooledEvent&& o) noexcept;
  ~PooledEvent();
  cudaEvent_t get() const { return event_; }

 private:
  friend class EventPool;
  PooledEvent(EventPool* pool, cudaEvent_t e) : pool_(pool), event_(e) {}
  EventPool* pool_ = nullptr;
  cudaEvent_t event_ = nullptr;
};

// Events made with cudaEventDisableTiming (cheapest to record and wait on). The pool grows when
// empty; events are destroyed with the pool, which must outlive every PooledEvent.
class EventPool {
 public:
  static Result<std::unique_ptr<EventPool>> create(size_t initial = 16);
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  Result<PooledEvent> acquire();
  size_t created() const;    // events made so far
  size_t available() const;  // events in the pool now

 private:
  friend class PooledEvent;
  EventPool() = default;
  void release(cudaEvent_t e);
  mutable std::mutex mu_;
  std::vector<cudaEvent_t> free_;
  size_t created_ = 0;
};

}  // namespace streamline::exec::cuda
