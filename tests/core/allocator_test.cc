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

}  // namespace
}  // namespace streamline
