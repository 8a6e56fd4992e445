// Sequence and optional kernels, SequenceMap and Loop carrying sequences, and the interpreter's rules
// for values that are not tensors; checked against element-by-element references.

#include <gtest/gtest.h>

#include <random>

#include "ops/op_test_util.h"

namespace streamline::ops {
namespace {

using testing::fails_with;
using testing::NodeSpec;
using testing::one_int;
using testing::run_node;
using testing::run_values;

Tensor iota(const Shape& s, float start = 0.f) {
  Tensor t = Tensor::empty(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = start + static_cast<float>(i);
  return t;
}

std::vector<float> values_of(const Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.numel()};
}

AnyValue seq(std::vector<Tensor> items) {
  return AnyValue::sequence(std::move(items), DType::kFloat32);
}

TEST(Sequence, ConstructAtLengthInsertErase) {
  const Tensor a = iota(Shape{2}), b = iota(Shape{3}, 10.f), c = iota(Shape{1}, 20.f);
  auto made = run_node({"SequenceConstruct", "", 11}, {a, b});
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  const AnyValue s = (*made)[0];
  ASSERT_TRUE(s.is_sequence());
  ASSERT_EQ(s.items().size(), 2u);

  auto at = run_node({"SequenceAt", "", 11}, {s, Tensor::scalar<int64_t>(-1)});
  ASSERT_TRUE(at.ok()) << at.status().to_string();
  EXPECT_EQ(values_of((*at)[0].tensor()), values_of(b));

  auto len = run_node({"SequenceLength", "", 11}, {s});
  ASSERT_TRUE(len.ok());
  EXPECT_EQ((*len)[0].tensor().dtype(), DType::kInt64);
  EXPECT_EQ((*len)[0].tensor().data<int64_t>()[0], 2);

  // Insert at the front (an int32 position), then at the end (no position).
  auto front = run_node({"SequenceInsert", "", 11}, {s, c, Tensor::scalar<int32_t>(0)});
  ASSERT_TRUE(front.ok()) << front.status().to_string();
  ASSERT_EQ((*front)[0].items().size(), 3u);
  EXPECT_EQ(values_of((*front)[0].items()[0]), values_of(c));
  EXPECT_EQ(s.items().size(), 2u);  // the input sequence is unchanged
  auto back = run_node({"SequenceInsert", "", 11}, {(*front)[0], c});
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(values_of((*back)[0].items()[3]), values_of(c));

  auto erased = run_node({"SequenceErase", "", 11}, {(*back)[0], Tensor::scalar<int64_t>(1)});
  ASSERT_TRUE(erased.ok());
  ASSERT_EQ((*erased)[0].items().size(), 3u);
  EXPECT_EQ(values_of((*erased)[0].items()[1]), values_of(b));
  auto last = run_node({"SequenceErase", "", 11}, {(*erased)[0]});
  ASSERT_TRUE(last.ok());
  EXPECT_EQ((*last)[0].items().size(), 2u);

  auto empty = run_node({"SequenceEmpty", "", 11, {{"dtype", one_int(7)}}}, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE((*empty)[0].items().empty());
  EXPECT_EQ((*empty)[0].elem_dtype(), DType::kInt64);
}

TEST(Sequence, BadPositionsAndTypesNameTheNode) {
  const AnyValue s = seq({iota(Shape{2}), iota(Shape{2})});
  EXPECT_TRUE(fails_with(run_node({"SequenceAt", "", 11}, {s, Tensor::scalar<int64_t>(2)}).status(),
                         StatusCode::kInvalidArgument, {"SequenceAt 'node0'", "position 2", "2 tensors"}));
  EXPECT_TRUE(fails_with(run_node({"SequenceAt", "", 11}, {s, Tensor::scalar<int64_t>(-3)}).status(),
                         StatusCode::kInvalidArgument, {"position -3"}));
  EXPECT_TRUE(fails_with(run_node({"SequenceErase", "", 11}, {seq({}), Tensor()}).status(),
                         StatusCode::kInvalidArgument, {"SequenceErase 'node0'", "out of range"}));
  EXPECT_TRUE(fails_with(run_node({"SequenceAt", "", 11}, {iota(Shape{2}), Tensor::scalar<int64_t>(0)}).status(),
                         StatusCode::kInvalidArgument, {"must be a sequence"}));
  EXPECT_TRUE(fails_with(run_node({"SequenceInsert", "", 11}, {s, Tensor::scalar<int64_t>(3)}).status(),
                         StatusCode::kInvalidArgument, {"int64 tensor cannot join a sequence of float32"}));
  EXPECT_TRUE(fails_with(run_node({"SequenceConstruct", "", 11}, {iota(Shape{1}), Tensor::scalar<int64_t>(1)}).status(),
                         StatusCode::kInvalidArgument, {"inputs mix"}));
}

// Piece k of SplitToSequence computed by indexing: elements [start, start + size) along `axis`.
Tensor slice_ref(const Tensor& x, size_t axis, int64_t start, int64_t size, bool keep) {
  Shape shape;
  for (size_t d = 0; d < x.shape().rank(); ++d)
    if (d != axis || keep) shape.push_back(d == axis ? size : x.shape()[d]);
  Tensor y = Tensor::empty(DType::kFloat32, shape);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < x.shape().rank(); ++d) {
    if (d < axis) outer *= x.shape()[d];
    if (d > axis) inner *= x.shape()[d];
  }
  const int64_t len = x.shape()[axis];
  int64_t o = 0;
  for (int64_t b = 0; b < outer; ++b)
    for (int64_t k = start; k < start + size; ++k)
      for (int64_t i = 0; i < inner; ++i) y.data<float>()[o++] = x.data<float>()[(b * len + k) * inner + i];
  return y;
}

TEST(Sequence, SplitToSequenceMatchesSlicingAndConcatUndoesIt) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    Shape shape;
    for (int d = 0; d < rank; ++d) shape.push_back(1 + static_cast<int64_t>(rng() % 5));
    const Tensor x = testing::random_tensor(shape, rng);
    const int64_t axis = static_cast<int64_t>(rng() % static_cast<unsigned>(rank));
    const int64_t neg_axis = rng() % 2 ? axis - rank : axis;  // negative axes count from the end
    const int64_t len = shape[static_cast<size_t>(axis)];
    const int mode = trial % 4;  // 0: chunk size, 1: sizes, 2: none kept, 3: none squeezed
    std::vector<int64_t> sizes;
    Tensor split;
    if (mode == 0) {
      const int64_t chunk = 1 + static_cast<int64_t>(rng() % static_cast<unsigned>(len));
      split = Tensor::scalar<int64_t>(chunk);
      for (int64_t at = 0; at < len; at += chunk) sizes.push_back(std::min(chunk, len - at));
    } else if (mode == 1) {
      for (int64_t left = len; left > 0;) {
        sizes.push_back(1 + static_cast<int64_t>(rng() % static_cast<unsigned>(left)));
        left -= sizes.back();
      }
      split = Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(sizes.size())}, sizes);
    } else {
      sizes.assign(static_cast<size_t>(len), 1);
    }
    const bool keep = mode != 3;
    NodeSpec spec{"SplitToSequence", "", 11, {{"axis", one_int(neg_axis)}, {"keepdims", one_int(keep ? 1 : 0)}}};
    auto out = run_node(spec, {x, split});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const auto& items = (*out)[0].items();
    ASSERT_EQ(items.size(), sizes.size()) << trial;
    int64_t start = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      const Tensor want = slice_ref(x, static_cast<size_t>(axis), start, sizes[k], keep);
      ASSERT_EQ(items[k].shape(), want.shape()) << trial << " piece " << k;
      EXPECT_EQ(values_of(items[k]), values_of(want)) << trial << " piece " << k;
      start += sizes[k];
    }
    // Concatenating (or, for squeezed pieces, stacking) along the same axis gives x back.
    NodeSpec cat{"ConcatFromSequence", "", 11, {{"axis", one_int(neg_axis)}, {"new_axis", one_int(keep ? 0 : 1)}}};
    auto back = run_node(cat, {(*out)[0]});
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    ASSERT_EQ((*back)[0].tensor().shape(), x.shape()) << trial;
    EXPECT_EQ(values_of((*back)[0].tensor()), values_of(x)) << trial;
  }
}

TEST(Sequence, ConcatFromSequenceStacksAtTheEndAndRefusesMismatches) {
  const Tensor a = iota(Shape{2, 3}), b = iota(Shape{2, 3}, 6.f);
  auto stacked =
      run_node({"ConcatFromSequence", "", 11, {{"axis", one_int(-1)}, {"new_axis", one_int(1)}}}, {seq({a, b})});
  ASSERT_TRUE(stacked.ok()) << stacked.status().to_string();
  const Tensor& y = (*stacked)[0].tensor();
  ASSERT_EQ(y.shape(), (Shape{2, 3, 2}));
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(y.data<float>()[2 * i], a.data<float>()[i]);
    EXPECT_EQ(y.data<float>()[2 * i + 1], b.data<float>()[i]);
  }
  EXPECT_TRUE(fails_with(
      run_node({"ConcatFromSequence", "", 11, {{"axis", one_int(0)}}}, {seq({a, iota(Shape{2, 4})})}).status(),
      StatusCode::kInvalidArgument, {"ConcatFromSequence 'node0'", "cannot concatenate"}));
  EXPECT_TRUE(fails_with(run_node({"ConcatFromSequence", "", 11, {{"axis", one_int(2)}}}, {seq({a})}).status(),
                         StatusCode::kInvalidArgument, {"axis 2"}));
}

TEST(Sequence, StringTensorsSplitAndJoin) {
  const Tensor words = Tensor::from_strings(Shape{4}, {"a", "bb", "ccc", "dddd"});
  auto parts = run_node({"SplitToSequence", "", 11}, {words, Tensor::scalar<int64_t>(3)});
  ASSERT_TRUE(parts.ok()) << parts.status().to_string();
  ASSERT_EQ((*parts)[0].items().size(), 2u);
  EXPECT_EQ((*parts)[0].elem_dtype(), DType::kString);
  EXPECT_EQ((*parts)[0].items()[1].strings()[0], "dddd");
  auto joined = run_node({"ConcatFromSequence", "", 11, {{"axis", one_int(0)}}}, {(*parts)[0]});
  ASSERT_TRUE(joined.ok()) << joined.status().to_string();
  EXPECT_EQ((*joined)[0].tensor().strings()[2], "ccc");
}

TEST(Optional, MakeTestAndGetByOpset) {
  const Tensor x = iota(Shape{3});
  auto some = run_node({"Optional", "", 15}, {x});
  ASSERT_TRUE(some.ok()) << some.status().to_string();
  EXPECT_EQ((*some)[0].kind(), ValueKind::kOptionalTensor);
  graph::Attribute type;
  type.kind = graph::Attribute::Kind::kType;
  type.type_kind = ValueKind::kSequence;
  type.type_dtype = DType::kFloat32;
  auto none = run_node({"Optional", "", 15, {{"type", type}}}, {});
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_EQ((*none)[0].kind(), ValueKind::kOptionalSequence);
  EXPECT_FALSE((*none)[0].has_element());

  auto has = [&](int opset, const AnyValue& v) -> Result<bool> {
    SL_ASSIGN_OR_RETURN(auto outs, run_node({"OptionalHasElement", "", opset}, {v}));
    return outs[0].tensor().data<uint8_t>()[0] != 0;
  };
  EXPECT_EQ(*has(15, (*some)[0]), true);
  EXPECT_EQ(*has(15, (*none)[0]), false);
  EXPECT_EQ(*has(18, x), true);            // from opset 18 a tensor is an element that is there
  EXPECT_EQ(*has(18, AnyValue()), false);  // and an omitted input is none
  EXPECT_TRUE(fails_with(has(15, x).status(), StatusCode::kInvalidArgument, {"before opset 18"}));

  auto got = run_node({"OptionalGetElement", "", 15}, {(*some)[0]});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(values_of((*got)[0].tensor()), values_of(x));
  auto pass = run_node({"OptionalGetElement", "", 18}, {seq({x})});
  ASSERT_TRUE(pass.ok());
  EXPECT_TRUE((*pass)[0].is_sequence());
  EXPECT_TRUE(fails_with(run_node({"OptionalGetElement", "", 18}, {(*none)[0]}).status(), StatusCode::kInvalidArgument,
                         {"OptionalGetElement 'node0'", "empty"}));
}

graph::Attribute graph_attr(graph::Graph g) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kGraph;
  a.g = std::make_shared<graph::Graph>(std::move(g));
  return a;
}

// Body (x, k) -> x + k, and Shape(x).
graph::Graph add_body() {
  graph::Graph b;
  b.opsets[""] = 17;
  const auto x = b.add_value("x"), k = b.add_value("k"), y = b.add_value("y"), s = b.add_value("s");
  b.add_input(x);
  b.add_input(k);
  b.add_node("Add", "add", {x, k}, {y});
  b.add_node("Shape", "shape", {x}, {s});
  b.add_output(y);
  b.add_output(s);
  return b;
}

TEST(SequenceMap, MapsElementsWithSequenceAndTensorInputs) {
  const Tensor a = iota(Shape{2}), b = iota(Shape{3}, 5.f), one = Tensor::scalar<float>(1.f);
  NodeSpec spec{"SequenceMap", "", 17, {{"body", graph_attr(add_body())}}, 2};
  // A tensor second input goes to every iteration whole.
  auto outs = run_node(spec, {seq({a, b}), one});
  ASSERT_TRUE(outs.ok()) << outs.status().to_string();
  ASSERT_EQ((*outs)[0].items().size(), 2u);
  EXPECT_EQ(values_of((*outs)[0].items()[1]), (std::vector<float>{6.f, 7.f, 8.f}));
  EXPECT_EQ((*outs)[1].items()[1].data<int64_t>()[0], 3);
  // A sequence second input gives element i.
  auto pairs = run_node(spec, {seq({a, b}), seq({Tensor::scalar<float>(10.f), Tensor::scalar<float>(20.f)})});
  ASSERT_TRUE(pairs.ok()) << pairs.status().to_string();
  EXPECT_EQ(values_of((*pairs)[0].items()[0]), (std::vector<float>{10.f, 11.f}));
  EXPECT_EQ(values_of((*pairs)[0].items()[1]), (std::vector<float>{25.f, 26.f, 27.f}));
  EXPECT_TRUE(fails_with(run_node(spec, {seq({a, b}), seq({one})}).status(), StatusCode::kInvalidArgument,
                         {"SequenceMap 'node0'", "1 elements", "2"}));
}

TEST(Loop, CarriesASequenceItGrows) {
  // Loop M times: s = SequenceInsert(s, Unsqueeze(i)) starting from SequenceEmpty(int64).
  graph::Graph body;
  body.opsets[""] = 13;
  const auto i = body.add_value("i", DType::kInt64), c = body.add_value("c", DType::kBool), s = body.add_value("s");
  body.add_input(i);
  body.add_input(c);
  body.add_input(s);
  const auto c_out = body.add_value("c_out"), s_out = body.add_value("s_out");
  body.add_node("Identity", "keep_going", {c}, {c_out});
  body.add_node("SequenceInsert", "push", {s, i}, {s_out});
  body.add_output(c_out);
  body.add_output(s_out);

  graph::Graph g;
  g.opsets[""] = 13;
  const auto m = g.add_value("m", DType::kInt64);
  g.add_input(m);
  const auto cond = g.add_constant("cond", Tensor::scalar<bool>(true));
  const auto s0 = g.add_value("s0"), out = g.add_value("out"), len = g.add_value("len");
  const auto e = g.add_node("SequenceEmpty", "start", {}, {s0});
  g.node(e).attrs["dtype"] = one_int(7);
  const auto loop = g.add_node("Loop", "loop", {m, cond, s0}, {out});
  g.node(loop).attrs["body"] = graph_attr(std::move(body));
  g.add_node("SequenceLength", "count", {out}, {len});
  g.add_output(out);
  g.add_output(len);
  auto res = run_values(std::move(g), {Tensor::scalar<int64_t>(4)});
  ASSERT_TRUE(res.ok()) << res.status().to_string();
  ASSERT_EQ((*res)[0].items().size(), 4u);
  for (int64_t k = 0; k < 4; ++k) EXPECT_EQ((*res)[0].items()[static_cast<size_t>(k)].data<int64_t>()[0], k);
  EXPECT_EQ((*res)[1].tensor().data<int64_t>()[0], 4);
}

TEST(Interpreter, IdentityPassesAnyValueAndTensorOpsRefuseSequences) {
  const AnyValue s = seq({iota(Shape{2})});
  auto same = run_node({"Identity", "", 16}, {s});
  ASSERT_TRUE(same.ok()) << same.status().to_string();
  EXPECT_TRUE((*same)[0].is_sequence());
  auto opt = run_node({"Identity", "", 16}, {AnyValue::none(ValueKind::kOptionalTensor, DType::kFloat32)});
  ASSERT_TRUE(opt.ok());
  EXPECT_TRUE((*opt)[0].is_optional());
  EXPECT_TRUE(fails_with(run_node({"Relu", "", 14}, {s}).status(), StatusCode::kUnsupported,
                         {"Relu 'node0'", "opset 14", "input 0 ('in0')", "sequence of float32", "takes tensors"}));
}

}  // namespace
}  // namespace streamline::ops
