// The data-movement ops on string tensors (ops/cpu/string_moves.cc): each against the same op on
// numbers. A string tensor whose elements are the text of numbers must come out as the text of what
// the numeric kernel gives for those numbers, on random shapes; plus the cases with their own rules
// (empty strings from padding and zeros, Shape and Size, several string inputs, refusals).

#include <gtest/gtest.h>

#include <random>

#include "ops/op_test_util.h"

namespace streamline::ops {
namespace {

using testing::fails_with;
using testing::NodeSpec;
using testing::one_int;
using testing::run_node;

// "7" for 7: string tensors that mirror int64 tensors element by element.
Tensor as_text(const Tensor& ints) {
  Tensor s = Tensor::empty(DType::kString, ints.shape());
  for (int64_t i = 0; i < ints.numel(); ++i) s.strings()[i] = "s" + std::to_string(ints.data<int64_t>()[i]);
  return s;
}

Tensor random_ints(const Shape& shape, std::mt19937& rng) {
  Tensor t = Tensor::empty(DType::kInt64, shape);
  std::uniform_int_distribution<int64_t> d(1, 1000);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = d(rng);
  return t;
}

Tensor ints(const Shape& s, std::vector<int64_t> v) {
  return Tensor::from_vector<int64_t>(s, v);
}

// Runs `spec` twice: on `data` (int64, at the positions in `string_at`) and on its text; every
// output of the string run must be the text of the numeric run's.
void expect_mirrors(const NodeSpec& spec, std::vector<AnyValue> inputs, std::vector<size_t> string_at) {
  auto numeric = run_node(spec, inputs);
  ASSERT_TRUE(numeric.ok()) << spec.op << ": " << numeric.status().to_string();
  for (size_t i : string_at) inputs[i] = as_text(inputs[i].tensor());
  auto text = run_node(spec, inputs);
  ASSERT_TRUE(text.ok()) << spec.op << ": " << text.status().to_string();
  ASSERT_EQ(text->size(), numeric->size());
  for (size_t o = 0; o < text->size(); ++o) {
    const Tensor& want = (*numeric)[o].tensor();
    const Tensor& got = (*text)[o].tensor();
    ASSERT_EQ(got.dtype(), DType::kString) << spec.op << " output " << o;
    ASSERT_EQ(got.shape(), want.shape()) << spec.op << " output " << o;
    const Tensor want_text = as_text(want);
    for (int64_t j = 0; j < got.numel(); ++j)
      ASSERT_EQ(got.strings()[j], want_text.strings()[j]) << spec.op << " output " << o << " element " << j;
  }
}

TEST(StringMoves, MirrorNumericKernelsOnRandomShapes) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 5; ++trial) {
    const int64_t a = 1 + trial, b = 2 + (trial * 3) % 4, c = 1 + (trial * 5) % 3;
    const Tensor x = random_ints(Shape{a, b, c}, rng);
    expect_mirrors({"Reshape", "", 14}, {x, ints(Shape{2}, {a * b, c})}, {0});
    expect_mirrors({"Flatten", "", 13, {{"axis", one_int(1)}}}, {x}, {0});
    expect_mirrors({"Unsqueeze", "", 13}, {x, ints(Shape{1}, {0})}, {0});
    expect_mirrors({"Transpose", "", 13}, {x}, {0});
    expect_mirrors({"Slice", "", 13}, {x, ints(Shape{1}, {0}), ints(Shape{1}, {-1}), ints(Shape{1}, {1})}, {0});
    expect_mirrors({"Gather", "", 13, {{"axis", one_int(1)}}}, {x, ints(Shape{3}, {b - 1, 0, -1})}, {0});
    expect_mirrors({"Tile", "", 13}, {x, ints(Shape{3}, {2, 1, 3})}, {0});
    expect_mirrors({"Expand", "", 13}, {random_ints(Shape{1, c}, rng), ints(Shape{2}, {b, c})}, {0});
    expect_mirrors({"Split", "", 13, {{"axis", one_int(0)}}, 2},
                   {random_ints(Shape{2 * a, c}, rng), ints(Shape{2}, {a, a})}, {0});
    expect_mirrors({"GatherElements", "", 13, {{"axis", one_int(0)}}},
                   {x, ints(Shape{1, b, c}, std::vector<int64_t>(static_cast<size_t>(b * c), a - 1))}, {0});
    expect_mirrors({"ReverseSequence", "", 10, {{"batch_axis", one_int(1)}, {"time_axis", one_int(0)}}},
                   {x.reshaped(Shape{a, b * c}),
                    Tensor::from_vector<int64_t>(Shape{b * c}, std::vector<int64_t>(static_cast<size_t>(b * c), a))},
                   {0});
    // Several string inputs stay apart: Concat's, Where's, ScatterElements' data and updates.
    expect_mirrors({"Concat", "", 13, {{"axis", one_int(1)}}},
                   {x, random_ints(Shape{a, 3, c}, rng), random_ints(Shape{a, 1, c}, rng)}, {0, 1, 2});
    Tensor cond = Tensor::empty(DType::kBool, Shape{b, c});
    for (int64_t i = 0; i < cond.numel(); ++i) cond.data<bool>()[i] = (rng() & 1) != 0;
    expect_mirrors({"Where", "", 16}, {cond, x, random_ints(Shape{c}, rng)}, {1, 2});
    expect_mirrors({"ScatterElements", "", 16, {{"axis", one_int(0)}}},
                   {x, ints(Shape{1, b, c}, std::vector<int64_t>(static_cast<size_t>(b * c), 0)),
                    random_ints(Shape{1, b, c}, rng)},
                   {0, 2});
  }
}

TEST(StringMoves, PaddingFillsEmptyStringsOrTheConstant) {
  const Tensor x = Tensor::from_strings(Shape{2}, {"a", "b"});
  const Tensor pads = ints(Shape{2}, {1, 2});
  auto plain = run_node({"Pad", "", 13}, {x, pads});
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  const Tensor& y = (*plain)[0].tensor();
  ASSERT_EQ(y.shape(), Shape{5});
  EXPECT_EQ(std::vector<std::string>(y.strings(), y.strings() + 5), (std::vector<std::string>{"", "a", "b", "", ""}));
  auto with = run_node({"Pad", "", 13}, {x, pads, Tensor::from_strings(Shape{}, {"-"})});
  ASSERT_TRUE(with.ok()) << with.status().to_string();
  const Tensor& z = (*with)[0].tensor();
  EXPECT_EQ(std::vector<std::string>(z.strings(), z.strings() + 5),
            (std::vector<std::string>{"-", "a", "b", "-", "-"}));
  auto edge = run_node({"Pad", "", 13, {{"mode", testing::str("edge")}}}, {x, pads});
  ASSERT_TRUE(edge.ok()) << edge.status().to_string();
  const Tensor& e = (*edge)[0].tensor();
  EXPECT_EQ(std::vector<std::string>(e.strings(), e.strings() + 5),
            (std::vector<std::string>{"a", "a", "b", "b", "b"}));
}

TEST(StringMoves, ShapeAndSizeReadShapesOnly) {
  const Tensor x = Tensor::from_strings(Shape{2, 3}, {"a", "b", "c", "d", "e", "f"});
  auto shape = run_node({"Shape", "", 15}, {x});
  ASSERT_TRUE(shape.ok()) << shape.status().to_string();
  const Tensor& s = (*shape)[0].tensor();
  ASSERT_EQ(s.dtype(), DType::kInt64);
  EXPECT_EQ(std::vector<int64_t>(s.data<int64_t>(), s.data<int64_t>() + 2), (std::vector<int64_t>{2, 3}));
  auto size = run_node({"Size", "", 13}, {x});
  ASSERT_TRUE(size.ok()) << size.status().to_string();
  EXPECT_EQ((*size)[0].tensor().data<int64_t>()[0], 6);
}

TEST(StringMoves, LongStringsAndEmptyTensorsMoveWhole) {
  const std::string big(100000, 'x');
  auto y = run_node({"Concat", "", 13, {{"axis", one_int(0)}}},
                    {Tensor::from_strings(Shape{0}, {}), Tensor::from_strings(Shape{2}, {big, "\xc3\xa9"})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const Tensor& t = (*y)[0].tensor();
  ASSERT_EQ(t.shape(), Shape{2});
  EXPECT_EQ(t.strings()[0], big);
  EXPECT_EQ(t.strings()[1], "\xc3\xa9");
}

TEST(StringMoves, ValueDependentOpsAndReductionsAreRefused) {
  const Tensor x = Tensor::from_strings(Shape{2}, {"b", "a"});
  // Results that depend on the strings themselves are not index moves.
  EXPECT_TRUE(fails_with(run_node({"TopK", "", 11}, {x, ints(Shape{1}, {1})}).status(), StatusCode::kUnsupported,
                         {"TopK", "string"}));
  EXPECT_TRUE(fails_with(run_node({"ScatterElements", "", 16, {{"reduction", testing::str("add")}}},
                                  {x, ints(Shape{1}, {0}), Tensor::from_strings(Shape{1}, {"c"})})
                             .status(),
                         StatusCode::kUnsupported, {"ScatterElements 'node0'", "reduction 'add'", "string"}));
  // A bad index is the numeric kernel's error, naming the node.
  EXPECT_TRUE(fails_with(run_node({"Gather", "", 13}, {x, ints(Shape{1}, {5})}).status(), StatusCode::kInvalidArgument,
                         {"Gather 'node0'"}));
}

}  // namespace
}  // namespace streamline::ops
