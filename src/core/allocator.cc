#include "core/allocator.h"

#include <cstdlib>
#include <cstring>

namespace streamline {

AllocationStats& allocation_stats() {
  static AllocationStats stats;
  return stats;
}

std::shared_ptr<AlignedBuffer> AlignedBuffer::allocate(size_t bytes) {
  const size_t n = align_up(bytes == 0 ? kAlignment : bytes);
  void* p = std::aligned_alloc(kAlignment, n);
  if (!p) return nullptr;
  std::memset(p, 0, n);
  auto& s = allocation_stats();
  const int64_t live = s.live_bytes.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
  int64_t peak = s.peak_bytes.load();
  while (live > peak && !s.peak_bytes.compare_exchange_weak(peak, live)) {
  }
  s.allocations.fetch_add(1);
  return std::shared_ptr<AlignedBuffer>(new AlignedBuffer(p, n));
}

AlignedBuffer::~AlignedBuffer() {
  allocation_stats().live_bytes.fetch_sub(static_cast<int64_t>(size_));
  std::free(data_);
}

}  // namespace streamline
