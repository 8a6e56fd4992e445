// Cast and CastLike: every supported pair against the reference, plus hand-checked rounding rules and
// the small (float8, float4, int4, int2) types.

#include <cstring>

#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

const DType kAllTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt8,
                           DType::kInt16,   DType::kInt32,   DType::kInt64,   DType::kUInt8,    DType::kUInt16,
                           DType::kUInt32,  DType::kUInt64,  DType::kBool};

// Values that every type holds: small integers and halves (exact in float16/bfloat16), negatives.
Tensor sample(DType dt, std::mt19937& rng, const Shape& s) {
  Tensor t = Tensor::empty(dt, s);
  const bool is_unsigned = dt == DType::kUInt8 || dt == DType::kUInt16 || dt == DType::kUInt32 || dt == DType::kUInt64;
  const bool is_float =
      dt == DType::kFloat32 || dt == DType::kFloat64 || dt == DType::kFloat16 || dt == DType::kBFloat16;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t k = static_cast<int64_t>(rng() % 41) - (is_unsigned ? 0 : 20);
    Tensor one = Tensor::empty(dt, Shape{1});
    const double v = is_float ? static_cast<double>(k) * 0.75 : static_cast<double>(k);
    switch (dt) {
      case DType::kFloat32:
        t.data<float>()[i] = static_cast<float>(v);
        break;
      case DType::kFloat64:
        t.data<double>()[i] = v;
        break;
      case DType::kFloat16:
        t.data<uint16_t>()[i] = float_to_half(static_cast<float>(v));
        break;
      case DType::kBFloat16:
        t.data<uint16_t>()[i] = float_to_bfloat16(static_cast<float>(v));
        break;
      case DType::kInt8:
        t.data<int8_t>()[i] = static_cast<int8_t>(k);
        break;
      case DType::kInt16:
        t.data<int16_t>()[i] = static_cast<int16_t>(k);
        break;
      case DType::kInt32:
        t.data<int32_t>()[i] = static_cast<int32_t>(k);
        break;
      case DType::kInt64:
        t.data<int64_t>()[i] = k;
        break;
      case DType::kUInt8:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(k);
        break;
      case DType::kUInt16:
        t.data<uint16_t>()[i] = static_cast<uint16_t>(k);
        break;
      case DType::kUInt32:
        t.data<uint32_t>()[i] = static_cast<uint32_t>(k);
        break;
      case DType::kUInt64:
        t.data<uint64_t>()[i] = static_cast<uint64_t>(k);
        break;
      case DType::kBool:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(k & 1);
        break;
      default:
        break;
    }
  }
  return t;
}

TEST(Cast, EveryPairMatchesReference) {
  std::mt19937 rng(9);
  int pairs = 0;
  for (DType from : kAllTypes) {
    for (DType to : kAllTypes) {
      Tensor x = sample(from, rng, Shape{3, 37});
      OpCase c{"Cast", 13, {{"to", one_int(static_cast<int64_t>(to))}}};
      EXPECT_TRUE(match_reference(c, {x}, {0, 0})) << dtype_name(from) << " -> " << dtype_name(to);
      EXPECT_TRUE(match_reference({"CastLike", 15}, {x, Tensor::empty(to, Shape{1})}, {0, 0}))
          << dtype_name(from) << " -> " << dtype_name(to);
      ++pairs;
    }
  }
  EXPECT_EQ(pairs, 169);
}

TEST(Cast, FloatToIntTruncatesTowardZeroAndSaturates) {
  Tensor x = Tensor::from_vector<float>(Shape{8}, {2.7f, -2.7f, 0.5f, -0.5f, 1e10f, -1e10f, NAN, 300.f});
  auto i32 = run_op(cpu_reg(), {"Cast", 13, {{"to", one_int(static_cast<int64_t>(DType::kInt32))}}}, {x});
  ASSERT_TRUE(i32.ok());
  const std::vector<int32_t> want = {2, -2, 0, 0, INT32_MAX, INT32_MIN, 0, 300};
  for (int i = 0; i < 8; ++i) EXPECT_EQ((*i32)[0].data<int32_t>()[i], want[static_cast<size_t>(i)]) << i;
  auto u8 = run_op(cpu_reg(), {"Cast", 13, {{"to", one_int(static_cast<int64_t>(DType::kUInt8))}}}, {x});
  ASSERT_TRUE(u8.ok());
  EXPECT_EQ((*u8)[0].data<uint8_t>()[0], 2);
  EXPECT_EQ((*u8)[0].data<uint8_t>()[1], 0);
  EXPECT_EQ((*u8)[0].data<uint8_t>()[7], 255);
  auto b = run_op(cpu_reg(), {"Cast", 13, {{"to", one_int(static_cast<int64_t>(DType::kBool))}}}, {x});
  ASSERT_TRUE(b.ok());
  const std::vector<uint8_t> want_b = {1, 1, 1, 1, 1, 1, 1, 1};
  for (int i = 0; i < 8; ++i) EXPECT_EQ((*b)[0].data<uint8_t>()[i], want_b[static_cast<size_t>(i)]) << i;
  Tensor zero = Tensor::from_vector<float>(Shape{2}, {0.f, -0.f});
  auto bz = run_op(cpu_reg(), {"Cast", 13, {{"to", one_int(static_cast<int64_t>(DType::kBool))}}}, {zero});
  ASSERT_TRUE(bz.ok());
  EXPECT_EQ((*bz)[0].data<uint8_t>()[0], 0);
  EXPECT_EQ((*bz)[0].data<uint8_t>()[1], 0);
}

TEST(Cast, Float16RoundTripAndRounding) {
  // 1 + 2^-11 is halfway between float16 neighbours 1 and 1 + 2^-10: rounds to even (1).
  // 1 + 3 * 2^-11 rounds up to 1 + 2^-9; 65520 overflows to inf; 1e-8 flushes to 0.
  Tensor x = Tensor::from_vector<float>(Shape{6}, {1.f + 0x1p-11f, 1.f + 3 * 0x1p-11f, 65520.f, 1e-8f, -2.5f, 6e-5f});
  auto h = run_op(cpu_reg(), {"Cast", 13, {{"to", one_int(static_cast<int64_t>(DType::kFloat16))}}}, {x});
  ASSERT_TRUE(h.ok());
  const uint16_t* bits = (*h)[0].data<uint16_t>();
  EXPECT_EQ(bits[0], 0x3c00);
  EXPECT_EQ(bits[1], 0x3c02);
  EXPECT_EQ(bits[2], 0x7c00);
  EXPECT_EQ(bits[3], 0x0000);
  EXPECT_EQ(bits[4], 0xc100);
  auto back = run_op(cpu_reg(), {"Cast", 13, {{"to", one_int(static_cast<int64_t>(DType::kFloat32))}}}, {(*h)[0]});
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)[0].data<float>()[4], -2.5f);
  EXPECT_NEAR((*back)[0].data<float>()[5], 6e-5f, 1e-7f);  // a float16 subnormal
}

TEST(Cast, Float16ArraysMatchScalarConversionBitForBit) {
  // Random bit patterns: normals, subnormals, halfway cases, overflow, infinities and NaNs.
  std::mt19937 rng(16);
  Tensor x = Tensor::empty(DType::kFloat32, Shape{4099});
  for (int64_t i = 0; i < x.numel(); ++i) {
    uint32_t bits = static_cast<uint32_t>(rng());
    if (i % 3 == 0) bits = (bits & 0x8fffffffu) | 0x30000000u;  // exponents near float16's range
    std::memcpy(x.data<float>() + i, &bits, 4);
  }
  auto h = run_op(cpu_reg(), {"Cast", 13, {{"to", one_int(static_cast<int64_t>(DType::kFloat16))}}}, {x}, {});
  ASSERT_TRUE(h.ok());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = x.data<float>()[i];
    const uint16_t got = (*h)[0].data<uint16_t>()[i];
    if (std::isnan(v)) {
      EXPECT_TRUE((got & 0x7c00) == 0x7c00 && (got & 0x3ff) != 0) << i;
    } else {
      ASSERT_EQ(got, float_to_half(v)) << "element " << i << " value " << v;
    }
  }
  Tensor all = Tensor::empty(DType::kFloat16, Shape{65536});
  for (int64_t i = 0; i < 65536; ++i) all.data<uint16_t>()[i] = static_cast<uint16_t>(i);
  auto f = run_op(cpu_reg(), {"Cast", 13, {{"to", one_int(static_cast<int64_t>(DType::kFloat32))}}}, {all}, {});
  ASSERT_TRUE(f.ok());
  for (int64_t i = 0; i < 65536; ++i) {
    const float want = half_to_float(static_cast<uint16_t>(i));
    const float got = (*f)[0].data<float>()[i];
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << i;
    } else {
      ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << "half bits " << i;
    }
  }
}

TEST(Cast, ChannelsLastPassesThroughAndBadTargetsFail) {
  std::mt19937 rng(2);
  Tensor x = random_tensor(DType::kFloat32, Shape{1, 3, 4, 5}, rng);
  EvalOptions cl;
  cl.input_layout = Layout::kChannelsLast;
  EXPECT_TRUE(match_reference({"Cast", 13, {{"to", one_int(static_cast<int64_t>(DType::kFloat16))}}}, {x}, {0, 0}, cl));
  auto bad = run_op(cpu_reg(), {"Cast", 13, {{"to", one_int(99)}}}, {x});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnsupported);
  auto none = run_op(cpu_reg(), {"Cast", 13}, {x});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
}

// The small types of opsets 19-25 through Cast's attributes: saturate (19) on float8, round_mode
// (24) on E8M0, and int4 reached by CastLike; values per core/small_types.h.
TEST(Cast, SmallTypesFollowSaturateAndRoundMode) {
  const Tensor x = Tensor::from_vector<float>(Shape{4}, {0.3f, 1e6f, -INFINITY, 9.5f});
  const auto cast = [&](DType to, std::map<std::string, graph::Attribute> extra, int opset = 25) {
    extra["to"] = one_int(static_cast<int64_t>(to));
    auto r = run_op(cpu_reg(), {"Cast", opset, extra}, {x});
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    std::vector<double> v;
    if (r.ok())
      for (int64_t i = 0; i < 4; ++i) v.push_back(element_as_double((*r)[0], i));
    return v;
  };
  const std::vector<double> sat = cast(DType::kFloat8E4M3FN, {});
  EXPECT_EQ(sat, (std::vector<double>{0.3125, 448, -448, 10}));  // 9.5: a tie, even wins
  const std::vector<double> raw = cast(DType::kFloat8E4M3FN, {{"saturate", one_int(0)}});
  EXPECT_TRUE(std::isnan(raw[1]) && std::isnan(raw[2]));
  const std::vector<double> e5 = cast(DType::kFloat8E5M2, {{"saturate", one_int(0)}});
  EXPECT_EQ(e5[1], INFINITY);
  EXPECT_EQ(cast(DType::kFloat8E8M0, {{"round_mode", str("down")}})[3], 8);
  EXPECT_EQ(cast(DType::kFloat8E8M0, {})[3], 16);
  EXPECT_EQ(cast(DType::kFloat4E2M1, {})[1], 6);
  auto bad = run_op(
      cpu_reg(), {"Cast", 25, {{"to", one_int(static_cast<int64_t>(DType::kFloat8E8M0))}, {"round_mode", str("odd")}}},
      {x});
  EXPECT_FALSE(bad.ok());
  // CastLike takes int4 from its second input; back to float32 the values come out truncated and wrapped.
  const Tensor like = Tensor::empty(DType::kInt4, Shape{1});
  auto q = run_op(cpu_reg(), {"CastLike", 21}, {x, like});
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  ASSERT_EQ((*q)[0].dtype(), DType::kInt4);
  EXPECT_EQ(element_as_double((*q)[0], 3), -7);  // 9 wraps in 4 bits
  auto back = run_op(cpu_reg(), {"Cast", 21, {{"to", one_int(static_cast<int64_t>(DType::kFloat32))}}}, {(*q)[0]});
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ((*back)[0].data<float>()[0], 0.f);
  EXPECT_EQ((*back)[0].data<float>()[3], -7.f);
}

}  // namespace
}  // namespace streamline::ops::testing
