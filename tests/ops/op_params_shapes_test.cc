// The shape functions the CPU and CUDA kernels share (ops/op_params.h, ops/data_shapes.h): axes and
// constant inputs, broadcasting, MatMul, Gemm, convolution axes and whole convolution geometries
// (float and int8 Conv kernels alike), reductions, global pools, Transpose, Concat, Gather and the
// view ops. Each error case checks the node's name and the bad value in the message.

#include <gtest/gtest.h>

#include "ops/data_shapes.h"
#include "ops/op_params.h"
#include "ops/op_test_util.h"

namespace streamline::ops {
namespace {

// The message of a failed result, "" when it succeeded (so a missing error fails the EXPECT).
template <typename T>
std::string error_of(const Result<T>& r) {
  return r.ok() ? std::string() : r.status().message();
}

// `message` contains every piece.
void expect_mentions(const std::string& message, std::initializer_list<const char*> pieces) {
  for (const char* p : pieces) EXPECT_NE(message.find(p), std::string::npos) << "'" << p << "' not in: " << message;
}

// A one-node graph whose node has `num_inputs` inputs, `num_outputs` outputs and the given opset.
struct NodeFixture {
  graph::Graph g;
  graph::NodeId n = 0;
  NodeFixture(const std::string& op, int opset, size_t num_inputs = 1, size_t num_outputs = 1) {
    std::vector<graph::ValueId> in, out;
    for (size_t i = 0; i < num_inputs; ++i) in.push_back(g.add_value("x" + std::to_string(i), DType::kFloat32));
    for (size_t i = 0; i < num_outputs; ++i) out.push_back(g.add_value("y" + std::to_string(i), DType::kFloat32));
    n = g.add_node(op, "n", in, out);
    g.node(n).opset = opset;
  }
  graph::Node& node() { return g.node(n); }
};

TensorInfo info(DType t, const Shape& s) {
  TensorInfo i;
  i.dtype = t;
  i.shape = s;
  return i;
}
TensorInfo f32(const Shape& s) {
  return info(DType::kFloat32, s);
}

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

TEST(SharedShapes, NormalizeAxisCountsFromTheBackAndNamesTheBadAxis) {
  EXPECT_EQ(*normalize_axis(-1, 3, "Softmax 's'"), 2);
  EXPECT_EQ(*normalize_axis(0, 3, "Softmax 's'"), 0);
  EXPECT_EQ(*normalize_axis(-3, 3, "Softmax 's'"), 0);
  EXPECT_EQ(error_of(normalize_axis(3, 3, "Softmax 's'")), "Softmax 's': axis 3 is out of range for rank 3");
  EXPECT_EQ(error_of(normalize_axis(-4, 3, "Softmax 's'")), "Softmax 's': axis -4 is out of range for rank 3");
  EXPECT_EQ(normalize_axis(0, 0, "s").status().code(), StatusCode::kInvalidArgument);
  int64_t a = -7;
  EXPECT_TRUE(normalize_axis(-2, 4, &a));
  EXPECT_EQ(a, 2);
  EXPECT_FALSE(normalize_axis(4, 4, &a));
  EXPECT_EQ(a, 2);  // untouched when out of range
}

TEST(SharedShapes, ConstantIntsReadsIntegerConstantsOnly) {
  const Tensor i64s = testing::i64({3, -1});
  EXPECT_EQ(*constant_ints(testing::info_of(i64s), "axes", "R 'r'"), (std::vector<int64_t>{3, -1}));
  const Tensor i32s = Tensor::from_vector<int32_t>(Shape{2}, {4, 5});
  EXPECT_EQ(*constant_ints(testing::info_of(i32s), "axes", "R 'r'"), (std::vector<int64_t>{4, 5}));
  auto runtime = constant_ints(testing::info_of(i64s, /*constant=*/false), "axes", "R 'r'");
  EXPECT_EQ(runtime.status().code(), StatusCode::kUnsupported);
  expect_mentions(error_of(runtime), {"R 'r'", "'axes'"});
  const Tensor floats = Tensor::from_vector<float>(Shape{1}, {1.f});
  auto wrong = constant_ints(testing::info_of(floats), "axes", "R 'r'");
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  expect_mentions(error_of(wrong), {"R 'r'", "'axes' must be int32 or int64, got float32"});
}

TEST(SharedShapes, ReduceAxesFromAttributeOrInput) {
  // ReduceMean before opset 18: the attribute, negative axes counted from the back.
  NodeFixture mean("ReduceMean", 13);
  mean.node().attrs["axes"] = testing::ints({1, -1});
  mean.node().attrs["keepdims"] = testing::one_int(0);
  const ReduceAttrs ma = read_reduce_attrs(mean.node());
  EXPECT_FALSE(ma.axes_from_input);
  TensorInfo x = f32(Shape{2, 3, 4});
  auto r = reduce_axes(ma, {&x, 1}, "ReduceMean 'n'");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->reduced, (std::vector<bool>{false, true, true}));
  EXPECT_EQ(r->y, (Shape{2}));
  EXPECT_FALSE(r->identity);

  // ReduceSum from opset 13 and the others from 18 read input 1 and ignore any attribute.
  NodeFixture sum("ReduceSum", 13, 2);
  sum.node().attrs["axes"] = testing::ints({0});
  const ReduceAttrs sa = read_reduce_attrs(sum.node());
  EXPECT_TRUE(sa.axes_from_input);
  EXPECT_TRUE(read_reduce_attrs(NodeFixture("ReduceMax", 18).node()).axes_from_input);
  EXPECT_FALSE(read_reduce_attrs(NodeFixture("ReduceMax", 17).node()).axes_from_input);
  const Tensor axes = testing::i64({-2});
  const TensorInfo with_axes[] = {x, testing::info_of(axes)};
  auto s1 = reduce_axes(sa, with_axes, "ReduceSum 'n'");
  ASSERT_TRUE(s1.ok()) << s1.status().to_string();
  EXPECT_EQ(s1->y, (Shape{2, 1, 4}));  // keepdims defaults to 1

  // No axes: every dim, or none with noop_with_empty_axes (the output is the input).
  auto all = reduce_axes(sa, {&x, 1}, "ReduceSum 'n'");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->y, (Shape{1, 1, 1}));
  sum.node().attrs["noop_with_empty_axes"] = testing::one_int(1);
  auto noop = reduce_axes(read_reduce_attrs(sum.node()), {&x, 1}, "ReduceSum 'n'");
  ASSERT_TRUE(noop.ok());
  EXPECT_TRUE(noop->identity);
  EXPECT_EQ(noop->y, (Shape{2, 3, 4}));

  // Errors: an axis out of range, axes known only at run time, float axes, no data input.
  ReduceAttrs bad = ma;
  bad.axes = {3};
  EXPECT_EQ(error_of(reduce_axes(bad, {&x, 1}, "ReduceMean 'n'")), "ReduceMean 'n': axis 3 is out of range for rank 3");
  const TensorInfo runtime[] = {x, testing::info_of(axes, /*constant=*/false)};
  auto rt = reduce_axes(sa, runtime, "ReduceSum 'n'");
  EXPECT_EQ(rt.status().code(), StatusCode::kUnsupported);
  expect_mentions(error_of(rt), {"ReduceSum 'n'", "'axes'"});
  const Tensor float_axes = Tensor::from_vector<float>(Shape{1}, {0.f});
  const TensorInfo floats[] = {x, testing::info_of(float_axes)};
  EXPECT_EQ(reduce_axes(sa, floats, "ReduceSum 'n'").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(error_of(reduce_axes(sa, {}, "ReduceSum 'n'")), "ReduceSum 'n': missing input 'data'");
}

TEST(SharedShapes, GlobalPoolWindowIsTheWholeAxis) {
  auto axes = pool_axes(PoolAttrs{}, Shape{2, 3, 5, 7}, /*global=*/true, "GlobalAveragePool 'p'");
  ASSERT_TRUE(axes.ok()) << axes.status().to_string();
  ASSERT_EQ(axes->size(), 2u);
  EXPECT_EQ((*axes)[0].k, 5);
  EXPECT_EQ((*axes)[1].k, 7);
  for (const PoolAxis& a : *axes) {
    EXPECT_EQ(a.out, 1);
    EXPECT_EQ(a.s, 1);
    EXPECT_EQ(a.pad_begin + a.pad_end, 0);
  }
  // A global pool ignores window attributes, whatever their length.
  PoolAttrs stray;
  stray.kernel_shape = {2};
  EXPECT_TRUE(pool_axes(stray, Shape{1, 1, 4, 4, 4}, true, "p").ok());
  NodeFixture two_inputs("GlobalMaxPool", 1, 2);
  EXPECT_EQ(error_of(read_pool_attrs(two_inputs.node(), true, "GlobalMaxPool 'n'")),
            "GlobalMaxPool 'n': expects one input");
}

TEST(SharedShapes, TransposeChecksThePermutation) {
  auto rev = transpose_shape(TransposeAttrs{}, Shape{2, 3, 4}, "Transpose 't'");
  ASSERT_TRUE(rev.ok()) << rev.status().to_string();
  EXPECT_EQ(rev->perm, (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(rev->y, (Shape{4, 3, 2}));
  auto p = transpose_shape(TransposeAttrs{true, {0, 2, 1}}, Shape{2, 3, 4}, "Transpose 't'");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->y, (Shape{2, 4, 3}));
  EXPECT_EQ(transpose_shape(TransposeAttrs{}, Shape{}, "t")->y, Shape{});

  NodeFixture t("Transpose", 13);
  EXPECT_FALSE(read_transpose_attrs(t.node()).has_perm);
  t.node().attrs["perm"] = testing::ints({1, 0});
  const TransposeAttrs read = read_transpose_attrs(t.node());
  EXPECT_TRUE(read.has_perm);
  EXPECT_EQ(read.perm, (std::vector<int64_t>{1, 0}));

  EXPECT_EQ(error_of(transpose_shape(read, Shape{2, 3, 4}, "Transpose 't'")),
            "Transpose 't': perm has 2 entries for rank 3");
  for (const std::vector<int64_t>& bad :
       {std::vector<int64_t>{0, 0, 1}, std::vector<int64_t>{0, 1, 3}, std::vector<int64_t>{-1, 0, 1}}) {
    const std::string msg = error_of(transpose_shape(TransposeAttrs{true, bad}, Shape{2, 3, 4}, "Transpose 't'"));
    EXPECT_EQ(msg, "Transpose 't': perm " + Shape(bad).to_string() + " is not a permutation of rank 3");
  }
}

TEST(SharedShapes, ConcatSumsTheAxisAndChecksTheRest) {
  const TensorInfo parts[] = {f32({2, 3}), f32({2, 5}), f32({2, 1})};
  auto c = concat_shape(parts, -1, "Concat 'c'");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->axis, 1);
  EXPECT_EQ(c->y, (Shape{2, 9}));
  const TensorInfo one[] = {f32({4})};
  EXPECT_EQ(concat_shape(one, 0, "c")->y, (Shape{4}));

  NodeFixture old_concat("Concat", 1);
  EXPECT_EQ(*read_concat_axis(old_concat.node()), 1);
  NodeFixture concat("Concat", 13);
  EXPECT_EQ(error_of(read_concat_axis(concat.node())), "Concat 'n': missing attribute 'axis'");
  concat.node().attrs["axis"] = testing::one_int(-2);
  EXPECT_EQ(*read_concat_axis(concat.node()), -2);

  EXPECT_EQ(error_of(concat_shape({}, 0, "Concat 'c'")), "Concat 'c': needs at least one input");
  const TensorInfo missing[] = {f32({2}), TensorInfo{}};
  EXPECT_EQ(error_of(concat_shape(missing, 0, "Concat 'c'")), "Concat 'c': input 1 is missing");
  const TensorInfo scalars[] = {f32({}), f32({})};
  EXPECT_EQ(error_of(concat_shape(scalars, 0, "Concat 'c'")), "Concat 'c': cannot concatenate scalars");
  EXPECT_EQ(error_of(concat_shape(parts, 2, "Concat 'c'")), "Concat 'c': axis 2 is out of range for rank 2");
  const TensorInfo dtypes[] = {f32({2, 3}), info(DType::kInt64, {2, 3})};
  EXPECT_EQ(error_of(concat_shape(dtypes, 0, "Concat 'c'")),
            "Concat 'c': input 1 has dtype int64, input 0 has float32");
  const TensorInfo ranks[] = {f32({2, 3}), f32({2, 3, 1})};
  EXPECT_EQ(error_of(concat_shape(ranks, 0, "Concat 'c'")), "Concat 'c': input 1 has rank 3, input 0 has rank 2");
  const TensorInfo dims[] = {f32({2, 3}), f32({3, 3})};
  EXPECT_EQ(error_of(concat_shape(dims, 1, "Concat 'c'")),
            "Concat 'c': input 1 shape [3,3] does not match input 0 shape [2,3] off axis 1");
  const TensorInfo strings[] = {info(DType::kString, {2})};
  EXPECT_EQ(concat_shape(strings, 0, "Concat 'c'").status().code(), StatusCode::kUnsupported);
}

TEST(SharedShapes, GatherPutsTheIndexDimsAtTheAxis) {
  const TensorInfo in[] = {f32({2, 3, 4}), info(DType::kInt64, {5, 6})};
  auto g = gather_shape(in, -2, "Gather 'g'");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->axis, 1);
  EXPECT_EQ(g->y, (Shape{2, 5, 6, 4}));
  const TensorInfo scalar_index[] = {f32({2, 3, 4}), info(DType::kInt32, {})};
  EXPECT_EQ(gather_shape(scalar_index, 0, "g")->y, (Shape{3, 4}));

  EXPECT_EQ(error_of(gather_shape({in, 1}, 0, "Gather 'g'")), "Gather 'g': needs inputs 'data' and 'indices'");
  const TensorInfo float_index[] = {f32({2, 3}), f32({1})};
  EXPECT_EQ(error_of(gather_shape(float_index, 0, "Gather 'g'")),
            "Gather 'g': 'indices' must be int32 or int64, got float32");
  EXPECT_EQ(error_of(gather_shape(in, 3, "Gather 'g'")), "Gather 'g': axis 3 is out of range for rank 3");
  EXPECT_EQ(check_index_dtype(DType::kInt32, "indices", "g").code(), StatusCode::kOk);
  EXPECT_EQ(check_movable(DType::kString, "g").code(), StatusCode::kUnsupported);
  EXPECT_EQ(check_movable(DType::kUndefined, "g").code(), StatusCode::kInvalidArgument);
}

TEST(SharedShapes, ReshapeCopiesZerosAndInfersOneDim) {
  const Shape x{2, 3, 4};
  EXPECT_EQ(*reshape_shape(x, {0, -1}, false, "r"), (Shape{2, 12}));
  EXPECT_EQ(*reshape_shape(x, {4, 0, 2}, false, "r"), (Shape{4, 3, 2}));
  EXPECT_EQ(*reshape_shape(Shape{0, 4}, {4, 0}, /*allowzero=*/true, "r"), (Shape{4, 0}));
  EXPECT_EQ(error_of(reshape_shape(x, {-1, -1}, false, "Reshape 'r'")),
            "Reshape 'r': shape [-1,-1] has more than one -1");
  EXPECT_EQ(error_of(reshape_shape(x, {-2, 12}, false, "Reshape 'r'")),
            "Reshape 'r': shape [-2,12] has an invalid negative dimension");
  EXPECT_EQ(error_of(reshape_shape(x, {6, 2, 2, 0}, false, "Reshape 'r'")),
            "Reshape 'r': shape [6,2,2,0] copies dimension 3 of a rank-3 input");
  EXPECT_EQ(error_of(reshape_shape(x, {0, -1}, true, "Reshape 'r'")),
            "Reshape 'r': shape [0,-1] has both 0 and -1 with allowzero=1");
  EXPECT_EQ(error_of(reshape_shape(x, {5, -1}, false, "Reshape 'r'")),
            "Reshape 'r': cannot infer the -1 of shape [5,-1] for input [2,3,4]");
  EXPECT_EQ(error_of(reshape_shape(x, {5, 5}, false, "Reshape 'r'")),
            "Reshape 'r': cannot view [2,3,4] (24 elements) as [5,5] (25 elements)");
}

TEST(SharedShapes, FlattenSqueezeAndUnsqueezeShapes) {
  const Shape x{2, 3, 4};
  EXPECT_EQ(*flatten_shape(x, 0, "f"), (Shape{1, 24}));
  EXPECT_EQ(*flatten_shape(x, 3, "f"), (Shape{24, 1}));
  EXPECT_EQ(*flatten_shape(x, -1, "f"), (Shape{6, 4}));
  EXPECT_EQ(error_of(flatten_shape(x, 4, "Flatten 'f'")), "Flatten 'f': axis 4 is out of range for rank 3");
  EXPECT_EQ(error_of(flatten_shape(x, -4, "Flatten 'f'")), "Flatten 'f': axis -4 is out of range for rank 3");

  const Shape ones{1, 3, 1};
  EXPECT_EQ(*squeeze_shape(ones, {}, false, "s"), (Shape{3}));
  EXPECT_EQ(*squeeze_shape(ones, {}, true, "s"), (Shape{3}));  // an empty list squeezes every 1
  EXPECT_EQ(*squeeze_shape(ones, {-1}, true, "s"), (Shape{1, 3}));
  EXPECT_EQ(error_of(squeeze_shape(ones, {1}, true, "Squeeze 's'")),
            "Squeeze 's': cannot squeeze axis 1 of size 3 in [1,3,1]");
  EXPECT_EQ(error_of(squeeze_shape(ones, {0, -3}, true, "Squeeze 's'")), "Squeeze 's': axis -3 is repeated");
  EXPECT_EQ(error_of(squeeze_shape(ones, {3}, true, "Squeeze 's'")), "Squeeze 's': axis 3 is out of range for rank 3");

  EXPECT_EQ(*unsqueeze_shape(Shape{3, 4}, {0, -1}, "u"), (Shape{1, 3, 4, 1}));
  EXPECT_EQ(*unsqueeze_shape(Shape{}, {0}, "u"), (Shape{1}));
  EXPECT_EQ(error_of(unsqueeze_shape(Shape{3, 4}, {1, 1}, "Unsqueeze 'u'")), "Unsqueeze 'u': axis 1 is repeated");
  EXPECT_EQ(error_of(unsqueeze_shape(Shape{3, 4}, {3}, "Unsqueeze 'u'")),
            "Unsqueeze 'u': axis 3 is out of range for rank 3");
}

TEST(SharedShapes, ViewOpsReadAttributesOrConstantInputs) {
  const Tensor data = Tensor::empty(DType::kFloat32, Shape{2, 1, 3});
  const Tensor target = testing::i64({3, -1});
  const TensorInfo x = testing::info_of(data);

  // Reshape: 'shape' attribute before opset 5, a constant input after.
  NodeFixture old_reshape("Reshape", 4);
  EXPECT_EQ(error_of(read_view_attrs(old_reshape.node())), "Reshape 'n': missing attribute 'shape'");
  old_reshape.node().attrs["shape"] = testing::ints({6});
  auto old_attrs = read_view_attrs(old_reshape.node());
  ASSERT_TRUE(old_attrs.ok()) << old_attrs.status().to_string();
  auto old_out = view_outputs(*old_attrs, {&x, 1}, "Reshape 'n'");
  ASSERT_TRUE(old_out.ok()) << old_out.status().to_string();
  EXPECT_EQ((*old_out)[0].shape, (Shape{6}));

  NodeFixture reshape("Reshape", 14, 2);
  const ViewAttrs ra = *read_view_attrs(reshape.node());
  const TensorInfo with_shape[] = {x, testing::info_of(target)};
  auto out = view_outputs(ra, with_shape, "Reshape 'n'");
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].shape, (Shape{3, 2}));
  EXPECT_EQ((*out)[0].dtype, DType::kFloat32);
  EXPECT_EQ(error_of(view_outputs(ra, {&x, 1}, "Reshape 'n'")), "Reshape 'n': missing input 'shape'");
  const TensorInfo runtime_shape[] = {x, testing::info_of(target, /*constant=*/false)};
  EXPECT_EQ(view_outputs(ra, runtime_shape, "Reshape 'n'").status().code(), StatusCode::kUnsupported);

  // (Un)Squeeze: 'axes' attribute before opset 13 (required by Unsqueeze), an input after.
  NodeFixture old_unsqueeze("Unsqueeze", 11);
  EXPECT_EQ(error_of(read_view_attrs(old_unsqueeze.node())), "Unsqueeze 'n': missing attribute 'axes'");
  NodeFixture unsqueeze("Unsqueeze", 13, 2);
  const ViewAttrs ua = *read_view_attrs(unsqueeze.node());
  EXPECT_EQ(error_of(view_outputs(ua, {&x, 1}, "Unsqueeze 'n'")), "Unsqueeze 'n': missing input 'axes'");
  const Tensor axes = testing::i64({0});
  const TensorInfo with_axes[] = {x, testing::info_of(axes)};
  EXPECT_EQ((*view_outputs(ua, with_axes, "u"))[0].shape, (Shape{1, 2, 1, 3}));
  NodeFixture squeeze("Squeeze", 13, 2);
  EXPECT_EQ((*view_outputs(*read_view_attrs(squeeze.node()), {&x, 1}, "s"))[0].shape, (Shape{2, 3}));
  NodeFixture old_squeeze("Squeeze", 11);
  old_squeeze.node().attrs["axes"] = testing::ints({1});
  EXPECT_EQ((*view_outputs(*read_view_attrs(old_squeeze.node()), {&x, 1}, "s"))[0].shape, (Shape{2, 3}));

  NodeFixture flatten("Flatten", 13);
  flatten.node().attrs["axis"] = testing::one_int(2);
  EXPECT_EQ((*view_outputs(*read_view_attrs(flatten.node()), {&x, 1}, "f"))[0].shape, (Shape{2, 3}));
  NodeFixture identity("Identity", 16);
  EXPECT_EQ((*view_outputs(*read_view_attrs(identity.node()), {&x, 1}, "i"))[0].shape, (Shape{2, 1, 3}));

  // Dropout: the mask is bool from opset 10 and the input's dtype before; training mode only with ratio 0.
  NodeFixture dropout("Dropout", 13, 3, 2);
  const ViewAttrs da = *read_view_attrs(dropout.node());
  auto masked = view_outputs(da, {&x, 1}, "Dropout 'n'");
  ASSERT_TRUE(masked.ok()) << masked.status().to_string();
  ASSERT_EQ(masked->size(), 2u);
  EXPECT_EQ((*masked)[1].dtype, DType::kBool);
  EXPECT_EQ((*masked)[1].shape, (Shape{2, 1, 3}));
  NodeFixture old_dropout("Dropout", 7, 1, 2);
  EXPECT_EQ((*view_outputs(*read_view_attrs(old_dropout.node()), {&x, 1}, "d"))[1].dtype, DType::kFloat32);
  const Tensor yes = Tensor::scalar<bool>(true);
  const Tensor half = Tensor::scalar<float>(0.5f);
  const Tensor zero = Tensor::scalar<float>(0.f);
  const TensorInfo training[] = {x, testing::info_of(half), testing::info_of(yes)};
  auto train = view_outputs(da, training, "Dropout 'n'");
  EXPECT_EQ(train.status().code(), StatusCode::kUnsupported);
  expect_mentions(error_of(train), {"Dropout 'n'", "non-zero ratio"});
  const TensorInfo training_zero[] = {x, testing::info_of(zero), testing::info_of(yes)};
  EXPECT_TRUE(view_outputs(da, training_zero, "d").ok());
  const TensorInfo runtime_mode[] = {x, TensorInfo{}, testing::info_of(yes, /*constant=*/false)};
  expect_mentions(error_of(view_outputs(da, runtime_mode, "Dropout 'n'")), {"Dropout 'n'", "'training_mode'"});

  // Strings are not moved; other ops are not view ops.
  const TensorInfo strings[] = {info(DType::kString, {2})};
  EXPECT_EQ(view_outputs(*read_view_attrs(identity.node()), strings, "i").status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(read_view_attrs(NodeFixture("Relu", 13).node()).status().code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace streamline::ops
