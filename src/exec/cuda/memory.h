#pragma once
// Device and pinned host memory for the CUDA backend: one device block per execution context,
// carved by offset, and reusable page-locked staging blocks for host<->device copies.
//
//   // When a plan is made: one cudaMalloc of the plan's size; nothing is allocated per run.
//   SL_ASSIGN_OR_RETURN(auto arena, DeviceArena::create(plan_bytes, /*device=*/0));
//   SL_ASSIGN_OR_RETURN(void* x, arena->take(x_bytes));    // 256-byte aligned device pointer
//   arena->reset();                                         // every offset handed out is free again
//
//   PinnedHostPool pool;                                    // per process or per instance
//   SL_ASSIGN_OR_RETURN(PinnedBlock in, pool.acquire(4 << 20));
//   std::memcpy(in.data(), host, n);                        // then cudaMemcpyAsync from in.data()
//   // `in` goes back to the pool when destroyed; the pool must outlive its blocks.
//
// Thread-safety: ArenaOffsets and DeviceArena are not synchronised (one per execution context, used
// by the thread that plans or runs it). PinnedHostPool is thread-safe.

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "core/status.h"

namespace streamline::exec::cuda {

// Alignment of every device offset: cuBLASLt and cuDNN want 16-byte aligned operands, 256 matches
// cudaMalloc's own guarantee and keeps vector loads aligned.
inline constexpr size_t kDeviceAlignment = 256;

// Bump allocation of offsets within a block of `capacity` bytes; no memory is touched, so it is
// usable (and testable) without a device.
class ArenaOffsets {
 public:
  explicit ArenaOffsets(size_t capacity) : capacity_(capacity) {}
  // The offset of `bytes` bytes aligned to `alignment` (a power of two); ResourceExhausted when the
  // block is too small, InvalidArgument for a bad alignment. Zero bytes get a valid offset.
  Result<size_t> take(size_t bytes, size_t alignment = kDeviceAlignment);
  void reset() { used_ = 0; }
  size_t used() const { return used_; }
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_;
  size_t used_ = 0;
};

// One cudaMalloc'd block on one device, handed out by offset. Freed when destroyed.
class DeviceArena {
 public:
  // ResourceExhausted (naming the size) when the device cannot hold it, Unavailable without a device.
  static Result<std::unique_ptr<DeviceArena>> create(size_t bytes, int device = 0);
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // A device pointer to `bytes` bytes; valid until reset() or destruction.
  Result<void*> take(size_t bytes, size_t alignment = kDeviceAlignment);
  // The device pointer at a planned offset (the planner's slot offsets); nullptr past the end.
  void* at(size_t offset) const;
  void reset() { offsets_.reset(); }
  void* base() const { return base_; }
  size_t used() const { return offsets_.used(); }
  size_t capacity() const { return offsets_.capacity(); }
  int device() const { return device_; }

 private:
  DeviceArena(void* base, size_t bytes, int device) : base_(base), device_(device), offsets_(bytes) {}
  void* base_;
  int device_;
  ArenaOffsets offsets_;
};

class PinnedHostPool;

// A page-locked host block from a PinnedHostPool; returns to it when destroyed. Move-only.
class PinnedBlock {
 public:
  PinnedBlock() = default;
  PinnedBlock(PinnedBlock&& o) noexcept;
  PinnedBlock& operator=(PinnedBlock&& o) noexcept;
  ~PinnedBlock();

  void* data() const { return data_; }
  size_t size() const { return size_; }  // at least what was asked for

 private:
  friend class PinnedHostPool;
  PinnedBlock(PinnedHostPool* pool, void* data, size_t size) : pool_(pool), data_(data), size_(size) {}
  PinnedHostPool* pool_ = nullptr;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Reuses cudaHostAlloc'd blocks. Sizes round up to a power of two (at least 64 KiB) so that blocks
// of similar requests are interchangeable; a free block of the right size is reused, otherwise a
// new one is allocated (so allocation happens while a workload warms up, not in steady state).
class PinnedHostPool {
 public:
  PinnedHostPool() = default;
  ~PinnedHostPool();  // frees every block; all PinnedBlocks must have been returned
  PinnedHostPool(const PinnedHostPool&) = delete;
  PinnedHostPool& operator=(const PinnedHostPool&) = delete;

  Result<PinnedBlock> acquire(size_t bytes);
  // Blocks allocated so far (free and in use) and their bytes.
  size_t blocks() const;
  size_t bytes() const;
  // The size a request is rounded up to.
  static size_t block_size_for(size_t bytes);

 private:
  friend class PinnedBlock;
  void release(void* data, size_t size);

  struct Block {
    void* data;
    size_t size;
  };
  mutable std::mutex mu_;
  std::vector<Block> free_;
  size_t blocks_ = 0;
  size_t bytes_ = 0;
};

}  // namespace streamline::exec::cuda
