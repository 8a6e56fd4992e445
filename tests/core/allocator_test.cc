#include "core/allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace streamline {
namespace {

bool all_zero(const AlignedBuffer& b) {
  const auto* p = b.as<unsigned char>();
  for (size_t i = 0; i < b.size(); ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

TEST(AlignedBuffer, SmallBlocksAreAlignedZeroedAndCounted) {
  const int64_t live_before = allocation_stats().live_bytes.load();
  {
    auto b = AlignedBuffer::allocate(1000);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % kAlignment, 0u);
    EXPECT_EQ(b->size(), align_up(1000));
    EXPECT_TRUE(all_zero(*b));
    EXPECT_EQ(allocation_stats().live_bytes.load(), live_before + static_cast<int64_t>(b->size()));
  }
  EXPECT_EQ(allocation_stats().live_bytes.load(), live_before);
}

TEST(AlignedBuffer, LargeBlocksStartOnAHugePageBoundary) {
  constexpr size_t kHuge = size_t{2} << 20;
  const int64_t live_before = allocation_stats().live_bytes.load();
  // Sizes on both sides of a whole number of huge pages, and one that is not a page multiple.
  for (size_t bytes : {kHuge, kHuge + 64, 3 * kHuge - 4096, 5 * kHuge + 12345}) {
    SCOPED_TRACE(bytes);
    std::vector<std::shared_ptr<AlignedBuffer>> held;
    for (int i = 0; i < 3; ++i) {
      auto b = AlignedBuffer::allocate(bytes);
      ASSERT_NE(b, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % kHuge, 0u);
      EXPECT_GE(b->size(), bytes);
      EXPECT_TRUE(all_zero(*b));
      // Every byte is writable, up to the last one counted.
      std::memset(b->data(), 0xab, b->size());
      EXPECT_EQ(b->as<unsigned char>()[b->size() - 1], 0xab);
      held.push_back(std::move(b));
    }
    // Blocks held together do not overlap.
    for (size_t i = 0; i + 1 < held.size(); ++i) {
      const auto a = reinterpret_cast<uintptr_t>(held[i]->data());
      const auto c = reinterpret_cast<uintptr_t>(held[i + 1]->data());
      EXPECT_TRUE(a + held[i]->size() <= c || c + held[i + 1]->size() <= a);
    }
  }
  EXPECT_EQ(allocation_stats().live_bytes.load(), live_before);
}

// A large block released and asked for again at the same size (an output allocated every run)
// comes back from the kept mappings, zeroed again, and still on a huge-page boundary.
TEST(AlignedBuffer, ReleasedLargeBlocksAreReusedZeroed) {
  constexpr size_t kBytes = (size_t{3} << 20) + 4096;
  void* first = nullptr;
  {
    auto b = AlignedBuffer::allocate(kBytes);
    ASSERT_NE(b, nullptr);
    first = b->data();
    std::memset(b->data(), 0x5a, b->size());
  }
  auto again = AlignedBuffer::allocate(kBytes);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->data(), first);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(again->data()) % (size_t{2} << 20), 0u);
  EXPECT_TRUE(all_zero(*again));
}

// Sizes round up to one of eight classes per power of two, so a released block also serves a
// request a little larger (a tensor grown by concatenation, iteration after iteration), and the
// rounding never wastes more than an eighth of a block. Sizes up to 100 MiB are kept.
TEST(AlignedBuffer, ReleasedLargeBlocksServeSlightlyLargerRequests) {
  for (size_t bytes : {(size_t{10} << 20) + 4096, (size_t{40} << 20) + 4096, (size_t{100} << 20) + 4096}) {
    SCOPED_TRACE(std::to_string(bytes) + " bytes");
    void* first = nullptr;
    size_t first_size = 0;
    {
      auto b = AlignedBuffer::allocate(bytes);
      ASSERT_NE(b, nullptr);
      first = b->data();
      first_size = b->size();
      EXPECT_GE(first_size, bytes);
      EXPECT_LE(first_size, bytes + bytes / 8);
      std::memset(b->data(), 0x5a, b->size());
    }
    auto larger = AlignedBuffer::allocate(bytes + (bytes >> 5));  // within the same class
    ASSERT_NE(larger, nullptr);
    EXPECT_EQ(larger->data(), first);
    EXPECT_EQ(larger->size(), first_size);
    EXPECT_TRUE(all_zero(*larger));
  }
}

// A block allocated for overwrite (a copy's destination) comes from the same places, aligned and
// counted alike; what it leaves in a kept mapping never shows through a later zeroed allocation.
TEST(AlignedBuffer, BlocksForOverwriteShareThePoolsButNeverLeakIntoZeroedOnes) {
  const int64_t live_before = allocation_stats().live_bytes.load();
  for (const size_t bytes : {size_t{1000}, (size_t{3} << 20) + 4096}) {
    void* first = nullptr;
    {
      auto b = AlignedBuffer::allocate_for_overwrite(bytes);
      ASSERT_NE(b, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % kAlignment, 0u);
      EXPECT_GE(b->size(), bytes);
      EXPECT_EQ(allocation_stats().live_bytes.load(), live_before + static_cast<int64_t>(b->size()));
      first = b->data();
      std::memset(b->data(), 0x5a, b->size());
    }
    EXPECT_EQ(allocation_stats().live_bytes.load(), live_before);
    auto zeroed = AlignedBuffer::allocate(bytes);
    ASSERT_NE(zeroed, nullptr);
    if (bytes >= (size_t{2} << 20)) {
      EXPECT_EQ(zeroed->data(), first);  // the kept mapping, handed out again
    }
    EXPECT_TRUE(all_zero(*zeroed)) << bytes << " bytes";
  }
}

}  // namespace
}  // namespace streamline
