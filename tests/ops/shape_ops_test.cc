// Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout, Constant, ConstantOfShape,
// Range, EyeLike, Trilu, OneHot, Expand and Tile on the CPU registry.

#include <climits>

#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

Tensor f32(const Shape& s, float start = 0.f) {
  Tensor t = Tensor::empty(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = start + static_cast<float>(i);
  return t;
}

TEST(ShapeOp, ShapeAndKnownValue) {
  NodeCase n("Shape", 13, 1);
  const Tensor x = f32({2, 3, 4});
  auto out = n.cpu({x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values<int64_t>((*out)[0]), (std::vector<int64_t>{2, 3, 4}));

  auto k = n.kernel({x});
  ASSERT_TRUE(k.ok());
  std::vector<TensorInfo> infos{info_of(x, false)};
  auto rr = (*k)->reshape(infos);
  ASSERT_TRUE(rr.ok());
  ASSERT_EQ(rr->known_values.size(), 1u);
  ASSERT_TRUE(rr->known_values[0].has_value());
  EXPECT_EQ(values<int64_t>(*rr->known_values[0]), (std::vector<int64_t>{2, 3, 4}));
}

TEST(ShapeOp, StartEndClampLikeTheSpec) {
  const Tensor x = f32({2, 3, 4, 5});
  struct Case {
    int64_t start;
    std::optional<int64_t> end;
    std::vector<int64_t> want;
  };
  const std::vector<Case> cases = {{1, std::nullopt, {3, 4, 5}}, {-1, std::nullopt, {5}},
                                   {0, -1, {2, 3, 4}},           {1, 2, {3}},
                                   {-10, 10, {2, 3, 4, 5}},      {3, 1, {}},
                                   {10, std::nullopt, {}}};
  for (const auto& c : cases) {
    NodeCase n("Shape", 15, 1);
    n.i("start", c.start);
    if (c.end) n.i("end", *c.end);
    auto out = n.cpu({x});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(values<int64_t>((*out)[0]), c.want) << "start " << c.start;
  }
}

TEST(ShapeOp, Size) {
  auto out = NodeCase("Size", 13, 1).cpu({f32({2, 3, 4})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape().rank(), 0u);
  EXPECT_EQ(*(*out)[0].data<int64_t>(), 24);
}

TEST(ShapeOp, ReshapeZeroAndMinusOne) {
  const Tensor x = f32({2, 3, 4});
  auto shape_of = [&](std::vector<int64_t> req, int64_t allowzero, int opset = 14) -> Result<Shape> {
    NodeCase n("Reshape", opset, 2);
    if (opset >= 14) n.i("allowzero", allowzero);
    SL_ASSIGN_OR_RETURN(std::vector<Tensor> out, n.cpu({x, i64(req)}));
    EXPECT_TRUE(same_tensor(out[0].reshaped(x.shape()), x));
    return out[0].shape();
  };
  EXPECT_EQ(*shape_of({0, -1}, 0), (Shape{2, 12}));
  EXPECT_EQ(*shape_of({0, 0, 2, 2}, 0), (Shape{2, 3, 2, 2}));
  EXPECT_EQ(*shape_of({-1}, 0), (Shape{24}));
  EXPECT_EQ(*shape_of({4, 0, -1}, 0, 5), (Shape{4, 3, 2}));
  EXPECT_EQ(*shape_of({2, 3, 4}, 1), (Shape{2, 3, 4}));

  // allowzero=1: 0 is a literal zero, so [0, 4] cannot hold 24 elements.
  auto bad = shape_of({0, 24}, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("Reshape 'Reshape_node'"), std::string::npos) << bad.status().message();
  // allowzero=1 with both 0 and -1 is invalid.
  EXPECT_EQ(shape_of({0, -1}, 1).status().code(), StatusCode::kInvalidArgument);
  // Two -1 and element count mismatch.
  EXPECT_EQ(shape_of({-1, -1}, 0).status().code(), StatusCode::kInvalidArgument);
  auto mismatch = shape_of({5, 5}, 0);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("Reshape_node"), std::string::npos);
}

TEST(ShapeOp, ReshapeAllowZeroOnEmptyInput) {
  NodeCase n("Reshape", 14, 2);
  n.i("allowzero", 1);
  auto out = n.cpu({Tensor::empty(DType::kFloat32, Shape{0, 3, 4}), i64({3, 4, 0})});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 4, 0}));
}

TEST(ShapeOp, ReshapeNeedsConstantShape) {
  NodeCase n("Reshape", 14, 2);
  EvalOptions o;
  o.constant_mask = {true, false};
  auto out = n.run(cpu_reg(), {f32({2, 3}), i64({6})}, o);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(out.status().message().find("'shape'"), std::string::npos);
}

TEST(ShapeOp, ViewOpsRunInPlace) {
  const Tensor x = f32({2, 3});
  NodeCase n("Reshape", 14, 2);
  const Tensor shape = i64({3, 2});
  auto k = n.kernel({x, shape});
  ASSERT_TRUE(k.ok());
  std::vector<TensorInfo> infos{info_of(x, false), info_of(shape)};
  auto rr = (*k)->reshape(infos);
  ASSERT_TRUE(rr.ok());
  EXPECT_EQ(rr->inplace, std::vector<int>{0});
  Tensor in = x.clone();
  std::vector<Tensor> ins{in, shape};
  std::vector<Tensor> outs{in.reshaped(Shape{3, 2})};
  RunContext rc;
  rc.inputs = ins;
  rc.outputs = outs;
  ASSERT_TRUE((*k)->run(rc).ok());
  EXPECT_TRUE(same_tensor(in, x));
}

TEST(ShapeOp, Flatten) {
  const Tensor x = f32({2, 3, 4, 5});
  const std::vector<std::pair<int64_t, Shape>> cases = {{0, Shape{1, 120}}, {1, Shape{2, 60}},  {3, Shape{24, 5}},
                                                        {4, Shape{120, 1}}, {-1, Shape{24, 5}}, {-4, Shape{1, 120}}};
  for (const auto& [axis, want] : cases) {
    NodeCase n("Flatten", 13, 1);
    n.i("axis", axis);
    auto out = n.cpu({x});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ((*out)[0].shape(), want) << axis;
  }
  NodeCase bad("Flatten", 13, 1);
  bad.i("axis", 5);
  EXPECT_EQ(bad.cpu({x}).status().code(), StatusCode::kInvalidArgument);
}

TEST(ShapeOp, SqueezeByAttributeAndByInput) {
  const Tensor x = f32({1, 3, 1, 5});
  NodeCase attr("Squeeze", 11, 1);
  attr.ints("axes", {0, -2});
  auto a = attr.cpu({x});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ((*a)[0].shape(), (Shape{3, 5}));

  NodeCase input("Squeeze", 13, 2);
  auto b = input.cpu({x, i64({2})});
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ((*b)[0].shape(), (Shape{1, 3, 5}));

  NodeCase empty_axes("Squeeze", 13, 2);
  auto e = empty_axes.cpu({x, i64({})});
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ((*e)[0].shape(), (Shape{3, 5}));

  NodeCase all("Squeeze", 13, 1);
  auto c = all.cpu({x});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)[0].shape(), (Shape{3, 5}));

  NodeCase bad("Squeeze", 13, 2);
  auto d = bad.cpu({x, i64({1})});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
}

TEST(ShapeOp, UnsqueezeByAttributeAndByInput) {
  const Tensor x = f32({3, 4, 5});
  NodeCase attr("Unsqueeze", 11, 1);
  attr.ints("axes", {4, 0});
  auto a = attr.cpu({x});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ((*a)[0].shape(), (Shape{1, 3, 4, 5, 1}));
  EXPECT_TRUE(same_tensor((*a)[0].reshaped(x.shape()), x));

  NodeCase input("Unsqueeze", 13, 2);
  auto b = input.cpu({x, i64({-1, 1})});
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ((*b)[0].shape(), (Shape{3, 1, 4, 5, 1}));

  NodeCase dup("Unsqueeze", 13, 2);
  EXPECT_EQ(dup.cpu({x, i64({1, 1})}).status().code(), StatusCode::kInvalidArgument);
  NodeCase missing("Unsqueeze", 11, 1);
  EXPECT_FALSE(missing.cpu({x}).ok());
}

TEST(ShapeOp, IdentityAndDropout) {
  std::mt19937 rng(7);
  const Tensor x = random_full(DType::kUInt8, Shape{4, 5}, rng);
  auto id = NodeCase("Identity", 16, 1).cpu({x});
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(same_tensor((*id)[0], x));

  const Tensor xf = random_full(DType::kFloat32, Shape{3, 7}, rng);
  auto d12 = NodeCase("Dropout", 13, 1, 2).cpu({xf});
  ASSERT_TRUE(d12.ok()) << d12.status().to_string();
  EXPECT_TRUE(same_tensor((*d12)[0], xf));
  ASSERT_EQ(d12->size(), 2u);
  EXPECT_EQ((*d12)[1].dtype(), DType::kBool);
  for (uint8_t m : values<uint8_t>((*d12)[1])) EXPECT_EQ(m, 1);

  auto d7 = NodeCase("Dropout", 7, 1, 2).cpu({xf});
  ASSERT_TRUE(d7.ok());
  EXPECT_EQ((*d7)[1].dtype(), DType::kFloat32);
  for (float m : values<float>((*d7)[1])) EXPECT_EQ(m, 1.f);

  // training_mode = true with the default ratio would need randomness.
  NodeCase train("Dropout", 13, 3);
  Tensor yes = Tensor::scalar<bool>(true);
  EXPECT_EQ(train.cpu({xf, Tensor::scalar<float>(0.5f), yes}).status().code(), StatusCode::kUnsupported);
}

TEST(ShapeOp, Constant) {
  const Tensor v = Tensor::from_vector<int32_t>(Shape{2, 2}, {1, 2, 3, 4});
  auto a = NodeCase("Constant", 13, 0).tensor("value", v).cpu({});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_TRUE(same_tensor((*a)[0], v));
  auto b = NodeCase("Constant", 13, 0).floats("value_floats", {1.5f, 2.5f}).cpu({});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(values<float>((*b)[0]), (std::vector<float>{1.5f, 2.5f}));
  auto c = NodeCase("Constant", 13, 0).i("value_int", 7).cpu({});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)[0].shape().rank(), 0u);
  EXPECT_EQ(*(*c)[0].data<int64_t>(), 7);
  auto d = NodeCase("Constant", 13, 0).ints("value_ints", {3, 4}).cpu({});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(values<int64_t>((*d)[0]), (std::vector<int64_t>{3, 4}));
  auto e = NodeCase("Constant", 13, 0).f("value_float", 0.25f).cpu({});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*(*e)[0].data<float>(), 0.25f);
  auto sparse = NodeCase("Constant", 13, 0).tensor("sparse_value", v).cpu({});
  EXPECT_EQ(sparse.status().code(), StatusCode::kUnsupported);
  auto str = NodeCase("Constant", 13, 0).s("value_string", "x").cpu({});
  EXPECT_EQ(str.status().code(), StatusCode::kUnsupported);
}

TEST(ShapeOp, ConstantOfShape) {
  auto a =
      NodeCase("ConstantOfShape", 9, 1).tensor("value", Tensor::from_vector<int64_t>(Shape{1}, {5})).cpu({i64({2, 3})});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ((*a)[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(values<int64_t>((*a)[0]), std::vector<int64_t>(6, 5));
  auto b = NodeCase("ConstantOfShape", 9, 1).cpu({i64({4})});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)[0].dtype(), DType::kFloat32);
  EXPECT_EQ(values<float>((*b)[0]), std::vector<float>(4, 0.f));
  auto c = NodeCase("ConstantOfShape", 9, 1).cpu({i64({})});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)[0].shape().rank(), 0u);
}

TEST(ShapeOp, Range) {
  auto a = NodeCase("Range", 11, 3)
               .cpu({Tensor::scalar<int64_t>(10), Tensor::scalar<int64_t>(1), Tensor::scalar<int64_t>(-3)});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(values<int64_t>((*a)[0]), (std::vector<int64_t>{10, 7, 4}));
  auto b = NodeCase("Range", 11, 3)
               .cpu({Tensor::scalar<float>(1.f), Tensor::scalar<float>(2.f), Tensor::scalar<float>(0.25f)});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(values<float>((*b)[0]), (std::vector<float>{1.f, 1.25f, 1.5f, 1.75f}));
  auto empty = NodeCase("Range", 11, 3)
                   .cpu({Tensor::scalar<int32_t>(5), Tensor::scalar<int32_t>(1), Tensor::scalar<int32_t>(2)});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)[0].numel(), 0);
  auto zero = NodeCase("Range", 11, 3)
                  .cpu({Tensor::scalar<int64_t>(0), Tensor::scalar<int64_t>(1), Tensor::scalar<int64_t>(0)});
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
}

TEST(ShapeOp, EyeLikeTriluOneHot) {
  auto eye = NodeCase("EyeLike", 9, 1).i("k", 1).i("dtype", static_cast<int64_t>(DType::kInt32)).cpu({f32({3, 4})});
  ASSERT_TRUE(eye.ok()) << eye.status().to_string();
  EXPECT_EQ(values<int32_t>((*eye)[0]), (std::vector<int32_t>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));

  const Tensor m = f32({3, 3}, 1.f);
  auto up = NodeCase("Trilu", 14, 2).cpu({m, Tensor::scalar<int64_t>(1)});
  ASSERT_TRUE(up.ok()) << up.status().to_string();
  EXPECT_EQ(values<float>((*up)[0]), (std::vector<float>{0, 2, 3, 0, 0, 6, 0, 0, 0}));
  auto lo = NodeCase("Trilu", 14, 1).i("upper", 0).cpu({m});
  ASSERT_TRUE(lo.ok());
  EXPECT_EQ(values<float>((*lo)[0]), (std::vector<float>{1, 0, 0, 4, 5, 0, 7, 8, 9}));

  auto oh =
      NodeCase("OneHot", 11, 3)
          .i("axis", 0)
          .cpu({i64({0, 2, -1, 5}), Tensor::scalar<int64_t>(3), Tensor::from_vector<float>(Shape{2}, {-1.f, 1.f})});
  ASSERT_TRUE(oh.ok()) << oh.status().to_string();
  EXPECT_EQ((*oh)[0].shape(), (Shape{3, 4}));
  EXPECT_EQ(values<float>((*oh)[0]), (std::vector<float>{1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 1, -1}));
}

TEST(ShapeOp, ExpandBroadcastsBothWays) {
  std::mt19937 rng(11);
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kUInt8}) {
    const Tensor x = random_full(dt, Shape{3, 1, 5}, rng);
    auto out = NodeCase("Expand", 13, 2).cpu({x, i64({2, 1, 4, 1})}, 2);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& y = (*out)[0];
    ASSERT_EQ(y.shape(), (Shape{2, 3, 4, 5}));
    const size_t esz = dtype_size(dt);
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t c = 0; c < 4; ++c)
          for (int64_t d = 0; d < 5; ++d) {
            const int64_t yi = ((a * 3 + b) * 4 + c) * 5 + d, xi = b * 5 + d;
            ASSERT_EQ(std::memcmp(y.data<uint8_t>() + yi * esz, x.data<uint8_t>() + xi * esz, esz), 0);
          }
  }
  EXPECT_EQ(NodeCase("Expand", 13, 2).cpu({f32({3, 2}), i64({4})}).status().code(), StatusCode::kInvalidArgument);
}

TEST(ShapeOp, TileMatchesNaiveLoops) {
  std::mt19937 rng(12);
  for (int iter = 0; iter < 20; ++iter) {
    const Shape s = random_shape(rng, 1, 4, 4);
    std::vector<int64_t> reps;
    std::uniform_int_distribution<int64_t> rep(0, 3);
    for (size_t i = 0; i < s.rank(); ++i) reps.push_back(iter == 0 ? 1 : rep(rng));
    const DType dt = iter % 2 ? DType::kInt64 : DType::kUInt8;
    const Tensor x = random_full(dt, s, rng);
    auto out = NodeCase("Tile", 13, 2).cpu({x, i64(reps)});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& y = (*out)[0];
    const size_t esz = dtype_size(dt);
    for (int64_t k = 0; k < y.numel(); ++k) {
      int64_t rem = k, xi = 0, mul = 1;
      for (size_t d = s.rank(); d-- > 0;) {
        const int64_t o = rem % y.shape()[d];
        rem /= y.shape()[d];
        xi += (o % s[d]) * mul;
        mul *= s[d];
      }
      ASSERT_EQ(std::memcmp(y.data<uint8_t>() + k * esz, x.data<uint8_t>() + xi * esz, esz), 0) << s.to_string();
    }
  }
}

}  // namespace
}  // namespace streamline::ops::testing
