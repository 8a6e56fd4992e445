// The shape functions the CPU and CUDA kernels share (ops/op_params.h): broadcasting, MatMul,
// Gemm, convolution axes and whole convolution geometries (float and int8 Conv kernels alike).

#include <gtest/gtest.h>

#include "ops/op_params.h"
#include "ops/op_test_util.h"

namespace streamline::ops {
namespace {

TEST(SharedShapes, BroadcastFollowsNumpyAndNamesTheNode) {
  auto y = broadcast_shape(Shape{2, 1, 4}, Shape{3, 1}, "Add 'a'");
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(*y, (Shape{2, 3, 4}));
  auto bad = broadcast_shape(Shape{2, 3}, Shape{4}, "Add 'a'");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "Add 'a': shapes [2,3] and [4] do not broadcast") << bad.status().to_string();
}

TEST(SharedShapes, MatMulBroadcastsBatchDimsAndDropsPromotedAxes) {
  auto s = matmul_shapes(Shape{5, 1, 2, 3}, Shape{4, 3, 7}, "MatMul 'm'");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->y, (Shape{5, 4, 2, 7}));
  EXPECT_EQ(s->batch, (Shape{5, 4}));
  EXPECT_EQ(s->a_batch, (Shape{5, 1}));
  EXPECT_EQ(s->b_batch, (Shape{4}));
  EXPECT_EQ(s->m, 2);
  EXPECT_EQ(s->k, 3);
  EXPECT_EQ(s->n, 7);
  // 1-D operands: [K] x [K, N] -> [N]; [M, K] x [K] -> [M]; [K] x [K] -> [].
  EXPECT_EQ(matmul_shapes(Shape{3}, Shape{3, 7}, "m")->y, (Shape{7}));
  EXPECT_EQ(matmul_shapes(Shape{2, 3}, Shape{3}, "m")->y, (Shape{2}));
  EXPECT_EQ(matmul_shapes(Shape{3}, Shape{3}, "m")->y, Shape{});
  EXPECT_TRUE(matmul_shapes(Shape{2, 0}, Shape{0, 4}, "m").ok());  // K = 0 is each kernel's call

  auto inner = matmul_shapes(Shape{2, 3}, Shape{4, 5}, "MatMul 'm'");
  EXPECT_EQ(inner.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(inner.status().message().find("MatMul 'm': inner dimensions differ"), std::string::npos);
  auto batch = matmul_shapes(Shape{2, 2, 3}, Shape{3, 3, 5}, "MatMul 'm'");
  EXPECT_EQ(batch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(batch.status().message().find("do not broadcast"), std::string::npos) << batch.status().to_string();
  EXPECT_EQ(matmul_shapes(Shape{}, Shape{3}, "m").status().code(), StatusCode::kInvalidArgument);
}

TEST(SharedShapes, GemmTransposesAndChecksC) {
  auto g = gemm_shapes(Shape{3, 2}, Shape{5, 3}, /*trans_a=*/true, /*trans_b=*/true, "Gemm 'g'");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->m, 2);
  EXPECT_EQ(g->k, 3);
  EXPECT_EQ(g->n, 5);
  EXPECT_FALSE(gemm_shapes(Shape{3, 2}, Shape{5, 3}, false, false, "g").ok());
  EXPECT_FALSE(gemm_shapes(Shape{1, 3, 2}, Shape{2, 3}, false, false, "g").ok());

  for (const Shape& c : {Shape{}, Shape{5}, Shape{1, 5}, Shape{2, 1}, Shape{2, 5}})
    EXPECT_TRUE(check_gemm_c(c, *g, "g").ok()) << c.to_string();
  for (const Shape& c : {Shape{2}, Shape{3, 5}, Shape{1, 2, 5}}) {
    const Status s = check_gemm_c(c, *g, "Gemm 'g'");
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.to_string();
    EXPECT_NE(s.message().find("does not broadcast to [2,5]"), std::string::npos) << s.to_string();
  }
}

TEST(SharedShapes, ConvAxisPadsAndSizesLikeOnnx) {
  // Explicit pads: (7 + 1 + 2 - 3) / 2 + 1 = 4.
  auto a = conv_axis(/*in=*/7, /*kernel=*/3, /*stride=*/2, /*dilation=*/1, 1, 2, AutoPad::kNotSet, "c");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->out, 4);
  EXPECT_EQ(a->pad_begin, 1);
  EXPECT_EQ(a->pad_end, 2);
  // SAME keeps ceil(in / stride) outputs; the odd pad goes to the end (UPPER) or the start (LOWER).
  auto up = conv_axis(6, 4, 1, 1, 0, 0, AutoPad::kSameUpper, "c");
  auto low = conv_axis(6, 4, 1, 1, 0, 0, AutoPad::kSameLower, "c");
  ASSERT_TRUE(up.ok() && low.ok());
  EXPECT_EQ(up->out, 6);
  EXPECT_EQ(up->pad_begin, 1);
  EXPECT_EQ(up->pad_end, 2);
  EXPECT_EQ(low->pad_begin, 2);
  EXPECT_EQ(low->pad_end, 1);
  // VALID drops the explicit pads; dilation 2 makes a 3-tap kernel 5 wide: (9 - 5) / 1 + 1.
  auto valid = conv_axis(9, 3, 1, 2, 4, 4, AutoPad::kValid, "c");
  ASSERT_TRUE(valid.ok());
  EXPECT_EQ(valid->out, 5);
  EXPECT_EQ(valid->pad_begin + valid->pad_end, 0);
  // A kernel wider than the padded input, even when the stride would round the size up to 1.
  auto wide = conv_axis(2, 4, 2, 1, 0, 1, AutoPad::kNotSet, "Conv 'c'");
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("Conv 'c': kernel extent 4 exceeds padded input 3"), std::string::npos)
      << wide.status().to_string();

  EXPECT_EQ(*parse_auto_pad("", "c"), AutoPad::kNotSet);
  EXPECT_EQ(*parse_auto_pad("SAME_LOWER", "c"), AutoPad::kSameLower);
  auto bad = parse_auto_pad("SAME", "Conv 'c'");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown auto_pad 'SAME'"), std::string::npos);
}

TEST(SharedShapes, ConvGeometryReadsAttributesAndChecksWeights) {
  graph::Graph g;
  const auto x = g.add_value("x", DType::kFloat32);
  const auto w = g.add_value("w", DType::kFloat32);
  const auto y = g.add_value("y", DType::kFloat32);
  const auto n = g.add_node("Conv", "c", {x, w}, {y});
  g.node(n).attrs["strides"] = testing::ints({2, 1});
  g.node(n).attrs["pads"] = testing::ints({1, 0, 1, 0});
  g.node(n).attrs["group"] = testing::one_int(2);
  auto a = read_conv_attrs(g.node(n), /*transposed=*/false);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  auto geom = conv_geometry("Conv 'c'", *a, Shape{1, 4, 9, 5}, Shape{6, 2, 3, 1});
  ASSERT_TRUE(geom.ok()) << geom.status().to_string();
  EXPECT_EQ(geom->m, 6);
  EXPECT_EQ(geom->group, 2);
  EXPECT_EQ(geom->out, (std::vector<int64_t>{5, 5}));
  EXPECT_EQ(geom->pad_l, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(geom->y_shape, (Shape{1, 6, 5, 5}));
  // Weights for another channel count, a group that does not divide the input, pads of the wrong size.
  auto wrong_c = conv_geometry("Conv 'c'", *a, Shape{1, 6, 9, 5}, Shape{6, 2, 3, 1});
  ASSERT_FALSE(wrong_c.ok());
  EXPECT_NE(wrong_c.status().message().find("Conv 'c': weight [6,2,3,1] expects 4 input channels, input has 6"),
            std::string::npos)
      << wrong_c.status().to_string();
  ConvAttrs three = *a;
  three.group = 3;
  EXPECT_FALSE(conv_geometry("Conv 'c'", three, Shape{1, 4, 9, 5}, Shape{6, 2, 3, 1}).ok());
  ConvAttrs short_pads = *a;
  short_pads.pads = {1, 1};
  auto bad_pads = conv_geometry("Conv 'c'", short_pads, Shape{1, 4, 9, 5}, Shape{6, 2, 3, 1});
  ASSERT_FALSE(bad_pads.ok());
  EXPECT_NE(bad_pads.status().message().find("pads has 2 values, expected 4"), std::string::npos)
      << bad_pads.status().to_string();
  g.node(n).attrs["strides"] = testing::ints({0, 1});
  EXPECT_EQ(read_conv_attrs(g.node(n), false).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace streamline::ops
