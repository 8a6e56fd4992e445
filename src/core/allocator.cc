#include "core/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

namespace streamline {

namespace {

// Buffers at least this large (weights, the activation arena, kernel workspaces) are mapped on
// their own at a 2 MiB boundary and marked for transparent huge pages: a model's weights and
// activations span hundreds of MiB, and with 4 KiB pages their walk misses the TLB on nearly
// every new page (BERT-base at sequence 1 ran 8-15% faster on one thread with huge pages). Smaller buffers stay
// on the heap.
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kPage = 4096;

// The size of the mapping that holds `n` bytes (n >= kHugePage): `n` rounded up to one of eight
// classes per power of two, so at most 1/8 of a block is never used.
size_t mapped_size(size_t n) {
  size_t top = kHugePage;
  while (top * 2 <= n) top *= 2;
  const size_t step = top / 8;
  return (n + step - 1) / step * step;
}

// Maps `n` bytes (a multiple of kPage) starting at a kHugePage boundary; nullptr if the system
// refuses. The mapping is trimmed to exactly `n` bytes so nothing is held beyond the request:
// the whole 2 MiB ranges inside it become huge pages, the tail stays in 4 KiB pages.
void* map_huge(size_t n) {
  const size_t reserve = n + kHugePage;
  void* raw = mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = aligned + n;
  const uintptr_t reserved_end = start + reserve;
  if (reserved_end > end) munmap(reinterpret_cast<void*>(end), reserved_end - end);
  void* p = reinterpret_cast<void*>(aligned);
  // Only a hint: kernels without transparent huge pages answer EINVAL and the pages stay small.
  (void)madvise(p, n, MADV_HUGEPAGE);
  return p;
}

// Released mappings kept for reuse. A run that allocates and frees an output of the same size
// every time would otherwise map, fault in and unmap it on every run (a model with a 4.8 MB output
// ran 38% slower per run that way); the heap reused such blocks before. Faulting in a fresh
// mapping costs more than its pages' zeroing where the kernel compacts memory to find huge pages
// (Debian's default `defrag` setting for madvised ranges): a 100 MB tensor that the node-by-node
// interpreter makes on every run of Mask R-CNN took 320 ms fresh and 20 ms reused. Mappings come
// in size classes (mapped_size), so that a block of a slightly different size reuses one too: a
// loop that grows a tensor by concatenation (Mask R-CNN pastes each mask into an image-sized row
// of its output) asks for a new, larger block every iteration. Released blocks are kept up to
// kept_bytes() in all (1/16 of the machine's memory, between 128 MiB and 1 GiB), the oldest
// given back first; a larger block is unmapped at once.
class MappingCache {
 public:
  static size_t kept_bytes() {
    static const size_t bytes = [] {
      const long pages = sysconf(_SC_PHYS_PAGES);
      const long page = sysconf(_SC_PAGESIZE);
      const size_t total = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
      return std::clamp(total / 16, size_t{128} << 20, size_t{1} << 30);
    }();
    return bytes;
  }

  static MappingCache& instance() {
    static MappingCache* cache = new MappingCache();  // never destroyed: buffers may outlive statics
    return *cache;
  }

  // A kept mapping of exactly `n` bytes, or nullptr.
  void* take(size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = kept_.size(); i-- > 0;) {
      if (kept_[i].second != n) continue;
      void* p = kept_[i].first;
      kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(i));
      bytes_ -= n;
      return p;
    }
    return nullptr;
  }

  // Keeps the mapping, or unmaps it when it is too large to keep.
  void give_back(void* p, size_t n) {
    if (n > kept_bytes()) {
      munmap(p, n);
      return;
    }
    std::vector<std::pair<void*, size_t>> drop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (!kept_.empty() && bytes_ + n > kept_bytes()) {
        drop.push_back(kept_.front());
        bytes_ -= kept_.front().second;
        kept_.erase(kept_.begin());
      }
      kept_.emplace_back(p, n);
      bytes_ += n;
    }
    for (const auto& [q, m] : drop) munmap(q, m);
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<void*, size_t>> kept_;  // oldest first
  size_t bytes_ = 0;
};

}  // namespace

AllocationStats& allocation_stats() {
  static AllocationStats stats;
  return stats;
}

std::shared_ptr<AlignedBuffer> AlignedBuffer::allocate(size_t bytes) {
  return make(bytes, /*zero=*/true);
}

std::shared_ptr<AlignedBuffer> AlignedBuffer::allocate_for_overwrite(size_t bytes) {
  return make(bytes, /*zero=*/false);
}

std::shared_ptr<AlignedBuffer> AlignedBuffer::make(size_t bytes, bool zero) {
  size_t n = align_up(bytes == 0 ? kAlignment : bytes);
  bool mapped = false;
  void* p = nullptr;
  bool fresh = false;  // a new mapping: the kernel hands its pages out zeroed
  if (n >= kHugePage) {
    n = mapped_size(n);
    p = MappingCache::instance().take(n);
    if (!p) {
      p = map_huge(n);
      fresh = p != nullptr;
    }
    mapped = p != nullptr;
  }
  if (!p) p = std::aligned_alloc(kAlignment, n);
  if (!p) return nullptr;
  // Every page is faulted in now (at load, for weights and the arena) rather than in the first
  // request: a fresh mapping by a write to each page, anything else by the zeroing itself.
  if (fresh) {
    for (size_t off = 0; off < n; off += kPage) static_cast<volatile char*>(p)[off] = 0;
  } else if (zero) {
    std::memset(p, 0, n);
  }
  auto& s = allocation_stats();
  const int64_t live = s.live_bytes.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
  int64_t peak = s.peak_bytes.load();
  while (live > peak && !s.peak_bytes.compare_exchange_weak(peak, live)) {
  }
  s.allocations.fetch_add(1);
  return std::shared_ptr<AlignedBuffer>(new AlignedBuffer(p, n, mapped));
}

AlignedBuffer::~AlignedBuffer() {
  allocation_stats().live_bytes.fetch_sub(static_cast<int64_t>(size_));
  if (mapped_) {
    MappingCache::instance().give_back(data_, size_);
  } else {
    std::free(data_);
  }
}

}  // namespace streamline
