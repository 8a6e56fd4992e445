// Models with sequences, optionals and string tensors: they run node by node, take and give whole
// values through Session::run_values, and refuse what they cannot run at load, naming the node.

#include <gtest/gtest.h>

#include <algorithm>

#include "graph/ir.h"
#include "plan/execution_plan.h"
#include "streamline/streamline.h"

namespace streamline {
namespace {

using graph::Attribute;
using graph::DimList;

Attribute strings_attr(std::vector<std::string> v) {
  Attribute a;
  a.kind = Attribute::Kind::kStrings;
  a.strings = std::move(v);
  return a;
}
Attribute text_attr(std::string s) {
  Attribute a;
  a.kind = Attribute::Kind::kString;
  a.s = std::move(s);
  return a;
}

// seq (sequence of float32) -> n = SequenceLength(seq), same = Identity(seq), first = SequenceAt(seq, 0).
graph::Graph sequence_graph() {
  graph::Graph g;
  g.opsets[""] = 16;
  const auto seq = g.add_value("seq", DType::kFloat32);
  g.value(seq).kind = ValueKind::kSequence;
  g.add_input(seq);
  const auto n = g.add_value("n"), same = g.add_value("same"), first = g.add_value("first");
  const auto zero = g.add_constant("zero", Tensor::scalar<int64_t>(0));
  g.add_node("SequenceLength", "len", {seq}, {n});
  g.add_node("Identity", "same", {seq}, {same});
  g.add_node("SequenceAt", "first", {seq, zero}, {first});
  g.add_output(n);
  g.add_output(same);
  g.add_output(first);
  return g;
}

// Counts the hooks of eager runs and keeps the names of the steps that ended.
class NodeLog final : public exec::ExecObserver {
 public:
  void on_run_begin(const plan::ExecutionPlan&) override { ++runs; }
  void on_step_begin(const plan::ExecutionPlan&, int, int) override { ++begun; }
  void on_step_end(const plan::ExecutionPlan& p, int step, int) override {
    names.push_back(p.steps[static_cast<size_t>(step)].name);
  }
  void on_run_end(const plan::ExecutionPlan&) override { ++ended; }
  int runs = 0, begun = 0, ended = 0;
  std::vector<std::string> names;
};

TEST(Values, ObserversSeeEveryNodeOfARunWithSequences) {
  auto m = Model::from_graph(sequence_graph());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  Session session(*m);
  NodeLog log;
  RunOptions ro;
  ro.observer = &log;
  const Tensor a = Tensor::from_vector<float>(Shape{2}, {1.f, 2.f});
  auto outs = session.run_values({AnyValue::sequence({a}, DType::kFloat32)}, ro);
  ASSERT_TRUE(outs.ok()) << outs.status().to_string();
  EXPECT_EQ(log.runs, 1);
  EXPECT_EQ(log.ended, 1);
  EXPECT_EQ(log.begun, 3);
  std::vector<std::string> names = log.names;
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"first", "len", "same"}));
}

TEST(Values, SequenceInputsAndOutputsGoThroughRunValues) {
  auto m = Model::from_graph(sequence_graph());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const std::shared_ptr<const Model> model = *m;
  EXPECT_EQ(model->inputs()[0].kind, ValueKind::kSequence);
  EXPECT_EQ(model->outputs()[1].kind, ValueKind::kSequence);
  EXPECT_EQ(model->outputs()[2].kind, ValueKind::kTensor);
  Session session(model);
  const Tensor a = Tensor::from_vector<float>(Shape{2}, {1.f, 2.f});
  const Tensor b = Tensor::from_vector<float>(Shape{1}, {3.f});
  for (int run = 0; run < 2; ++run) {  // the eager decision is cached; the second run reuses it
    auto outs = session.run_values({AnyValue::sequence({a, b}, DType::kFloat32)});
    ASSERT_TRUE(outs.ok()) << outs.status().to_string();
    EXPECT_EQ((*outs)[0].tensor().data<int64_t>()[0], 2);
    ASSERT_TRUE((*outs)[1].is_sequence());
    EXPECT_EQ((*outs)[1].items()[1].data<float>()[0], 3.f);
    EXPECT_EQ((*outs)[2].tensor().data<float>()[1], 2.f);
  }
  auto mode = model->execution_mode({Shape{}});
  ASSERT_TRUE(mode.ok());
  EXPECT_EQ(*mode, ExecutionMode::kEager);
  EXPECT_NE(model->eager_reason({Shape{}}).find("input 'seq' is a sequence of float32"), std::string::npos)
      << model->eager_reason({Shape{}});
  // run() takes tensors only, and says so; a wrong kind or element type is refused by name.
  auto plain = session.run({a});
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("run_values"), std::string::npos) << plain.status().to_string();
  auto tensor = session.run_values({AnyValue(a)});
  ASSERT_FALSE(tensor.ok());
  EXPECT_NE(tensor.status().message().find("input 'seq' must be a sequence of float32"), std::string::npos)
      << tensor.status().to_string();
  auto ints = session.run_values({AnyValue::sequence({Tensor::scalar<int64_t>(1)}, DType::kInt64)});
  ASSERT_FALSE(ints.ok());
  EXPECT_EQ(ints.status().code(), StatusCode::kInvalidArgument);
}

// x (string[N]) -> StringNormalizer(lower) -> LabelEncoder -> ids (int64[N]).
graph::Graph category_graph() {
  graph::Graph g;
  g.opsets[""] = 13;
  g.opsets["ai.onnx.ml"] = 2;
  const auto x = g.add_value("x", DType::kString, DimList{graph::Dim::sym("n")});
  g.add_input(x);
  const auto lower = g.add_value("lower"), ids = g.add_value("ids", DType::kInt64);
  const auto norm = g.add_node("StringNormalizer", "norm", {x}, {lower});
  g.node(norm).attrs["case_change_action"] = text_attr("LOWER");
  const auto le = g.add_node("LabelEncoder", "lookup", {lower}, {ids}, "ai.onnx.ml");
  g.node(le).attrs["keys_strings"] = strings_attr({"red", "green", "blue"});
  Attribute values;
  values.kind = Attribute::Kind::kInts;
  values.ints = {0, 1, 2};
  g.node(le).attrs["values_int64s"] = values;
  g.add_output(ids);
  return g;
}

TEST(Values, StringModelsRunEagerlyThroughRun) {
  auto m = Model::from_graph(category_graph());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  Session session(*m);
  auto outs = session.run({Tensor::from_strings(Shape{4}, {"Red", "BLUE", "purple", "green"})});
  ASSERT_TRUE(outs.ok()) << outs.status().to_string();
  const Tensor& ids = (*outs)[0];
  EXPECT_EQ(std::vector<int64_t>(ids.data<int64_t>(), ids.data<int64_t>() + 4), (std::vector<int64_t>{0, 2, -1, 1}));
  EXPECT_EQ(*(*m)->execution_mode({Shape{4}}), ExecutionMode::kEager);
  EXPECT_NE((*m)->eager_reason({Shape{4}}).find("string tensor"), std::string::npos);
}

TEST(Values, StringsInsideAGraphOfTensorsRunEagerly) {
  // x (float32) -> Cast to string -> RegexFullMatch("-.*") -> negative (bool): plannable I/O, but the
  // string values in between cannot live in a plan's arena.
  graph::Graph g;
  g.opsets[""] = 20;
  const auto x = g.add_value("x", DType::kFloat32, DimList{3});
  g.add_input(x);
  const auto text = g.add_value("text"), neg = g.add_value("neg", DType::kBool);
  const auto cast = g.add_node("Cast", "to_text", {x}, {text});
  g.node(cast).attrs["to"].kind = Attribute::Kind::kInt;
  g.node(cast).attrs["to"].i = static_cast<int64_t>(DType::kString);
  const auto re = g.add_node("RegexFullMatch", "negative", {text}, {neg});
  g.node(re).attrs["pattern"] = text_attr("-.*");
  g.add_output(neg);
  auto m = Model::from_graph(std::move(g));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  Session session(*m);
  auto outs = session.run({Tensor::from_vector<float>(Shape{3}, {-1.5f, 2.f, -0.25f})});
  ASSERT_TRUE(outs.ok()) << outs.status().to_string();
  EXPECT_EQ(std::vector<uint8_t>((*outs)[0].data<uint8_t>(), (*outs)[0].data<uint8_t>() + 3),
            (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(*(*m)->execution_mode({Shape{3}}), ExecutionMode::kEager);
  EXPECT_NE((*m)->eager_reason({Shape{3}}).find("Cast 'to_text' gives string tensors"), std::string::npos)
      << (*m)->eager_reason({Shape{3}});
}

TEST(Values, UnsupportedKindsAndTypesFailAtLoadNamingOpOpsetNodeAndType) {
  // A tensor operator given a sequence.
  graph::Graph g;
  g.opsets[""] = 14;
  const auto x = g.add_value("x", DType::kFloat32, DimList{2});
  g.add_input(x);
  const auto s = g.add_value("s"), y = g.add_value("y");
  g.add_node("SequenceConstruct", "make", {x}, {s});
  g.add_node("Relu", "r", {s}, {y});
  g.add_output(y);
  auto m = Model::from_graph(std::move(g));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnsupported);
  for (const char* part : {"Relu 'r'", "opset 14", "input 0 ('s')", "sequence of float32"})
    EXPECT_NE(m.status().message().find(part), std::string::npos) << part << ": " << m.status().to_string();

  // A tensor operator without a string kernel given strings.
  graph::Graph t;
  t.opsets[""] = 14;
  const auto sx = t.add_value("sx", DType::kString, DimList{2});
  t.add_input(sx);
  const auto sy = t.add_value("sy");
  t.add_node("Relu", "relu_text", {sx}, {sy});
  t.add_output(sy);
  auto mt = Model::from_graph(std::move(t));
  ASSERT_FALSE(mt.ok());
  for (const char* part : {"Relu (opset 14)", "string", "relu_text"})
    EXPECT_NE(mt.status().message().find(part), std::string::npos) << part << ": " << mt.status().to_string();
}

}  // namespace
}  // namespace streamline
