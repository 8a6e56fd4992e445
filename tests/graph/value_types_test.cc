// Value kinds and element types from operator type rules (graph/value_types.h).

#include "graph/value_types.h"

#include <gtest/gtest.h>

namespace streamline::graph {
namespace {

Attribute int_attr(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  return a;
}

TEST(ValueTypes, SequenceAndOptionalOpsGiveTheirKinds) {
  Graph g;
  g.opsets[""] = 18;
  const auto x = g.add_value("x", DType::kFloat32, DimList{2});
  g.add_input(x);
  const auto s = g.add_value("s"), s2 = g.add_value("s2"), at = g.add_value("at"), n = g.add_value("n");
  const auto o = g.add_value("o"), has = g.add_value("has"), back = g.add_value("back"), e = g.add_value("e");
  const auto none = g.add_value("none"), pos = g.add_constant("pos", Tensor::scalar<int64_t>(0));
  g.add_node("SequenceConstruct", "make", {x}, {s});
  g.add_node("SequenceInsert", "push", {s, x}, {s2});
  g.add_node("SequenceAt", "at", {s2, pos}, {at});
  g.add_node("SequenceLength", "len", {s2}, {n});
  g.add_node("Optional", "wrap", {s2}, {o});
  g.add_node("OptionalHasElement", "has", {o}, {has});
  g.add_node("OptionalGetElement", "get", {o}, {back});
  const auto empty = g.add_node("SequenceEmpty", "empty", {}, {e});
  g.node(empty).attrs["dtype"] = int_attr(static_cast<int64_t>(DType::kInt32));
  const auto opt = g.add_node("Optional", "nothing", {}, {none});
  Attribute type;
  type.kind = Attribute::Kind::kType;
  type.type_kind = ValueKind::kTensor;
  type.type_dtype = DType::kBool;
  g.node(opt).attrs["type"] = type;
  for (ValueId v : {at, n, has, back, e, none}) g.add_output(v);
  // A guess made elsewhere ("the first input's type") gives way to the op's own rule.
  g.value(n).dtype = DType::kFloat32;
  g.value(has).dtype = DType::kFloat32;
  EXPECT_GT(infer_value_types(g), 0);
  auto expect = [&](ValueId v, ValueKind k, DType d) {
    EXPECT_EQ(g.value(v).kind, k) << g.value(v).name;
    EXPECT_EQ(g.value(v).dtype, d) << g.value(v).name;
  };
  expect(s, ValueKind::kSequence, DType::kFloat32);
  expect(s2, ValueKind::kSequence, DType::kFloat32);
  expect(at, ValueKind::kTensor, DType::kFloat32);
  expect(n, ValueKind::kTensor, DType::kInt64);
  expect(o, ValueKind::kOptionalSequence, DType::kFloat32);
  expect(has, ValueKind::kTensor, DType::kBool);
  expect(back, ValueKind::kSequence, DType::kFloat32);
  expect(e, ValueKind::kSequence, DType::kInt32);
  expect(none, ValueKind::kOptionalTensor, DType::kBool);
  // A second pass finds nothing new.
  EXPECT_EQ(infer_value_types(g), 0);
}

TEST(ValueTypes, BodiesSeeElementsAndLoopsCarrySequences) {
  // SequenceMap's body gets elements (tensors); its outputs become sequences.
  auto body = std::make_shared<Graph>();
  body->opsets[""] = 17;
  const auto bx = body->add_value("bx"), by = body->add_value("by");
  body->add_input(bx);
  body->add_node("Shape", "shape", {bx}, {by});
  body->value(by).dtype = DType::kInt64;
  body->add_output(by);
  // A Loop body whose carried value is a sequence it grows.
  auto loop_body = std::make_shared<Graph>();
  loop_body->opsets[""] = 13;
  const auto i = loop_body->add_value("i", DType::kInt64), c = loop_body->add_value("c", DType::kBool);
  const auto ls = loop_body->add_value("ls"), c_out = loop_body->add_value("c_out"),
             ls_out = loop_body->add_value("ls_out");
  for (ValueId v : {i, c, ls}) loop_body->add_input(v);
  loop_body->add_node("Identity", "keep", {c}, {c_out});
  loop_body->add_node("SequenceInsert", "push", {ls, i}, {ls_out});
  loop_body->add_output(c_out);
  loop_body->add_output(ls_out);

  Graph g;
  g.opsets[""] = 17;
  const auto in = g.add_value("in", DType::kFloat32);
  g.value(in).kind = ValueKind::kSequence;
  g.add_input(in);
  const auto shapes = g.add_value("shapes"), m = g.add_value("m", DType::kInt64), s0 = g.add_value("s0");
  const auto grown = g.add_value("grown");
  g.add_input(m);
  const auto map = g.add_node("SequenceMap", "map", {in}, {shapes});
  g.node(map).attrs["body"].kind = Attribute::Kind::kGraph;
  g.node(map).attrs["body"].g = body;
  const auto empty = g.add_node("SequenceEmpty", "start", {}, {s0});
  g.node(empty).attrs["dtype"] = int_attr(7);
  const auto loop = g.add_node("Loop", "loop", {m, kNoValue, s0}, {grown});
  g.node(loop).attrs["body"].kind = Attribute::Kind::kGraph;
  g.node(loop).attrs["body"].g = loop_body;
  g.add_output(shapes);
  g.add_output(grown);
  infer_value_types(g);
  EXPECT_EQ(body->value(bx).kind, ValueKind::kTensor);
  EXPECT_EQ(body->value(bx).dtype, DType::kFloat32);
  EXPECT_EQ(g.value(shapes).kind, ValueKind::kSequence);
  EXPECT_EQ(g.value(shapes).dtype, DType::kInt64);
  EXPECT_EQ(loop_body->value(ls).kind, ValueKind::kSequence);
  EXPECT_EQ(loop_body->value(ls_out).kind, ValueKind::kSequence);
  EXPECT_EQ(g.value(grown).kind, ValueKind::kSequence);
  EXPECT_EQ(g.value(grown).dtype, DType::kInt64);
}

TEST(ValueTypes, StringOpsAndLabelEncoder) {
  Graph g;
  g.opsets[""] = 20;
  g.opsets["ai.onnx.ml"] = 4;
  const auto x = g.add_value("x", DType::kString, DimList{3});
  g.add_input(x);
  const auto norm = g.add_value("norm"), parts = g.add_value("parts"), counts = g.add_value("counts");
  const auto match = g.add_value("match"), ids = g.add_value("ids");
  g.add_node("StringNormalizer", "norm", {x}, {norm});
  g.add_node("StringSplit", "split", {norm}, {parts, counts});
  g.add_node("RegexFullMatch", "re", {x}, {match});
  const auto le = g.add_node("LabelEncoder", "le", {x}, {ids}, "ai.onnx.ml");
  Attribute values;
  values.kind = Attribute::Kind::kInts;
  values.ints = {1, 2};
  g.node(le).attrs["values_int64s"] = values;
  infer_value_types(g);
  EXPECT_EQ(g.value(norm).dtype, DType::kString);
  EXPECT_EQ(g.value(parts).dtype, DType::kString);
  EXPECT_EQ(g.value(counts).dtype, DType::kInt64);
  EXPECT_EQ(g.value(match).dtype, DType::kBool);
  EXPECT_EQ(g.value(ids).dtype, DType::kInt64);
}

}  // namespace
}  // namespace streamline::graph
