// The one conversion between Triton's priorities (0 = default, 1 = highest) and the runtime's
// (-1 = default, 0 = highest), in both directions and at the edges.

#include "serve/priority.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace streamline::serve {
namespace {

constexpr int kIntMax = std::numeric_limits<int>::max();
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

TEST(Priority, FromWire) {
  EXPECT_EQ(priority_from_wire(0), -1);  // the model's default
  EXPECT_EQ(priority_from_wire(1), 0);   // the highest
  EXPECT_EQ(priority_from_wire(2), 1);
  EXPECT_EQ(priority_from_wire(1024), 1023);
  // The last level an int holds, and everything past it, clamp to the largest int (the lowest).
  EXPECT_EQ(priority_from_wire(static_cast<uint64_t>(kIntMax)), kIntMax - 1);
  EXPECT_EQ(priority_from_wire(static_cast<uint64_t>(kIntMax) + 1), kIntMax);
  EXPECT_EQ(priority_from_wire(static_cast<uint64_t>(kIntMax) + 2), kIntMax);
  EXPECT_EQ(priority_from_wire(static_cast<uint64_t>(std::numeric_limits<int64_t>::max())), kIntMax);
  EXPECT_EQ(priority_from_wire(kU64Max), kIntMax);
}

TEST(Priority, ToWire) {
  EXPECT_EQ(priority_to_wire(-1), 0u);  // the default
  EXPECT_EQ(priority_to_wire(std::numeric_limits<int>::min()), 0u);
  EXPECT_EQ(priority_to_wire(0), 1u);
  EXPECT_EQ(priority_to_wire(1), 2u);
  EXPECT_EQ(priority_to_wire(kIntMax), static_cast<uint64_t>(kIntMax) + 1);  // no overflow
}

TEST(Priority, RoundTrips) {
  for (uint64_t p : {0ull, 1ull, 2ull, 3ull, 1024ull, static_cast<unsigned long long>(kIntMax) + 1})
    EXPECT_EQ(priority_to_wire(priority_from_wire(p)), p) << p;
  for (int level : {-1, 0, 1, 2, 1023, kIntMax}) EXPECT_EQ(priority_from_wire(priority_to_wire(level)), level) << level;
  static_assert(priority_from_wire(3) == 2 && priority_to_wire(2) == 3, "usable in constant expressions");
}

}  // namespace
}  // namespace streamline::serve
