// Quantisation kernels against the reference on random shapes (fixed seed): Quantize/Dequantize
// per-tensor and per-axis, uint8 and int8, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul,
// ConvInteger and QLinearConv; plus the spec's worked examples.

#include "ops/extra_test_util.h"

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
    Tensor scale = per_axis ? uniform_f32(Shape{len}, rng, 0.01f, 0.2f) : uniform_f32(Shape{}, rng, 0.01f, 0.2f);
    Tensor zp = q8(qt, per_axis ? Shape{len} : Shape{}, rng);
    NodeCase q("QuantizeLinear", 13, 3), dq("DequantizeLinear", 13, 3);
    q.i("axis", axis);
    dq.i("axis", axis);
    expect_cpu_matches_reference(q, {uniform_f32(s, rng, -20.f, 20.f), scale, zp}, 0.0, "quantize " + s.to_string());
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

TEST(Quant, DynamicQuantizeMatchesReference) {
  std::mt19937 rng(602);
  for (int iter = 0; iter < 8; ++iter) {
    NodeCase c("DynamicQuantizeLinear", 11, 1, 3);
    const float lo = iter % 2 ? 0.5f : -3.f;
    expect_cpu_matches_reference(c, {uniform_f32(random_shape(rng, 1, 3, 6), rng, lo, 4.f)}, 1e-7);
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
    expect_cpu_matches_reference(
        ql,
        {a, uniform_f32(Shape{}, rng, 0.01f, 0.05f), q8(at, Shape{}, rng), b, uniform_f32(Shape{}, rng, 0.01f, 0.05f),
         q8(bt, Shape{}, rng), uniform_f32(Shape{}, rng, 0.05f, 0.3f), q8(yt, Shape{}, rng)},
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
                                 {x, uniform_f32(Shape{}, rng, 0.01f, 0.05f), q8(DType::kUInt8, Shape{}, rng), wt,
                                  uniform_f32(Shape{m}, rng, 0.01f, 0.05f), wzp, uniform_f32(Shape{}, rng, 0.1f, 0.5f),
                                  q8(DType::kUInt8, Shape{}, rng), bias},
                                 0.0, "QLinearConv");
  }
}

}  // namespace
}  // namespace streamline::ops::testing
