// The sub-16-bit element types: every stored code decodes and re-encodes to itself, Cast's
// rounding and saturation tables on chosen values, E8M0's rounding modes, and int4/int2 wrapping.

#include "core/small_types.h"

#include <gtest/gtest.h>

#include <cmath>

namespace streamline {
namespace {

constexpr DType kFloats[] = {DType::kFloat8E4M3FN, DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2, DType::kFloat8E5M2FNUZ,
                             DType::kFloat4E2M1};

TEST(SmallTypes, EveryCodeRoundTrips) {
  for (DType t : kFloats) {
    const int codes = t == DType::kFloat4E2M1 ? 16 : 256;
    for (int c = 0; c < codes; ++c) {
      const float v = small_to_float(t, static_cast<uint8_t>(c));
      const uint8_t back = float_to_small(t, v, {.saturate = false});
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(small_to_float(t, back))) << dtype_name(t) << " " << c;
      } else {
        EXPECT_EQ(back, c) << dtype_name(t) << " code " << c << " = " << v;
      }
    }
  }
  for (DType t : {DType::kInt4, DType::kUInt4, DType::kInt2, DType::kUInt2})
    for (int64_t v = small_int_min(t); v <= small_int_max(t); ++v)
      EXPECT_EQ(small_to_float(t, int_to_small(t, v, {})), static_cast<float>(v)) << dtype_name(t);
}

TEST(SmallTypes, Float8RoundingAndSaturation) {
  const SmallCastOptions sat{}, raw{.saturate = false};
  // Round to nearest even: 0.3 lies between 0.28125 and 0.3125 in E4M3FN.
  EXPECT_EQ(small_to_float(DType::kFloat8E4M3FN, float_to_small(DType::kFloat8E4M3FN, 0.3f, sat)), 0.3125f);
  // 464 is halfway between 448 (the largest) and 480 (not a number in E4M3FN): even wins.
  EXPECT_EQ(small_to_float(DType::kFloat8E4M3FN, float_to_small(DType::kFloat8E4M3FN, 464.f, raw)), 448.f);
  EXPECT_TRUE(std::isnan(small_to_float(DType::kFloat8E4M3FN, float_to_small(DType::kFloat8E4M3FN, 500.f, raw))));
  EXPECT_EQ(small_to_float(DType::kFloat8E4M3FN, float_to_small(DType::kFloat8E4M3FN, 1e6f, sat)), 448.f);
  EXPECT_EQ(small_to_float(DType::kFloat8E4M3FN, float_to_small(DType::kFloat8E4M3FN, -INFINITY, sat)), -448.f);
  EXPECT_EQ(small_to_float(DType::kFloat8E5M2, float_to_small(DType::kFloat8E5M2, 1e6f, raw)), INFINITY);
  EXPECT_EQ(small_to_float(DType::kFloat8E5M2FNUZ, float_to_small(DType::kFloat8E5M2FNUZ, 1e6f, sat)), 57344.f);
  EXPECT_EQ(float_to_small(DType::kFloat8E5M2FNUZ, INFINITY, raw), 0x80);  // the only NaN
  // FNUZ formats have no negative zero; the others keep the sign.
  EXPECT_EQ(float_to_small(DType::kFloat8E4M3FNUZ, -0.f, sat), 0x00);
  EXPECT_EQ(float_to_small(DType::kFloat8E4M3FN, -0.f, sat), 0x80);
  // Subnormals: 2^-9 is E4M3FN's smallest; a third of it rounds to zero.
  EXPECT_EQ(float_to_small(DType::kFloat8E4M3FN, std::ldexp(1.f, -9), sat), 0x01);
  EXPECT_EQ(float_to_small(DType::kFloat8E4M3FN, std::ldexp(1.f, -9) / 3, sat), 0x00);
  // float4 E2M1 always saturates; ties go to even (5 -> 4, 2.5 -> 2).
  EXPECT_EQ(small_to_float(DType::kFloat4E2M1, float_to_small(DType::kFloat4E2M1, 9.f, raw)), 6.f);
  EXPECT_EQ(small_to_float(DType::kFloat4E2M1, float_to_small(DType::kFloat4E2M1, 5.f, sat)), 4.f);
  EXPECT_EQ(small_to_float(DType::kFloat4E2M1, float_to_small(DType::kFloat4E2M1, 2.5f, sat)), 2.f);
}

TEST(SmallTypes, E8M0RoundingModes) {
  const auto e8m0 = [](float v, E8M0Round r, bool saturate = true) {
    return small_to_float(DType::kFloat8E8M0, float_to_small(DType::kFloat8E8M0, v, {saturate, r}));
  };
  EXPECT_EQ(e8m0(1.1f, E8M0Round::kUp), 2.f);
  EXPECT_EQ(e8m0(1.9f, E8M0Round::kDown), 1.f);
  EXPECT_EQ(e8m0(1.4f, E8M0Round::kNearest), 1.f);
  EXPECT_EQ(e8m0(1.6f, E8M0Round::kNearest), 2.f);
  EXPECT_EQ(e8m0(0.25f, E8M0Round::kUp), 0.25f);
  EXPECT_TRUE(std::isnan(e8m0(NAN, E8M0Round::kUp)));
  // The largest power stays put when saturating and rounds into NaN otherwise.
  const float big = std::ldexp(1.5f, 127);
  EXPECT_EQ(e8m0(big, E8M0Round::kUp), std::ldexp(1.f, 127));
  EXPECT_TRUE(std::isnan(e8m0(big, E8M0Round::kUp, false)));
}

TEST(SmallTypes, SmallIntegersTruncateAndWrap) {
  EXPECT_EQ(small_to_float(DType::kInt4, float_to_small(DType::kInt4, 9.5f, {})), -7.f);
  EXPECT_EQ(small_to_float(DType::kInt4, float_to_small(DType::kInt4, -2.7f, {})), -2.f);
  EXPECT_EQ(small_to_float(DType::kUInt4, float_to_small(DType::kUInt4, -1.f, {})), 15.f);
  EXPECT_EQ(small_to_float(DType::kInt2, int_to_small(DType::kInt2, 2, {})), -2.f);
  EXPECT_EQ(small_to_float(DType::kUInt2, int_to_small(DType::kUInt2, 7, {})), 3.f);
  EXPECT_EQ(float_to_small(DType::kInt4, NAN, {}), 0);
  EXPECT_EQ(packed_bits(DType::kInt4), 4);
  EXPECT_EQ(packed_bits(DType::kUInt2), 2);
  EXPECT_EQ(packed_bits(DType::kFloat8E5M2), 8);
  EXPECT_EQ(dtype_size(DType::kFloat4E2M1), 1u);
}

}  // namespace
}  // namespace streamline
