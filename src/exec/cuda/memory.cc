// DeviceArena, ArenaOffsets and PinnedHostPool; see memory.h.

#include "exec/cuda/memory.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda/cuda_status.h"

namespace streamline::exec::cuda {

Result<size_t> ArenaOffsets::take(size_t bytes, size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    return invalid_argument("arena alignment " + std::to_string(alignment) + " is not a power of two");
  const size_t start = (used_ + alignment - 1) / alignment * alignment;
  if (start < used_ || start > capacity_ || bytes > capacity_ - start)
    return resource_exhausted("device arena of " + std::to_string(capacity_) + " bytes cannot hold " +
                              std::to_string(bytes) + " more bytes (" + std::to_string(used_) + " in use)");
  used_ = start + bytes;
  return start;
}

Result<std::unique_ptr<DeviceArena>> DeviceArena::create(size_t bytes, int device) {
  SL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device), "device arena on device " + std::to_string(device));
  void* p = nullptr;
  if (bytes > 0) {
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // an allocation failure is not sticky; keep it from later checks
      return streamline::cuda::cuda_status(err, "cudaMalloc(&p, bytes)", __FILE__, __LINE__,
                                           "device arena of " + std::to_string(bytes) + " bytes");
    }
  }
  return std::unique_ptr<DeviceArena>(new DeviceArena(p, bytes, device));
}

DeviceArena::~DeviceArena() {
  if (base_ != nullptr) (void)cudaFree(base_);
}

Result<void*> DeviceArena::take(size_t bytes, size_t alignment) {
  SL_ASSIGN_OR_RETURN(size_t off, offsets_.take(bytes, alignment));
  return static_cast<void*>(static_cast<char*>(base_) + off);
}

void* DeviceArena::at(size_t offset) const {
  if (base_ == nullptr || offset >= offsets_.capacity()) return nullptr;
  return static_cast<char*>(base_) + offset;
}

PinnedBlock::PinnedBlock(PinnedBlock&& o) noexcept : pool_(o.pool_), data_(o.data_), size_(o.size_) {
  o.pool_ = nullptr;
  o.data_ = nullptr;
  o.size_ = 0;
}

PinnedBlock& PinnedBlock::operator=(PinnedBlock&& o) noexcept {
  if (this != &o) {
    if (pool_ != nullptr && data_ != nullptr) pool_->release(data_, size_);
    pool_ = o.pool_;
    data_ = o.data_;
    size_ = o.size_;
    o.pool_ = nullptr;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

PinnedBlock::~PinnedBlock() {
  if (pool_ != nullptr && data_ != nullptr) pool_->release(data_, size_);
}

size_t PinnedHostPool::block_size_for(size_t bytes) {
  size_t s = size_t{64} << 10;
  while (s < bytes && s <= (SIZE_MAX >> 1)) s <<= 1;
  return std::max(s, bytes);
}

Result<PinnedBlock> PinnedHostPool::acquire(size_t bytes) {
  const size_t size = block_size_for(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].size == size) {
        Block b = free_[i];
        free_[i] = free_.back();
        free_.pop_back();
        return PinnedBlock(this, b.data, b.size);
      }
    }
  }
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, size, cudaHostAllocDefault);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return streamline::cuda::cuda_status(err, "cudaHostAlloc(&p, size, cudaHostAllocDefault)", __FILE__, __LINE__,
                                         "pinned block of " + std::to_string(size) + " bytes");
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++blocks_;
  bytes_ += size;
  return PinnedBlock(this, p, size);
}

void PinnedHostPool::release(void* data, size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(Block{data, size});
}

size_t PinnedHostPool::blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return blocks_;
}

size_t PinnedHostPool::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

PinnedHostPool::~PinnedHostPool() {
  for (const Block& b : free_) (void)cudaFreeHost(b.data);
}

}  // namespace streamline::exec::cuda
