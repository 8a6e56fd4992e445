// NonZero, Unique, Compress, NonMaxSuppression and the window generators: with constant inputs the
// CPU kernels fold (known values) and match the reference on random inputs (fixed seed); with
// non-constant inputs they report Unsupported instead of guessing a shape.

#include <limits>

#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

std::vector<bool> all_constant(size_t n) {
  return std::vector<bool>(n, true);
}

TEST(ValueShaped, NonZeroCompressUniqueMatchReference) {
  std::mt19937 rng(1201);
  for (int iter = 0; iter < 18; ++iter) {
    const Shape s = random_shape(rng, 1, 3, 4);
    Tensor x = Tensor::empty(DType::kFloat32, s);
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<float>()[i] = static_cast<float>(rng() % 3);  // many repeats and zeros
    NodeCase nz("NonZero", 13, 1);
    expect_cpu_matches_reference(nz, {x}, 0.0, "NonZero " + s.to_string(), 1, all_constant(1));

    const int64_t rank = static_cast<int64_t>(s.rank());
    NodeCase un("Unique", 11, 1, 4);
    un.i("sorted", iter % 2);
    if (iter % 3 != 0) un.i("axis", std::uniform_int_distribution<int64_t>(-rank, rank - 1)(rng));
    expect_cpu_matches_reference(un, {x}, 0.0, "Unique " + s.to_string(), 1, all_constant(1));

    NodeCase cp("Compress", 11, 2);
    int64_t len = x.numel();
    if (iter % 2) {
      const int64_t axis = std::uniform_int_distribution<int64_t>(0, rank - 1)(rng);
      cp.i("axis", axis);
      len = s[static_cast<size_t>(axis)];
    }
    Tensor cond = Tensor::empty(DType::kBool, Shape{std::uniform_int_distribution<int64_t>(0, len)(rng)});
    for (int64_t i = 0; i < cond.numel(); ++i) cond.data<uint8_t>()[i] = rng() % 2;
    expect_cpu_matches_reference(cp, {x, cond}, 0.0, "Compress " + s.to_string(), 1, all_constant(2));
  }
}

TEST(ValueShaped, NonMaxSuppressionMatchesReference) {
  std::mt19937 rng(1202);
  for (int iter = 0; iter < 16; ++iter) {
    const int64_t b = 1 + iter % 2, c = 1 + iter % 3, n = 1 + rng() % 8;
    Tensor boxes = random_tensor(Shape{b, n, 4}, rng, 0.f, 4.f);
    Tensor scores = random_tensor(Shape{b, c, n}, rng, 0.f, 1.f);
    std::vector<Tensor> in = {boxes, scores, Tensor::from_vector<int64_t>(Shape{1}, {static_cast<int64_t>(rng() % 5)}),
                              Tensor::from_vector<float>(Shape{1}, {0.3f}),
                              iter % 2 ? Tensor::from_vector<float>(Shape{1}, {0.2f}) : Tensor()};
    std::vector<bool> present = {true, true, true, true, iter % 2 == 1};
    NodeCase nc("NonMaxSuppression", 11, in.size(), 1, present);
    nc.i("center_point_box", iter % 4 == 3);
    expect_cpu_matches_reference(nc, in, 0.0, "NMS " + std::to_string(iter), 1, all_constant(in.size()));
  }
}

TEST(ValueShaped, NonMaxSuppressionByHand) {
  // Two heavily overlapping boxes and one apart: the lower-scored overlapping one is dropped.
  Tensor boxes = Tensor::from_vector<float>(Shape{1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 5, 1, 6});
  Tensor scores = Tensor::from_vector<float>(Shape{1, 1, 3}, {0.9f, 0.8f, 0.7f});
  NodeCase nc("NonMaxSuppression", 11, 4);
  auto out =
      nc.run(cpu_reg(),
             {boxes, scores, Tensor::from_vector<int64_t>(Shape{1}, {3}), Tensor::from_vector<float>(Shape{1}, {0.5f})},
             1, all_constant(4));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values<int64_t>((*out)[0]), (std::vector<int64_t>{0, 0, 0, 0, 0, 2}));
}

// Exporters (torchvision's detectors) pass INT64_MAX for "no limit", which no double holds: read
// through a double it became a negative count and selected nothing. A negative count selects nothing.
TEST(ValueShaped, NonMaxSuppressionLimitIsReadExactly) {
  Tensor boxes = Tensor::from_vector<float>(Shape{1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 5, 1, 6});
  Tensor scores = Tensor::from_vector<float>(Shape{1, 1, 3}, {0.9f, 0.8f, 0.7f});
  const Tensor iou = Tensor::from_vector<float>(Shape{1}, {0.5f});
  for (int64_t limit : {std::numeric_limits<int64_t>::max(), int64_t{-3}}) {
    SCOPED_TRACE("limit " + std::to_string(limit));
    NodeCase nc("NonMaxSuppression", 11, 4);
    const std::vector<Tensor> in{boxes, scores, Tensor::from_vector<int64_t>(Shape{1}, {limit}), iou};
    auto out = nc.run(cpu_reg(), in, 1, all_constant(4));
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const std::vector<int64_t> want = limit > 0 ? std::vector<int64_t>{0, 0, 0, 0, 0, 2} : std::vector<int64_t>{};
    EXPECT_EQ(values<int64_t>((*out)[0]), want);
    auto ref = nc.run(ref_reg(), in, 1, all_constant(4));
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    EXPECT_EQ(values<int64_t>((*ref)[0]), want);
  }
  // Many boxes, no limit: the CPU kernel against the reference.
  std::mt19937 rng(1204);
  Tensor many_boxes = random_tensor(Shape{2, 300, 4}, rng, 0.f, 20.f);
  Tensor many_scores = random_tensor(Shape{2, 3, 300}, rng, 0.f, 1.f);
  NodeCase nc("NonMaxSuppression", 11, 4);
  expect_cpu_matches_reference(
      nc, {many_boxes, many_scores, Tensor::from_vector<int64_t>(Shape{1}, {std::numeric_limits<int64_t>::max()}), iou},
      0.0, "NMS without a limit", 1, all_constant(4));
}

TEST(ValueShaped, WindowsMatchReference) {
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    for (int64_t size : {1, 2, 7, 10})
      for (int periodic = 0; periodic < 2; ++periodic) {
        NodeCase nc(op, 17, 1);
        nc.i("periodic", periodic);
        expect_cpu_matches_reference(nc, {Tensor::scalar<int64_t>(size)}, 1e-6, op, 1, all_constant(1));
      }
}

TEST(ValueShaped, NonConstantInputIsUnsupported) {
  std::mt19937 rng(1203);
  NodeCase nz("NonZero", 13, 1);
  auto out = nz.run(cpu_reg(), {random_tensor(Shape{2, 2}, rng)}, 1, {false});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kUnsupported);
}

TEST(ValueShaped, ConstantInputsAreKnownValues) {
  auto def = cpu_reg().find("NonZero", "", 13, Device::kCpu, DType::kFloat32);
  ASSERT_TRUE(def.ok());
  NodeCase nz("NonZero", 13, 1);
  Tensor x = Tensor::from_vector<float>(Shape{3}, {0.f, 2.f, 0.f});
  auto k = (*def)->create(KernelCreateArgs{nz.graph(), nz.node(), {&x}, {DType::kFloat32}, {}});
  ASSERT_TRUE(k.ok());
  TensorInfo info{DType::kFloat32, x.shape(), Layout::kPlain, &x};
  auto rr = (*k)->reshape(std::span<const TensorInfo>(&info, 1));
  ASSERT_TRUE(rr.ok()) << rr.status().to_string();
  ASSERT_EQ(rr->known_values.size(), 1u);
  ASSERT_TRUE(rr->known_values[0].has_value());
  EXPECT_EQ(values<int64_t>(*rr->known_values[0]), (std::vector<int64_t>{1}));
}

}  // namespace
}  // namespace streamline::ops::testing
