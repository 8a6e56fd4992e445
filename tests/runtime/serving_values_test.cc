// Serving models with string tensors (batched element by element, run node by node) and refusing
// models whose inputs or outputs are sequences, which requests cannot carry.

#include <gtest/gtest.h>

#include <future>
#include <map>
#include <vector>

#include "graph/ir.h"
#include "plan/execution_plan.h"
#include "streamline/serving.h"

namespace streamline {
namespace {

using graph::Attribute;
using graph::DimList;

// words (string[N]) -> StringNormalizer(upper) -> loud (string[N]); LabelEncoder -> ids (int64[N]).
graph::Graph shout_graph() {
  graph::Graph g;
  g.opsets[""] = 13;
  g.opsets["ai.onnx.ml"] = 2;
  const auto x = g.add_value("words", DType::kString, DimList{graph::Dim::sym("n")});
  g.add_input(x);
  const auto loud = g.add_value("loud", DType::kString, DimList{graph::Dim::sym("n")});
  const auto ids = g.add_value("ids", DType::kInt64, DimList{graph::Dim::sym("n")});
  const auto norm = g.add_node("StringNormalizer", "up", {x}, {loud});
  g.node(norm).attrs["case_change_action"].kind = Attribute::Kind::kString;
  g.node(norm).attrs["case_change_action"].s = "UPPER";
  const auto le = g.add_node("LabelEncoder", "lookup", {loud}, {ids}, "ai.onnx.ml");
  g.node(le).attrs["keys_strings"].kind = Attribute::Kind::kStrings;
  g.node(le).attrs["keys_strings"].strings = {"RED", "GREEN", "BLUE"};
  g.node(le).attrs["values_int64s"].kind = Attribute::Kind::kInts;
  g.node(le).attrs["values_int64s"].ints = {0, 1, 2};
  g.add_output(loud);
  g.add_output(ids);
  return g;
}

TEST(ServingValues, StringRequestsBatchAndSplitElementByElement) {
  auto m = Model::from_graph(shout_graph());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ServingOptions so;
  so.instances = 1;
  so.threads_per_instance = 1;
  so.batching.max_batch_size = 8;
  // The three requests hold 6 rows: a batch launches when it reaches 6, and never on the delay.
  so.batching.preferred_batch_sizes = {6};
  so.batching.max_queue_delay_us = int64_t{3600} * 1000000;
  auto served = ServingModel::create(*m, so);
  ASSERT_TRUE(served.ok()) << served.status().to_string();
  const std::vector<std::vector<std::string>> asks = {{"red"}, {"Blue", "pink"}, {"green", "", "caf\xc3\xa9"}};
  std::vector<std::future<InferResponse>> pending;
  for (const auto& words : asks) {
    InferRequest r;
    r.inputs["words"] = Tensor::from_strings(Shape{static_cast<int64_t>(words.size())}, words);
    pending.push_back((*served)->submit(std::move(r)));
  }
  const std::vector<std::vector<std::string>> loud = {{"RED"}, {"BLUE", "PINK"}, {"GREEN", "", "CAF\xc3\x89"}};
  const std::vector<std::vector<int64_t>> ids = {{0}, {2, -1}, {1, -1, -1}};
  for (size_t i = 0; i < pending.size(); ++i) {
    InferResponse r = pending[i].get();
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    const Tensor& l = r.outputs.at("loud");
    ASSERT_EQ(l.dtype(), DType::kString);
    EXPECT_EQ(std::vector<std::string>(l.strings(), l.strings() + l.numel()), loud[i]) << "request " << i;
    const Tensor& n = r.outputs.at("ids");
    EXPECT_EQ(std::vector<int64_t>(n.data<int64_t>(), n.data<int64_t>() + n.numel()), ids[i]) << "request " << i;
  }
  // All three ran in one batch of 6 rows.
  const ServingStats st = (*served)->stats();
  EXPECT_EQ(st.batch_size_hist, (std::map<int, uint64_t>{{6, 1}}));
}

TEST(ServingValues, TracedRequestsOfEagerModelsRecordEveryNode) {
  auto m = Model::from_graph(shout_graph());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ServingOptions so;
  so.instances = 1;
  so.threads_per_instance = 1;
  auto served = ServingModel::create(*m, so);
  ASSERT_TRUE(served.ok()) << served.status().to_string();
  InferRequest r;
  r.inputs["words"] = Tensor::from_strings(Shape{2}, {"red", "blue"});
  r.trace = true;
  InferResponse resp = (*served)->submit(std::move(r)).get();
  ASSERT_TRUE(resp.status.ok()) << resp.status.to_string();
  ASSERT_TRUE(resp.trace);
  // One span per node, in run order, with its op, and each one ends after it begins.
  ASSERT_EQ(resp.trace->steps.size(), 2u);
  EXPECT_EQ(resp.trace->steps[0].name, "up");
  EXPECT_EQ(resp.trace->steps[0].op, "StringNormalizer");
  EXPECT_EQ(resp.trace->steps[1].name, "lookup");
  EXPECT_EQ(resp.trace->steps[1].op, "LabelEncoder");
  for (const StepSpan& s : resp.trace->steps) EXPECT_LE(s.begin_ns, s.end_ns) << s.name;
}

TEST(ServingValues, SequenceInputsAreRefusedNamingTheInput) {
  graph::Graph g;
  g.opsets[""] = 16;
  const auto seq = g.add_value("seq", DType::kFloat32);
  g.value(seq).kind = ValueKind::kSequence;
  g.add_input(seq);
  const auto n = g.add_value("n", DType::kInt64);
  g.add_node("SequenceLength", "len", {seq}, {n});
  g.add_output(n);
  auto m = Model::from_graph(std::move(g));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  auto served = ServingModel::create(*m, ServingOptions{});
  ASSERT_FALSE(served.ok());
  EXPECT_EQ(served.status().code(), StatusCode::kUnsupported);
  for (const char* part : {"input 'seq'", "sequence of float32", "run_values"})
    EXPECT_NE(served.status().message().find(part), std::string::npos) << part << ": " << served.status().to_string();
}

}  // namespace
}  // namespace streamline
