// Quantisation kernels against the reference on random shapes (fixed seed): Quantize/Dequantize
// per-tensor and per-axis, uint8 and int8, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul,
// ConvInteger and QLinearConv; plus the spec's worked examples.

#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

Tensor q8(DType dt, const Shape& s, std::mt19937& rng) {
  Tensor t = Tensor::empty(dt, s);
  for (int64_t k = 0; k < t.numel(); ++k) {
    const int v =
        std::uniform_int_distribution<int>(dt == DType::kInt8 ? -128 : 0, dt == DType::kInt8 ? 127 : 255)(rng);
    if (dt == DType::kInt8)
      t.data<int8_t>()[k] = static_cast<int8_t>(v);
    else
      t.data<uint8_t>()[k] = static_cast<uint8_t>(v);
  }
  return t;
}

TEST(Quant, QuantizeDequantizeMatchReference) {
  std::mt19937 rng(601);
  for (int iter = 0; iter < 24; ++iter) {
    const DType qt = iter % 2 ? DType::kInt8 : DType::kUInt8;
    const Shape s = random_shape(rng, 1, 4, 5);
    const bool per_axis = iter % 3 == 0;
    const int64_t rank = static_cast<int64_t>(s.rank());
    const int64_t axis = per_axis ? std::uniform_int_distribution<int64_t>(-rank, rank - 1)(rng) : 1;
    const int64_t len = per_axis ? s[static_cast<size_t>(axis < 0 ? axis + rank : axis)] : 1;
    Tensor scale = per_axis ? random_tensor(Shape{len}, rng, 0.01f, 0.2f) : random_tensor(Shape{}, rng, 0.01f, 0.2f);
    Tensor zp = q8(qt, per_axis ? Shape{len} : Shape{}, rng);
    NodeCase q("QuantizeLinear", 13, 3), dq("DequantizeLinear", 13, 3);
    q.i("axis", axis);
    dq.i("axis", axis);
    expect_cpu_matches_reference(q, {random_tensor(s, rng, -20.f, 20.f), scale, zp}, 0.0, "quantize " + s.to_string());
    expect_cpu_matches_reference(dq, {q8(qt, s, rng), scale, zp}, 1e-6, "dequantize " + s.to_string());
  }
}

TEST(Quant, QuantizeRoundsHalfToEvenAndSaturates) {
  Tensor x = Tensor::from_vector<float>(Shape{5}, {0.5f, 1.5f, 2.5f, 1000.f, -1000.f});
  NodeCase q("QuantizeLinear", 13, 2);
  auto out = q.run(cpu_reg(), {x, Tensor::scalar<float>(1.f)});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values<uint8_t>((*out)[0]), (std::vector<uint8_t>{0, 2, 2, 255, 0}));
}

// Opset 21: blocks of block_size along axis share a scale and zero point; 16-bit outputs; the
// output type from output_dtype when there is no zero point; DequantizeLinear gives the scale's
// dtype (float16 here).
TEST(Quant, BlockedSixteenBitAndOutputDtype) {
  // x [2, 5], blocks of 2 along axis 1: 3 blocks per row.
  Tensor x = Tensor::from_vector<float>(Shape{2, 5}, {1, 2, 3, 4, 5, -1, -2, -3, -4, -5});
  Tensor scale = Tensor::from_vector<float>(Shape{2, 3}, {1, 0.5f, 0.25f, 2, 4, 8});
  Tensor zp = Tensor::from_vector<int16_t>(Shape{2, 3}, {0, 10, -10, 0, 100, 1000});
  NodeCase q("QuantizeLinear", 21, 3);
  q.i("axis", 1).i("block_size", 2);
  auto y = q.run(cpu_reg(), {x, scale, zp});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  ASSERT_EQ((*y)[0].dtype(), DType::kInt16);
  // Row 0: 1/1, 2/1, 3/0.5+10, 4/0.5+10, 5/0.25-10; row 1: -0.5 -> 0 (half to even), -1, -0.75 -> -1 (+100), ...
  EXPECT_EQ(values<int16_t>((*y)[0]), (std::vector<int16_t>{1, 2, 16, 18, 10, 0, -1, 99, 99, 999}));
  NodeCase dq("DequantizeLinear", 21, 3);
  dq.i("axis", 1).i("block_size", 2);
  auto back = dq.run(cpu_reg(), {(*y)[0], scale, zp});
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(values<float>((*back)[0]), (std::vector<float>{1, 2, 3, 4, 5, 0, -2, -4, -4, -8}));
  // A scale of the wrong blocked shape is an error.
  EXPECT_FALSE(q.run(cpu_reg(), {x, Tensor::from_vector<float>(Shape{2, 2}, {1, 1, 1, 1}), zp}).ok());
  // No zero point: output_dtype picks uint16.
  NodeCase q16("QuantizeLinear", 21, 2);
  q16.i("output_dtype", static_cast<int64_t>(DType::kUInt16));
  auto u = q16.run(cpu_reg(), {Tensor::from_vector<float>(Shape{2}, {70000.f, 12.4f}), Tensor::scalar<float>(1.f)});
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  ASSERT_EQ((*u)[0].dtype(), DType::kUInt16);
  EXPECT_EQ(values<uint16_t>((*u)[0]), (std::vector<uint16_t>{65535, 12}));
  // float16 scale: float16 output.
  Tensor hs = Tensor::from_vector<uint16_t>(Shape{}, {float_to_half(0.5f)});
  Tensor half_scale = Tensor::empty(DType::kFloat16, Shape{});
  std::memcpy(half_scale.raw(), hs.raw(), 2);
  auto h =
      NodeCase("DequantizeLinear", 21, 2).run(cpu_reg(), {Tensor::from_vector<int8_t>(Shape{2}, {3, -4}), half_scale});
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  ASSERT_EQ((*h)[0].dtype(), DType::kFloat16);
  EXPECT_EQ(half_to_float((*h)[0].data<uint16_t>()[1]), -2.f);
}

TEST(Quant, DynamicQuantizeMatchesReference) {
  std::mt19937 rng(602);
  for (int iter = 0; iter < 8; ++iter) {
    NodeCase c("DynamicQuantizeLinear", 11, 1, 3);
    const float lo = iter % 2 ? 0.5f : -3.f;
    expect_cpu_matches_reference(c, {random_tensor(random_shape(rng, 1, 3, 6), rng, lo, 4.f)}, 1e-7);
  }
}

TEST(Quant, IntegerMatMulsMatchReference) {
  std::mt19937 rng(603);
  for (int iter = 0; iter < 16; ++iter) {
    const DType at = iter % 2 ? DType::kInt8 : DType::kUInt8, bt = iter % 4 < 2 ? DType::kUInt8 : DType::kInt8;
    const int64_t m = 1 + rng() % 5, k = 1 + rng() % 6, n = 1 + rng() % 5;
    Shape as{m, k}, bs{k, n};
    if (iter % 3 == 0) {
      as = Shape{2, m, k};
      bs = iter % 2 ? Shape{1, k, n} : Shape{2, k, n};
    }
    const bool per_row = iter % 5 == 0;
    Tensor a = q8(at, as, rng), b = q8(bt, bs, rng);
    Tensor azp = q8(at, per_row ? Shape{m} : Shape{}, rng), bzp = q8(bt, per_row ? Shape{n} : Shape{}, rng);
    NodeCase mi("MatMulInteger", 10, 4);
    expect_cpu_matches_reference(mi, {a, b, azp, bzp}, 0.0, "MatMulInteger");
    const DType yt = iter % 3 ? DType::kUInt8 : DType::kInt8;
    NodeCase ql("QLinearMatMul", 10, 8);
    expect_cpu_matches_reference(ql,
                                 {a, random_tensor(Shape{}, rng, 0.01f, 0.05f), q8(at, Shape{}, rng), b,
                                  random_tensor(Shape{}, rng, 0.01f, 0.05f), q8(bt, Shape{}, rng),
                                  random_tensor(Shape{}, rng, 0.05f, 0.3f), q8(yt, Shape{}, rng)},
                                 0.0, "QLinearMatMul");
  }
}

TEST(Quant, IntegerConvsMatchReference) {
  std::mt19937 rng(604);
  for (int iter = 0; iter < 12; ++iter) {
    const int64_t group = iter % 3 == 2 ? 2 : 1;
    const int64_t c = group * (1 + rng() % 2), m = group * (1 + rng() % 3);
    const int64_t h = 3 + rng() % 4, w = 3 + rng() % 4, kh = 1 + rng() % 3, kw = 1 + rng() % 3;
    Tensor x = q8(DType::kUInt8, Shape{1 + static_cast<int64_t>(rng() % 2), c, h, w}, rng);
    Tensor wt = q8(iter % 2 ? DType::kInt8 : DType::kUInt8, Shape{m, c / group, kh, kw}, rng);
    const std::vector<int64_t> pads = {iter % 2, 1, 0, iter % 2}, strides = {1 + iter % 2, 1};
    NodeCase ci("ConvInteger", 10, 4);
    ci.ints("pads", pads).ints("strides", strides).i("group", group);
    Tensor wzp = iter % 4 == 0 ? q8(wt.dtype(), Shape{m}, rng) : q8(wt.dtype(), Shape{}, rng);
    expect_cpu_matches_reference(ci, {x, wt, q8(DType::kUInt8, Shape{}, rng), wzp}, 0.0, "ConvInteger");
    NodeCase qc("QLinearConv", 10, 9);
    qc.ints("pads", pads).ints("strides", strides).i("group", group);
    Tensor bias = Tensor::empty(DType::kInt32, Shape{m});
    for (int64_t k = 0; k < m; ++k) bias.data<int32_t>()[k] = static_cast<int32_t>(rng() % 200) - 100;
    expect_cpu_matches_reference(qc,
                                 {x, random_tensor(Shape{}, rng, 0.01f, 0.05f), q8(DType::kUInt8, Shape{}, rng), wt,
                                  random_tensor(Shape{m}, rng, 0.01f, 0.05f), wzp,
                                  random_tensor(Shape{}, rng, 0.1f, 0.5f), q8(DType::kUInt8, Shape{}, rng), bias},
                                 0.0, "QLinearConv");
  }
}

}  // namespace
}  // namespace streamline::ops::testing
