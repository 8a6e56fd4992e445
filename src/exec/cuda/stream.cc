// CudaStream and EventPool; see stream.h.

#include "exec/cuda/stream.h"

#include "core/cuda/cuda_status.h"

namespace streamline::exec::cuda {

Result<CudaStream> CudaStream::create(StreamPriority priority) {
  int least = 0, greatest = 0;
  SL_CUDA_RETURN_IF_ERROR(cudaDeviceGetStreamPriorityRange(&least, &greatest), "creating a stream");
  CudaStream s;
  s.priority_ = priority == StreamPriority::kHigh ? greatest : least;
  SL_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithPriority(&s.stream_, cudaStreamNonBlocking, s.priority_),
                          "creating a stream");
  return s;
}

CudaStream& CudaStream::operator=(CudaStream&& o) noexcept {
  if (this != &o) {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    stream_ = o.stream_;
    priority_ = o.priority_;
    o.stream_ = nullptr;
  }
  return *this;
}

CudaStream::~CudaStream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

Status CudaStream::record(cudaEvent_t event) const {
  SL_CUDA_RETURN_IF_ERROR(cudaEventRecord(event, stream_));
  return ok_status();
}

Status CudaStream::wait(cudaEvent_t event) const {
  SL_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_, event, 0));
  return ok_status();
}

Status CudaStream::synchronize() const {
  SL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return ok_status();
}

PooledEvent& PooledEvent::operator=(PooledEvent&& o) noexcept {
  if (this != &o) {
    if (pool_ != nullptr && event_ != nullptr) pool_->release(event_);
    pool_ = o.pool_;
    event_ = o.event_;
    o.event_ = nullptr;
  }
  return *this;
}

PooledEvent::~PooledEvent() {
  if (pool_ != nullptr && event_ != nullptr) pool_->release(event_);
}

Result<std::unique_ptr<EventPool>> EventPool::create(size_t initial) {
  std::unique_ptr<EventPool> pool(new EventPool());
  for (size_t i = 0; i < initial; ++i) {
    cudaEvent_t e = nullptr;
    SL_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event pool");
    pool->free_.push_back(e);
    ++pool->created_;
  }
  return pool;
}

EventPool::~EventPool() {
  for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);
}

Result<PooledEvent> EventPool::acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      cudaEvent_t e = free_.back();
      free_.pop_back();
      return PooledEvent(this, e);
    }
  }
  cudaEvent_t e = nullptr;
  SL_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event pool (growing)");
  std::lock_guard<std::mutex> lock(mu_);
  ++created_;
  return PooledEvent(this, e);
}

void EventPool::release(cudaEvent_t e) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(e);
}

size_t EventPool::created() const {
  std::lock_guard<std::mutex> lock(mu_);
  return created_;
}

size_t EventPool::available() const {
  std::lock_guard<std::mutex> lock(mu_);
  return free_.size();
}

}  // namespace streamline::exec::cuda
