// Concat, Split, Transpose, Slice, Gather*, Scatter*, Pad, Resize, DepthToSpace, SpaceToDepth: the CPU
// kernels against the reference kernels on random shapes (fixed seed), plus spec corner cases by hand.

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>

#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

constexpr DType kTypes[] = {DType::kFloat32, DType::kInt64, DType::kUInt8};

Tensor f32(const Shape& s, std::vector<float> v) {
  return Tensor::from_vector<float>(s, v);
}

Tensor iota_f32(const Shape& s) {
  Tensor t = Tensor::empty(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

// Runs the node on the CPU registry (with `threads`) and the reference registry; expects equal output 0.
void expect_matches_reference(const NodeCase& n, const std::vector<Tensor>& inputs, int threads, double tol,
                              const std::string& what) {
  auto ref = n.ref(inputs);
  ASSERT_TRUE(ref.ok()) << what << ": " << ref.status().to_string();
  auto got = n.cpu(inputs, threads);
  ASSERT_TRUE(got.ok()) << what << ": " << got.status().to_string();
  EXPECT_TRUE(same_tensor((*got)[0], (*ref)[0], tol)) << what;
}

TEST(TensorOp, ConcatMatchesReference) {
  std::mt19937 rng(101);
  for (int iter = 0; iter < 60; ++iter) {
    const Shape base = random_shape(rng, 1, 5, 5);
    const int64_t rank = static_cast<int64_t>(base.rank());
    const int64_t axis = std::uniform_int_distribution<int64_t>(-rank, rank - 1)(rng);
    const size_t ax = static_cast<size_t>(axis < 0 ? axis + rank : axis);
    const int parts = std::uniform_int_distribution<int>(1, 4)(rng);
    const DType dt = kTypes[iter % 3];
    std::vector<Tensor> ins;
    for (int p = 0; p < parts; ++p) {
      Shape s = base;
      s[ax] = std::uniform_int_distribution<int64_t>(0, 4)(rng);
      ins.push_back(random_full(dt, s, rng));
    }
    NodeCase n("Concat", 13, ins.size());
    n.i("axis", axis);
    expect_matches_reference(n, ins, iter % 2 ? 4 : 1, 0.0, base.to_string() + " axis " + std::to_string(axis));
  }
}

TEST(TensorOp, ConcatChannelsLastEqualsPlain) {
  std::mt19937 rng(102);
  for (DType dt : kTypes) {
    const std::vector<Tensor> ins = {random_full(dt, Shape{2, 3, 4, 5}, rng), random_full(dt, Shape{2, 6, 4, 5}, rng),
                                     random_full(dt, Shape{2, 1, 4, 5}, rng)};
    NodeCase n("Concat", 13, 3);
    n.i("axis", 1);
    auto plain = n.cpu(ins);
    ASSERT_TRUE(plain.ok()) << plain.status().to_string();
    EvalOptions o;
    o.input_layout = Layout::kChannelsLast;
    o.constant_mask = {false, false, false};
    auto cl = n.run(cpu_reg(), ins, o);
    ASSERT_TRUE(cl.ok()) << cl.status().to_string();
    EXPECT_TRUE(same_tensor((*cl)[0], (*plain)[0]));
    auto ref = n.ref(ins);
    ASSERT_TRUE(ref.ok());
    EXPECT_TRUE(same_tensor((*plain)[0], (*ref)[0]));
  }
}

TEST(TensorOp, ConcatBlockedEqualsPlain) {
  std::mt19937 rng(103);
  const std::vector<Tensor> ins = {random_full(DType::kFloat32, Shape{2, 8, 4, 5}, rng),
                                   random_full(DType::kFloat32, Shape{2, 24, 4, 5}, rng),
                                   random_full(DType::kFloat32, Shape{2, 16, 4, 5}, rng)};
  NodeCase n("Concat", 13, 3);
  n.i("axis", 1);
  auto plain = n.cpu(ins);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EvalOptions o;
  o.input_layout = Layout::kBlocked8;
  o.constant_mask = {false, false, false};
  auto blocked = n.run(cpu_reg(), ins, o);
  ASSERT_TRUE(blocked.ok()) << blocked.status().to_string();
  EXPECT_TRUE(same_tensor((*blocked)[0], (*plain)[0]));
  const std::vector<Tensor> ins16 = {random_full(DType::kFloat32, Shape{2, 16, 4, 5}, rng),
                                     random_full(DType::kFloat32, Shape{2, 48, 4, 5}, rng)};
  NodeCase n16("Concat", 13, 2);
  n16.i("axis", 1);
  auto plain16 = n16.cpu(ins16);
  ASSERT_TRUE(plain16.ok()) << plain16.status().to_string();
  o.input_layout = Layout::kBlocked16;
  o.constant_mask = {false, false};
  auto blocked16 = n16.run(cpu_reg(), ins16, o);
  ASSERT_TRUE(blocked16.ok()) << blocked16.status().to_string();
  EXPECT_TRUE(same_tensor((*blocked16)[0], (*plain16)[0]));
}

TEST(TensorOp, ConcatAcceptsOnlyUniformLayouts) {
  const Tensor a = Tensor::empty(DType::kFloat32, Shape{1, 2, 3, 3});
  NodeCase n1("Concat", 13, 2);
  n1.i("axis", 1);
  auto k1 = n1.kernel({a, a});
  ASSERT_TRUE(k1.ok());
  EXPECT_EQ((*k1)->layout_support(), LayoutSupport::kAny);
  TensorInfo plain = info_of(a, false), cl = info_of(a, false);
  cl.layout = Layout::kChannelsLast;
  std::vector<TensorInfo> both_cl{cl, cl}, mixed{plain, cl}, both_plain{plain, plain};
  EXPECT_TRUE((*k1)->accepts(both_cl));
  EXPECT_TRUE((*k1)->accepts(both_plain));
  EXPECT_FALSE((*k1)->accepts(mixed));
  auto rr = (*k1)->reshape(both_cl);
  ASSERT_TRUE(rr.ok());
  EXPECT_EQ(rr->outputs[0].layout, Layout::kChannelsLast);
  EXPECT_EQ(rr->outputs[0].shape, (Shape{1, 4, 3, 3}));

  NodeCase n2("Concat", 13, 2);
  n2.i("axis", 2);
  auto k2 = n2.kernel({a, a});
  ASSERT_TRUE(k2.ok());
  EXPECT_FALSE((*k2)->accepts(both_cl));
  EXPECT_TRUE((*k2)->accepts(both_plain));
}

TEST(TensorOp, ConcatErrorsNameTheNode) {
  NodeCase n("Concat", 13, 2);
  n.i("axis", 0);
  auto r = n.cpu({iota_f32({2, 3}), iota_f32({2, 3, 1})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("Concat 'Concat_node'"), std::string::npos) << r.status().message();
  auto r2 = n.cpu({iota_f32({2, 3}), iota_f32({2, 4})});
  EXPECT_EQ(r2.status().code(), StatusCode::kInvalidArgument);
}

TEST(TensorOp, TransposeMatchesReference) {
  std::mt19937 rng(103);
  for (int iter = 0; iter < 80; ++iter) {
    const Shape s = random_shape(rng, 1, 6, 6);
    std::vector<int64_t> perm(s.rank());
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    const DType dt = kTypes[iter % 3];
    NodeCase n("Transpose", 13, 1);
    if (iter % 7 != 0) n.ints("perm", perm);
    expect_matches_reference(n, {random_full(dt, s, rng)}, iter % 2 ? 3 : 1, 0.0, s.to_string());
  }
}

TEST(TensorOp, TransposeLayoutPermutationsAndLargeTensors) {
  std::mt19937 rng(104);
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {Shape{2, 33, 17, 19}, {0, 2, 3, 1}},  // NCHW -> NHWC
      {Shape{2, 17, 19, 33}, {0, 3, 1, 2}},  // NHWC -> NCHW
      {Shape{130, 70}, {1, 0}},
      {Shape{3, 40, 50}, {2, 1, 0}},
      {Shape{4, 5, 36, 6}, {2, 0, 3, 1}},
      {Shape{1, 64, 56, 56}, {0, 2, 3, 1}},
  };
  for (const auto& [s, perm] : cases) {
    for (DType dt : {DType::kFloat32, DType::kUInt8, DType::kInt64}) {
      NodeCase n("Transpose", 13, 1);
      n.ints("perm", perm);
      expect_matches_reference(n, {random_full(dt, s, rng)}, 4, 0.0, s.to_string());
    }
  }
}

TEST(TensorOp, SliceMatchesReference) {
  std::mt19937 rng(105);
  for (int iter = 0; iter < 120; ++iter) {
    const Shape s = random_shape(rng, 1, 4, 7);
    const int64_t rank = static_cast<int64_t>(s.rank());
    std::vector<int64_t> axes(s.rank());
    std::iota(axes.begin(), axes.end(), 0);
    std::shuffle(axes.begin(), axes.end(), rng);
    axes.resize(std::uniform_int_distribution<size_t>(1, s.rank())(rng));
    std::vector<int64_t> starts, ends, steps;
    for (int64_t& a : axes) {
      const int64_t dim = s[static_cast<size_t>(a)];
      auto pick = [&](int64_t v) {
        const int r = std::uniform_int_distribution<int>(0, 9)(rng);
        if (r == 0) return INT64_MAX;
        if (r == 1) return INT64_MIN;
        return v;
      };
      starts.push_back(pick(std::uniform_int_distribution<int64_t>(-dim - 2, dim + 2)(rng)));
      ends.push_back(pick(std::uniform_int_distribution<int64_t>(-dim - 2, dim + 2)(rng)));
      int64_t st = std::uniform_int_distribution<int64_t>(-3, 3)(rng);
      steps.push_back(st == 0 ? 1 : st);
      if (iter % 3 == 0) a -= rank;  // negative axes
    }
    const DType dt = kTypes[iter % 3];
    const Tensor x = random_full(dt, s, rng);
    NodeCase n("Slice", 13, 5);
    expect_matches_reference(n, {x, i64(starts), i64(ends), i64(axes), i64(steps)}, iter % 2 ? 4 : 1, 0.0,
                             s.to_string());
    if (iter % 4 == 0) {  // opset 9: attributes, unit steps
      NodeCase old("Slice", 9, 1);
      std::vector<int64_t> pos_axes;
      for (int64_t a : axes) pos_axes.push_back(a < 0 ? a + rank : a);
      old.ints("starts", starts).ints("ends", ends).ints("axes", pos_axes);
      expect_matches_reference(old, {x}, 1, 0.0, "opset 9 " + s.to_string());
    }
  }
}

TEST(TensorOp, SliceSpecCorners) {
  const Tensor x = iota_f32({10});
  auto slice = [&](int64_t b, int64_t e, int64_t st) {
    auto r = NodeCase("Slice", 13, 5).cpu({x, i64({b}), i64({e}), i64({0}), i64({st})});
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? values<float>((*r)[0]) : std::vector<float>{};
  };
  EXPECT_EQ(slice(-1, INT64_MIN, -1), (std::vector<float>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(slice(8, 1, -3), (std::vector<float>{8, 5, 2}));
  EXPECT_EQ(slice(1, INT64_MAX, 2), (std::vector<float>{1, 3, 5, 7, 9}));
  EXPECT_EQ(slice(20, -20, -1), (std::vector<float>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(slice(-3, INT64_MAX, 1), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(slice(5, 2, 1), (std::vector<float>{}));
  EXPECT_EQ(slice(INT64_MAX, 0, -4), (std::vector<float>{9, 5, 1}));

  // The ONNX slice_neg_steps example: 20x10x5, starts [20,10,4] ends [0,0,1] axes [0,1,2] steps [-1,-3,-2].
  const Tensor y = iota_f32({20, 10, 5});
  auto r = NodeCase("Slice", 13, 5).cpu({y, i64({20, 10, 4}), i64({0, 0, 1}), i64({0, 1, 2}), i64({-1, -3, -2})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].shape(), (Shape{19, 3, 2}));
  EXPECT_EQ((*r)[0].data<float>()[0], y.data<float>()[(19 * 10 + 9) * 5 + 4]);
  EXPECT_EQ((*r)[0].data<float>()[1], y.data<float>()[(19 * 10 + 9) * 5 + 2]);

  EXPECT_EQ(NodeCase("Slice", 13, 5).cpu({x, i64({0}), i64({5}), i64({0}), i64({0})}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(TensorOp, GatherMatchesReference) {
  std::mt19937 rng(106);
  for (int iter = 0; iter < 60; ++iter) {
    const Shape s = random_shape(rng, 1, 4, 6);
    const int64_t rank = static_cast<int64_t>(s.rank());
    const int64_t axis = std::uniform_int_distribution<int64_t>(-rank, rank - 1)(rng);
    const int64_t dim = s[static_cast<size_t>(axis < 0 ? axis + rank : axis)];
    const Shape is = random_shape(rng, 0, 2, 4);
    const bool i32 = iter % 2;
    Tensor idx = Tensor::empty(i32 ? DType::kInt32 : DType::kInt64, is);
    std::uniform_int_distribution<int64_t> v(-dim, dim - 1);
    for (int64_t k = 0; k < idx.numel(); ++k) {
      if (i32)
        idx.data<int32_t>()[k] = static_cast<int32_t>(v(rng));
      else
        idx.data<int64_t>()[k] = v(rng);
    }
    NodeCase n("Gather", 13, 2);
    n.i("axis", axis);
    expect_matches_reference(n, {random_full(kTypes[iter % 3], s, rng), idx}, iter % 3 ? 1 : 4, 0.0, s.to_string());
  }
}

TEST(TensorOp, GatherNegativeIndicesAndRangeError) {
  const Tensor x = iota_f32({10});
  auto r = NodeCase("Gather", 13, 2).cpu({x, i64({0, -9, -10, 9})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<float>((*r)[0]), (std::vector<float>{0, 1, 0, 9}));
  auto bad = NodeCase("Gather", 13, 2).cpu({x, i64({1, 10})});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("Gather 'Gather_node'"), std::string::npos) << bad.status().message();
  EXPECT_EQ(NodeCase("Gather", 13, 2).cpu({x, i64({-11})}).status().code(), StatusCode::kInvalidArgument);
}

TEST(TensorOp, GatherElementsGatherNdScatter) {
  const Tensor data = f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto ge = NodeCase("GatherElements", 13, 2)
                .i("axis", 1)
                .cpu({data, Tensor::from_vector<int64_t>(Shape{3, 2}, {0, 0, 1, -1, 2, 0})});
  ASSERT_TRUE(ge.ok()) << ge.status().to_string();
  EXPECT_EQ(values<float>((*ge)[0]), (std::vector<float>{1, 1, 5, 6, 9, 7}));

  // GatherND with batch_dims=1 (the ONNX example): data [2,2,2], indices [[1],[0]] -> [[2,3],[4,5]].
  const Tensor d3 = Tensor::from_vector<int32_t>(Shape{2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  auto gnd =
      NodeCase("GatherND", 13, 2).i("batch_dims", 1).cpu({d3, Tensor::from_vector<int64_t>(Shape{2, 1}, {1, 0})});
  ASSERT_TRUE(gnd.ok()) << gnd.status().to_string();
  EXPECT_EQ((*gnd)[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(values<int32_t>((*gnd)[0]), (std::vector<int32_t>{2, 3, 4, 5}));
  auto gnd0 = NodeCase("GatherND", 13, 2).cpu({d3, Tensor::from_vector<int64_t>(Shape{2, 2}, {0, 1, 1, 0})});
  ASSERT_TRUE(gnd0.ok());
  EXPECT_EQ(values<int32_t>((*gnd0)[0]), (std::vector<int32_t>{2, 3, 4, 5}));

  auto snd =
      NodeCase("ScatterND", 13, 3)
          .cpu({iota_f32({8}), Tensor::from_vector<int64_t>(Shape{4, 1}, {4, 3, 1, 7}), f32({4}, {9, 10, 11, 12})});
  ASSERT_TRUE(snd.ok()) << snd.status().to_string();
  EXPECT_EQ(values<float>((*snd)[0]), (std::vector<float>{0, 11, 2, 10, 9, 5, 6, 12}));

  auto se = NodeCase("ScatterElements", 13, 3)
                .i("axis", 1)
                .cpu({f32({1, 5}, {1, 2, 3, 4, 5}), Tensor::from_vector<int64_t>(Shape{1, 2}, {1, -2}),
                      f32({1, 2}, {1.1f, 2.1f})});
  ASSERT_TRUE(se.ok()) << se.status().to_string();
  EXPECT_EQ(values<float>((*se)[0]), (std::vector<float>{1, 1.1f, 3, 2.1f, 5}));

  auto oob = NodeCase("ScatterElements", 13, 3).cpu({iota_f32({4}), i64({4}), f32({1}, {1})});
  EXPECT_EQ(oob.status().code(), StatusCode::kInvalidArgument);
  const Tensor dup = Tensor::from_vector<int64_t>(Shape{3, 1}, {1, 1, 3});
  auto add = NodeCase("ScatterND", 16, 3).s("reduction", "add").cpu({iota_f32({4}), dup, f32({3}, {10, 20, 30})});
  ASSERT_TRUE(add.ok()) << add.status().to_string();
  EXPECT_EQ(values<float>((*add)[0]), (std::vector<float>{0, 31, 2, 33}));
  auto mx =
      NodeCase("ScatterElements", 18, 3).s("reduction", "max").cpu({i64({5, 1, 7}), i64({1, 1, 0}), i64({3, 4, 2})});
  ASSERT_TRUE(mx.ok()) << mx.status().to_string();
  EXPECT_EQ(values<int64_t>((*mx)[0]), (std::vector<int64_t>{5, 4, 7}));
  EXPECT_EQ(
      NodeCase("ScatterND", 13, 3).s("reduction", "add").cpu({iota_f32({4}), dup, f32({3}, {1, 2, 3})}).status().code(),
      StatusCode::kInvalidArgument);
}

// GatherElements or ScatterElements (no reduction) written out element by element in index order.
Tensor elements_by_hand(const Tensor& data, const Tensor& idx, const Tensor* updates, int64_t axis) {
  const Shape& s = data.shape();
  const Shape& is = idx.shape();
  const size_t esz = dtype_size(data.dtype());
  Tensor out = updates ? data.clone() : Tensor::empty(data.dtype(), is);
  std::vector<int64_t> coord(is.rank(), 0);
  for (int64_t p = 0; p < idx.numel(); ++p) {
    int64_t rest = p;
    for (size_t d = is.rank(); d-- > 0;) {
      coord[d] = rest % is[d];
      rest /= is[d];
    }
    int64_t v = idx.dtype() == DType::kInt32 ? idx.data<int32_t>()[p] : idx.data<int64_t>()[p];
    if (v < 0) v += s[static_cast<size_t>(axis)];
    coord[static_cast<size_t>(axis)] = v;
    int64_t off = 0;
    for (size_t d = 0; d < s.rank(); ++d) off = off * s[d] + coord[d];
    auto* o = static_cast<uint8_t*>(out.raw());
    if (updates) {
      std::memcpy(o + off * esz, static_cast<const uint8_t*>(updates->raw()) + p * esz, esz);
    } else {
      std::memcpy(o + p * esz, static_cast<const uint8_t*>(data.raw()) + off * esz, esz);
    }
  }
  return out;
}

// GatherElements and ScatterElements with indices spanning every axis after `axis`: blocks whose
// indices are all equal (as torchvision's MultiScaleRoIAlign scatters each box), blocks of mixed
// indices, negative indices, int32 and int64 indices, on one and three threads.
TEST(TensorOp, ElementsByBlocksMatchReference) {
  std::mt19937 rng(131);
  for (int iter = 0; iter < 80; ++iter) {
    const size_t rank = 1 + static_cast<size_t>(iter % 4);
    Shape s;
    for (size_t d = 0; d < rank; ++d) s.push_back(std::uniform_int_distribution<int64_t>(1, 5)(rng));
    if (rank > 1) s[rank - 1] = std::uniform_int_distribution<int64_t>(3, 12)(rng);  // blocks of 8 and more too
    const int64_t axis = std::uniform_int_distribution<int64_t>(0, static_cast<int64_t>(rank) - 1)(rng);
    const size_t ax = static_cast<size_t>(axis);
    const bool scatter = iter % 2 == 1;
    Shape is = s;
    // Outer axes may be shorter in the indices; the axis too (scatter rows get distinct targets).
    for (size_t d = 0; d < ax; ++d) is[d] = std::uniform_int_distribution<int64_t>(1, s[d])(rng);
    is[ax] = std::uniform_int_distribution<int64_t>(1, s[ax])(rng);
    int64_t inner = 1;
    for (size_t d = ax + 1; d < rank; ++d) inner *= s[d];
    const int64_t rows = is[ax];
    const int64_t outer = is.numel() / std::max<int64_t>(1, rows * inner);
    const bool i32 = iter % 3 == 0;
    Tensor idx = Tensor::empty(i32 ? DType::kInt32 : DType::kInt64, is);
    for (int64_t o = 0; o < outer; ++o) {
      std::vector<int64_t> targets(static_cast<size_t>(s[ax]));
      std::iota(targets.begin(), targets.end(), 0);
      std::shuffle(targets.begin(), targets.end(), rng);
      for (int64_t r = 0; r < rows; ++r) {
        const bool same = std::uniform_int_distribution<int>(0, 3)(rng) != 0;
        for (int64_t e = 0; e < inner; ++e) {
          int64_t v = scatter || same ? targets[static_cast<size_t>(r)]
                                      : std::uniform_int_distribution<int64_t>(0, s[ax] - 1)(rng);
          if (!scatter && !same && e % 2) v = targets[static_cast<size_t>(r)];
          if (std::uniform_int_distribution<int>(0, 4)(rng) == 0 && !same) v -= s[ax];  // negative form
          const int64_t p = (o * rows + r) * inner + e;
          if (i32) {
            idx.data<int32_t>()[p] = static_cast<int32_t>(v);
          } else {
            idx.data<int64_t>()[p] = v;
          }
        }
      }
    }
    const DType dt = kTypes[iter % 3];
    const std::string what = (scatter ? "ScatterElements " : "GatherElements ") + s.to_string() + " indices " +
                             is.to_string() + " axis " + std::to_string(axis);
    const Tensor data = random_full(dt, s, rng);
    const Tensor updates = random_full(dt, is, rng);
    const int threads = iter % 4 < 2 ? 1 : 3;
    auto got = scatter ? NodeCase("ScatterElements", 13, 3).i("axis", axis).cpu({data, idx, updates}, threads)
                       : NodeCase("GatherElements", 13, 2).i("axis", axis).cpu({data, idx}, threads);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().to_string();
    EXPECT_TRUE(same_tensor((*got)[0], elements_by_hand(data, idx, scatter ? &updates : nullptr, axis), 0.0)) << what;
  }
  // An index out of range in a block of equal indices is an error too.
  Tensor bad = Tensor::empty(DType::kInt64, Shape{2, 3, 4});
  for (int64_t i = 0; i < bad.numel(); ++i) bad.data<int64_t>()[i] = i < 12 ? 0 : 5;
  auto got = NodeCase("GatherElements", 13, 2).cpu({iota_f32({3, 3, 4}), bad}, 3);
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  auto scattered = NodeCase("ScatterElements", 13, 3).cpu({iota_f32({3, 3, 4}), bad, iota_f32({2, 3, 4})});
  EXPECT_EQ(scattered.status().code(), StatusCode::kInvalidArgument);
}

TEST(TensorOp, SplitForms) {
  const Tensor x = iota_f32({2, 6});
  auto eq = NodeCase("Split", 13, 1, 3).i("axis", 1).cpu({x});
  ASSERT_TRUE(eq.ok()) << eq.status().to_string();
  ASSERT_EQ(eq->size(), 3u);
  EXPECT_EQ(values<float>((*eq)[1]), (std::vector<float>{2, 3, 8, 9}));

  auto attr = NodeCase("Split", 11, 1, 2).i("axis", -1).ints("split", {1, 5}).cpu({x});
  ASSERT_TRUE(attr.ok());
  EXPECT_EQ((*attr)[0].shape(), (Shape{2, 1}));
  EXPECT_EQ(values<float>((*attr)[1]), (std::vector<float>{1, 2, 3, 4, 5, 7, 8, 9, 10, 11}));

  auto input = NodeCase("Split", 13, 2, 3).i("axis", 1).cpu({x, i64({2, 0, 4})});
  ASSERT_TRUE(input.ok());
  EXPECT_EQ((*input)[1].shape(), (Shape{2, 0}));
  EXPECT_EQ(values<float>((*input)[2]), (std::vector<float>{2, 3, 4, 5, 8, 9, 10, 11}));

  auto uneven = NodeCase("Split", 18, 1, 4).i("axis", 1).i("num_outputs", 4).cpu({x});
  ASSERT_TRUE(uneven.ok()) << uneven.status().to_string();
  EXPECT_EQ((*uneven)[2].shape(), (Shape{2, 2}));
  EXPECT_EQ((*uneven)[3].shape(), (Shape{2, 0}));

  EXPECT_EQ(NodeCase("Split", 13, 1, 4).i("axis", 1).cpu({x}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(NodeCase("Split", 13, 2, 2).i("axis", 1).cpu({x, i64({2, 3})}).status().code(),
            StatusCode::kInvalidArgument);
}

// Split along the channels keeps a channels-last or blocked input's layout (parts of whole blocks),
// with the plain result; other splits of such inputs are left to plain.
TEST(TensorOp, SplitChannelsInTheInputLayoutEqualsPlain) {
  std::mt19937 rng(104);
  const Tensor x = random_full(DType::kFloat32, Shape{2, 64, 5, 3}, rng);
  struct Case {
    Layout layout;
    std::vector<int64_t> split;
  };
  const Case cases[] = {{Layout::kChannelsLast, {5, 27, 32}},
                        {Layout::kBlocked8, {8, 40, 16}},
                        {Layout::kBlocked16, {32, 32}},
                        {Layout::kBlocked16, {16, 0, 48}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(layout_name(c.layout)) + " into " + std::to_string(c.split.size()));
    NodeCase n("Split", 13, 2, c.split.size());
    n.i("axis", 1);
    const std::vector<Tensor> ins{x, i64(c.split)};
    auto plain = n.cpu(ins);
    ASSERT_TRUE(plain.ok()) << plain.status().to_string();
    EvalOptions o;
    o.input_layout = c.layout;
    o.constant_mask = {false, true};
    auto got = n.run(cpu_reg(), ins, o);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->size(), c.split.size());
    for (size_t i = 0; i < c.split.size(); ++i) EXPECT_TRUE(same_tensor((*got)[i], (*plain)[i])) << "part " << i;
    auto k = n.kernel(ins);
    ASSERT_TRUE(k.ok());
    EXPECT_EQ((*k)->layout_support(), LayoutSupport::kAny);
    TensorInfo xi = info_of(x, false);
    xi.layout = c.layout;
    auto rr = (*k)->reshape(std::vector<TensorInfo>{xi, info_of(ins[1], true)});
    ASSERT_TRUE(rr.ok()) << rr.status().to_string();
    EXPECT_EQ(rr->outputs[0].layout, c.layout);
  }
  // Parts that are not whole blocks, or a split off the channels, need the plain layout.
  TensorInfo b16 = info_of(x, false);
  b16.layout = Layout::kBlocked16;
  NodeCase odd("Split", 13, 2, 2);
  odd.i("axis", 1);
  const Tensor odd_split = i64({8, 56});
  auto ko = odd.kernel({x, odd_split});
  ASSERT_TRUE(ko.ok());
  EXPECT_FALSE((*ko)->accepts(std::vector<TensorInfo>{b16, info_of(odd_split, true)}));
  EXPECT_TRUE((*ko)->accepts(std::vector<TensorInfo>{info_of(x, false), info_of(odd_split, true)}));
  NodeCase rows("Split", 13, 1, 5);
  rows.i("axis", 2);
  auto kr = rows.kernel({x});
  ASSERT_TRUE(kr.ok());
  EXPECT_FALSE((*kr)->accepts(std::vector<TensorInfo>{b16}));
}

TEST(TensorOp, DepthToSpaceAndBack) {
  // The ONNX DCR example: [1,8,2,3] blocksize 2.
  const Tensor x = iota_f32({1, 8, 2, 3});
  auto dcr = NodeCase("DepthToSpace", 13, 1).i("blocksize", 2).cpu({x});
  ASSERT_TRUE(dcr.ok()) << dcr.status().to_string();
  EXPECT_EQ((*dcr)[0].shape(), (Shape{1, 2, 4, 6}));
  const std::vector<float> want_row0 = {0, 12, 1, 13, 2, 14};
  EXPECT_EQ(std::vector<float>((*dcr)[0].data<float>(), (*dcr)[0].data<float>() + 6), want_row0);
  auto crd = NodeCase("DepthToSpace", 13, 1).i("blocksize", 2).s("mode", "CRD").cpu({x});
  ASSERT_TRUE(crd.ok());
  const std::vector<float> want_crd = {0, 6, 1, 7, 2, 8};
  EXPECT_EQ(std::vector<float>((*crd)[0].data<float>(), (*crd)[0].data<float>() + 6), want_crd);
  auto back = NodeCase("SpaceToDepth", 13, 1).i("blocksize", 2).cpu({(*dcr)[0]});
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(same_tensor((*back)[0], x));
  EXPECT_EQ(NodeCase("DepthToSpace", 13, 1).i("blocksize", 3).cpu({x}).status().code(), StatusCode::kInvalidArgument);
}

TEST(TensorOp, PadMatchesReference) {
  std::mt19937 rng(107);
  const char* modes[] = {"constant", "reflect", "edge"};
  for (int iter = 0; iter < 90; ++iter) {
    const Shape s = random_shape(rng, 1, 4, 5);
    const std::string mode = modes[iter % 3];
    std::vector<int64_t> pads(2 * s.rank());
    for (size_t i = 0; i < pads.size(); ++i) {
      const int64_t dim = s[i % s.rank()];
      pads[i] = std::uniform_int_distribution<int64_t>(-(dim / 2), 4)(rng);
    }
    const DType dt = kTypes[(iter / 3) % 3];
    const Tensor x = random_full(dt, s, rng);
    NodeCase n("Pad", 13, 3);
    n.s("mode", mode);
    Tensor value = Tensor::empty(dt, Shape{});
    std::memset(value.raw(), 7, dtype_size(dt));
    expect_matches_reference(n, {x, i64(pads), value}, iter % 2 ? 4 : 1, 0.0, mode + " " + s.to_string());
    if (iter % 5 == 0) {
      NodeCase old("Pad", 2, 1);
      old.s("mode", mode).ints("pads", pads).f("value", 3.f);
      expect_matches_reference(old, {x}, 1, 0.0, "opset 2 " + mode);
    }
  }
}

TEST(TensorOp, PadSpecExamples) {
  const Tensor x = f32({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  auto refl = NodeCase("Pad", 13, 2).s("mode", "reflect").cpu({x, i64({0, 2, 0, 0})});
  ASSERT_TRUE(refl.ok()) << refl.status().to_string();
  EXPECT_EQ(values<float>((*refl)[0]),
            (std::vector<float>{1.0f, 1.2f, 1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f, 4.5f, 5.7f}));
  const Tensor v = f32({4}, {1, 2, 3, 4});
  auto r1 = NodeCase("Pad", 13, 2).s("mode", "reflect").cpu({v, i64({2, 3})});
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(values<float>((*r1)[0]), (std::vector<float>{3, 2, 1, 2, 3, 4, 3, 2, 1}));
  auto e1 = NodeCase("Pad", 13, 2).s("mode", "edge").cpu({v, i64({2, 3})});
  ASSERT_TRUE(e1.ok());
  EXPECT_EQ(values<float>((*e1)[0]), (std::vector<float>{1, 1, 1, 2, 3, 4, 4, 4, 4}));
  auto c1 = NodeCase("Pad", 13, 3).cpu({v, i64({1, -2}), Tensor::scalar<float>(9.f)});
  ASSERT_TRUE(c1.ok());
  EXPECT_EQ(values<float>((*c1)[0]), (std::vector<float>{9, 1, 2}));
  auto axes = NodeCase("Pad", 18, 4).cpu({iota_f32({2, 2}), i64({1, 0}), Tensor(), i64({-1})});
  ASSERT_TRUE(axes.ok()) << axes.status().to_string();
  EXPECT_EQ(values<float>((*axes)[0]), (std::vector<float>{0, 0, 1, 0, 2, 3}));
}

// Resize on a 2x2 input to 4x4 by hand, per coordinate mode.
TEST(TensorOp, ResizeSpecCorners) {
  const Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor scales = Tensor::from_vector<float>(Shape{4}, {1, 1, 2, 2});
  auto resize = [&](const std::string& mode, const std::string& coord,
                    const std::string& nearest = "round_prefer_floor") {
    NodeCase n("Resize", 13, 3, 1, {true, false, true});
    n.s("mode", mode).s("coordinate_transformation_mode", coord).s("nearest_mode", nearest);
    auto r = n.cpu({x, Tensor(), scales});
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    auto ref = n.ref({x, Tensor(), scales});
    EXPECT_TRUE(ref.ok()) << ref.status().to_string();
    if (r.ok() && ref.ok()) {
      EXPECT_TRUE(same_tensor((*r)[0], (*ref)[0], 1e-6)) << mode << " " << coord;
    }
    return r.ok() ? values<float>((*r)[0]) : std::vector<float>{};
  };
  auto near = [](const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (std::fabs(a[i] - b[i]) > 1e-5f) return false;
    return true;
  };
  EXPECT_TRUE(near(resize("linear", "half_pixel"),
                   {1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f, 3, 3.25f, 3.75f, 4}));
  EXPECT_TRUE(near(resize("linear", "asymmetric"), {1, 1.5f, 2, 2, 2, 2.5f, 3, 3, 3, 3.5f, 4, 4, 3, 3.5f, 4, 4}));
  const float t = 1.f / 3.f;
  EXPECT_TRUE(near(resize("linear", "align_corners"), {1, 1 + t, 1 + 2 * t, 2, 1 + 2 * t, 2, 2 + t, 2 + 2 * t, 2 + t,
                                                       2 + 2 * t, 3, 3 + t, 3, 3 + t, 3 + 2 * t, 4}));
  EXPECT_TRUE(near(resize("nearest", "half_pixel"), {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  EXPECT_TRUE(near(resize("nearest", "asymmetric", "floor"), {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  EXPECT_TRUE(
      near(resize("nearest", "align_corners", "round_prefer_ceil"), {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  EXPECT_TRUE(near(resize("nearest", "asymmetric", "ceil"), {1, 2, 2, 2, 3, 4, 4, 4, 3, 4, 4, 4, 3, 4, 4, 4}));
}

TEST(TensorOp, ResizeMatchesReference) {
  std::mt19937 rng(108);
  const char* coords[] = {"half_pixel", "pytorch_half_pixel",   "align_corners",
                          "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  const char* nearest_modes[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  const char* modes[] = {"nearest", "linear", "cubic"};
  const float scale_choices[] = {0.5f, 0.6f, 1.f, 1.5f, 2.f, 2.3f, 3.f};
  for (int iter = 0; iter < 150; ++iter) {
    const Shape s{std::uniform_int_distribution<int64_t>(1, 2)(rng), std::uniform_int_distribution<int64_t>(1, 3)(rng),
                  std::uniform_int_distribution<int64_t>(1, 7)(rng), std::uniform_int_distribution<int64_t>(1, 7)(rng)};
    const std::string mode = modes[iter % 3];
    const std::string coord = coords[(iter / 3) % 6];
    const bool all_axes = iter % 11 == 0;
    const bool use_sizes = iter % 4 == 1;
    std::vector<float> sc(4, 1.f);
    std::vector<int64_t> sizes(s.begin(), s.end());
    for (size_t d = all_axes ? 0 : 2; d < 4; ++d) {
      sc[d] = scale_choices[std::uniform_int_distribution<int>(0, 6)(rng)];
      sizes[d] = std::uniform_int_distribution<int64_t>(1, 9)(rng);
    }
    DType dt = DType::kFloat32;
    if (mode == "nearest") dt = kTypes[(iter / 3) % 3];
    NodeCase n("Resize", 13, 4, 1, {true, true, !use_sizes, use_sizes});
    n.s("mode", mode).s("coordinate_transformation_mode", coord).s("nearest_mode", nearest_modes[(iter / 2) % 4]);
    if (mode == "cubic" && iter % 2) n.i("exclude_outside", 1).f("cubic_coeff_a", -0.5f);
    n.f("extrapolation_value", -7.f);
    const Tensor roi = Tensor::from_vector<float>(Shape{8}, {0, 0, 0.2f, 0.1f, 1, 1, 0.9f, 0.7f});
    std::vector<Tensor> ins = {random_full(dt, s, rng), roi, Tensor(), Tensor()};
    if (use_sizes)
      ins[3] = i64(sizes);
    else
      ins[2] = Tensor::from_vector<float>(Shape{4}, sc);
    expect_matches_reference(n, ins, iter % 2 ? 4 : 1, 1e-4, mode + " " + coord + " " + s.to_string());
  }
}

// Nearest resizing of the spatial axes runs in a channels-last or blocked input's own layout, with
// the plain result; linear modes, and resizes of N or C, are left to plain.
TEST(TensorOp, ResizeNearestInTheInputLayoutEqualsPlain) {
  std::mt19937 rng(110);
  const char* coords[] = {"asymmetric", "half_pixel", "align_corners"};
  const std::vector<float> scales[] = {{1, 1, 2, 2}, {1, 1, 0.5f, 1.5f}, {1, 1, 3, 1}};
  int checked = 0;
  for (Layout layout : {Layout::kChannelsLast, Layout::kBlocked8, Layout::kBlocked16}) {
    for (int k = 0; k < 3; ++k) {
      const Shape s{2, 32, 5 + k, 4};
      NodeCase n("Resize", 13, 3, 1, {true, false, true});
      n.s("mode", "nearest").s("coordinate_transformation_mode", coords[k]).s("nearest_mode", "floor");
      const std::vector<Tensor> ins{random_full(DType::kFloat32, s, rng), Tensor(),
                                    Tensor::from_vector<float>(Shape{4}, scales[k])};
      auto plain = n.cpu(ins);
      ASSERT_TRUE(plain.ok()) << plain.status().to_string();
      for (int threads : {1, 3}) {
        EvalOptions o;
        o.input_layout = layout;
        o.constant_mask = {false, true, true};
        o.num_threads = threads;
        auto got = n.run(cpu_reg(), ins, o);
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        EXPECT_TRUE(same_tensor((*got)[0], (*plain)[0])) << layout_name(layout) << " " << coords[k];
        ++checked;
      }
      auto kernel = n.kernel(ins);
      ASSERT_TRUE(kernel.ok());
      TensorInfo x = info_of(ins[0], false);
      x.layout = layout;
      const std::vector<TensorInfo> infos{x, TensorInfo{}, info_of(ins[2], true)};
      EXPECT_TRUE((*kernel)->accepts(infos));
      auto rr = (*kernel)->reshape(infos);
      ASSERT_TRUE(rr.ok()) << rr.status().to_string();
      EXPECT_EQ(rr->outputs[0].layout, layout);
    }
  }
  EXPECT_EQ(checked, 18);
  const Tensor x4 = Tensor::empty(DType::kFloat32, Shape{1, 32, 4, 4});
  TensorInfo b16 = info_of(x4, false);
  b16.layout = Layout::kBlocked16;
  const Tensor spatial = Tensor::from_vector<float>(Shape{4}, {1, 1, 2, 2});
  const Tensor channels = Tensor::from_vector<float>(Shape{4}, {1, 2, 2, 2});
  NodeCase linear("Resize", 13, 3, 1, {true, false, true});
  linear.s("mode", "linear");
  auto kl = linear.kernel({x4, Tensor(), spatial});
  ASSERT_TRUE(kl.ok());
  EXPECT_FALSE((*kl)->accepts(std::vector<TensorInfo>{b16, TensorInfo{}, info_of(spatial, true)}));
  NodeCase nearest("Resize", 13, 3, 1, {true, false, true});
  nearest.s("mode", "nearest");
  auto kn = nearest.kernel({x4, Tensor(), channels});
  ASSERT_TRUE(kn.ok());
  EXPECT_FALSE((*kn)->accepts(std::vector<TensorInfo>{b16, TensorInfo{}, info_of(channels, true)}));
}

TEST(TensorOp, ResizeOlderOpsetsAndUpsample) {
  std::mt19937 rng(109);
  for (int iter = 0; iter < 20; ++iter) {
    const Shape s{1, 2, std::uniform_int_distribution<int64_t>(1, 6)(rng),
                  std::uniform_int_distribution<int64_t>(1, 6)(rng)};
    const std::string mode = iter % 2 ? "linear" : "nearest";
    const std::vector<float> sc = {1, 1, iter % 3 ? 2.f : 1.5f, iter % 4 ? 3.f : 0.5f};
    const Tensor x = random_full(DType::kFloat32, s, rng);
    const Tensor scales = Tensor::from_vector<float>(Shape{4}, sc);
    NodeCase r10("Resize", 10, 2);
    r10.s("mode", mode);
    expect_matches_reference(r10, {x, scales}, 1, 1e-5, "Resize-10 " + mode);
    NodeCase r11("Resize", 11, 3);
    r11.s("mode", mode).s("coordinate_transformation_mode", "asymmetric").s("nearest_mode", "floor");
    auto a = r10.cpu({x, scales});
    auto b = r11.cpu({x, Tensor::from_vector<float>(Shape{0}, {}), scales});
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(same_tensor((*a)[0], (*b)[0], 1e-6)) << "Resize-10 equals Resize-11 asymmetric/floor";
    if (sc[3] >= 1.f) {
      NodeCase up9("Upsample", 9, 2);
      up9.s("mode", mode);
      expect_matches_reference(up9, {x, scales}, 1, 1e-5, "Upsample-9 " + mode);
      NodeCase up7("Upsample", 7, 1);
      up7.s("mode", mode).floats("scales", sc);
      auto c = up7.cpu({x});
      ASSERT_TRUE(c.ok()) << c.status().to_string();
      EXPECT_TRUE(same_tensor((*c)[0], (*a)[0], 1e-6));
    }
  }
  // Upsample nearest, the ONNX example: 2x2 by [1,1,2,3].
  NodeCase up("Upsample", 9, 2);
  auto r = up.cpu({f32({1, 1, 2, 2}, {1, 2, 3, 4}), Tensor::from_vector<float>(Shape{4}, {1, 1, 2, 3})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<float>((*r)[0]),
            (std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}));
}

// Resize-18 antialias: a downscaling filter widened by 1 / scale. Halving a ramp 0..7 with linear
// half_pixel samples x_o = 2x + 0.5 with weights 1/8, 3/8, 3/8, 1/8 on inputs 2x - 1 .. 2x + 2 (the
// first clamped to the edge); upscaling is unaffected.
TEST(TensorOp, ResizeAntialias) {
  const Tensor ramp = iota_f32({1, 1, 1, 8});
  NodeCase down("Resize", 18, 3, 1, {true, false, true});
  down.s("mode", "linear").i("antialias", 1);
  auto y = down.cpu({ramp, Tensor(), Tensor::from_vector<float>(Shape{4}, {1, 1, 1, 0.5f})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const std::vector<float> got = values<float>((*y)[0]), want{0.625f, 2.5f, 4.5f, 6.375f};
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  // Without antialias only the two nearest inputs count.
  NodeCase plain("Resize", 18, 3, 1, {true, false, true});
  plain.s("mode", "linear");
  auto p = plain.cpu({ramp, Tensor(), Tensor::from_vector<float>(Shape{4}, {1, 1, 1, 0.5f})});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(values<float>((*p)[0]), (std::vector<float>{0.5f, 2.5f, 4.5f, 6.5f}));
  // Cubic antialias keeps a constant image constant (the weights sum to 1).
  Tensor flat = Tensor::empty(DType::kFloat32, Shape{1, 1, 9, 9});
  for (int64_t i = 0; i < flat.numel(); ++i) flat.data<float>()[i] = 3.f;
  NodeCase cubic("Resize", 18, 4, 1, {true, false, false, true});
  cubic.s("mode", "cubic").i("antialias", 1);
  auto c = cubic.cpu({flat, Tensor(), Tensor(), i64({1, 1, 4, 3})});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  for (float v : values<float>((*c)[0])) EXPECT_NEAR(v, 3.f, 1e-5);
  // Upscaling with antialias equals plain linear.
  auto up = down.cpu({ramp, Tensor(), Tensor::from_vector<float>(Shape{4}, {1, 1, 1, 2})});
  auto up_plain = plain.cpu({ramp, Tensor(), Tensor::from_vector<float>(Shape{4}, {1, 1, 1, 2})});
  ASSERT_TRUE(up.ok() && up_plain.ok());
  EXPECT_EQ(values<float>((*up)[0]), values<float>((*up_plain)[0]));
}

TEST(TensorOp, ResizeErrors) {
  const Tensor x = iota_f32({1, 1, 2, 2});
  NodeCase both("Resize", 13, 4);
  auto r = both.cpu({x, Tensor(), Tensor::from_vector<float>(Shape{4}, {1, 1, 2, 2}), i64({1, 1, 4, 4})});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  NodeCase none("Resize", 13, 1);
  EXPECT_EQ(none.cpu({x}).status().code(), StatusCode::kInvalidArgument);
  NodeCase lin("Resize", 13, 3, 1, {true, false, true});
  lin.s("mode", "linear");
  EXPECT_EQ(lin.cpu({Tensor::empty(DType::kUInt8, Shape{1, 1, 2, 2}), Tensor(),
                     Tensor::from_vector<float>(Shape{4}, {1, 1, 2, 2})})
                .status()
                .code(),
            StatusCode::kUnsupported);
}

}  // namespace
}  // namespace streamline::ops::testing
