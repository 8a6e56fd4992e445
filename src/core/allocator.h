#pragma once
// Allocators: 64-byte aligned host memory, and a counting wrapper for memory tests.
//
//   auto buf = AlignedBuffer::allocate(1 << 20);   // 1 MiB, 64-byte aligned, zeroed
//   float* p = buf->as<float>();

#include <atomic>
#include <cstddef>
#include <memory>

namespace streamline {

inline constexpr size_t kAlignment = 64;

inline size_t align_up(size_t n, size_t a = kAlignment) {
  return (n + a - 1) / a * a;
}

// Process-wide counters of bytes held by AlignedBuffer (for memory tests and metrics).
struct AllocationStats {
  std::atomic<int64_t> live_bytes{0};
  std::atomic<int64_t> peak_bytes{0};
  std::atomic<int64_t> allocations{0};
};
AllocationStats& allocation_stats();

// An owned, 64-byte aligned, zero-initialised (unless allocated for overwrite) block of host
// memory. Not copyable. Blocks of
// 2 MiB or more start on a 2 MiB boundary and ask for transparent huge pages.
class AlignedBuffer {
 public:
  // Returns nullptr only if the system is out of memory.
  static std::shared_ptr<AlignedBuffer> allocate(size_t bytes);
  // The same, not zeroed: for a block the caller overwrites whole at once (a copy). Zeroing a
  // 25 MB output every run only to copy over it cost as much as the copy.
  static std::shared_ptr<AlignedBuffer> allocate_for_overwrite(size_t bytes);
  ~AlignedBuffer();
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  AlignedBuffer(void* d, size_t n, bool mapped) : data_(d), size_(n), mapped_(mapped) {}
  static std::shared_ptr<AlignedBuffer> make(size_t bytes, bool zero);
  void* data_;
  size_t size_;
  bool mapped_;  // true: a page mapping of its own (large buffers), given back to the mapping cache
};

}  // namespace streamline
