// Dtypes of values ONNX 1.12's inference cannot type: nodes of opsets it has no schema for, nodes
// whose later signature fails its check, and branch outputs built from them.

#include "graph/infer_dtypes.h"

#include <gtest/gtest.h>

#include "graph/onnx_import.h"
#include "graph/onnx_test_models.h"

namespace streamline::graph {
namespace {

using onnx::TensorProto;
using testing::OnnxModel;

DType dtype_of(const Graph& g, const std::string& name) {
  const ValueId v = g.find_value(name);
  return v == kNoValue ? DType::kUndefined : g.value(v).dtype;
}

TEST(InferDtypes, NewerOpsetNodesGetTheirOperatorsOutputType) {
  OnnxModel m(21);
  m.input("x", TensorProto::FLOAT, {"2", "3"});
  m.initializer(testing::raw_tensor<int64_t>("axes", TensorProto::INT64, {1}, {1}));
  m.initializer(testing::float_tensor("scale", {}, {0.5f}));
  m.initializer(testing::raw_tensor<int8_t>("zp", TensorProto::INT8, {}, {0}));
  // ReduceMean-18 takes axes as an input, which ONNX 1.12's ReduceMean-13 refuses.
  m.node("ReduceMean", "mean", {"x", "axes"}, {"m"});
  // QuantizeLinear-21's block_size attribute is unknown to 1.12: its output follows the zero point.
  auto* q = m.node("QuantizeLinear", "q", {"m", "scale", "zp"}, {"qm"});
  testing::attr_int(q, "block_size", 0);
  // CenterCropPad (opset 18) has no schema there at all.
  m.initializer(testing::raw_tensor<int64_t>("shape", TensorProto::INT64, {1}, {2}));
  auto* c = m.node("CenterCropPad", "crop", {"qm", "shape"}, {"cropped"});
  testing::attr_ints(c, "axes", {1});
  m.node("Equal", "eq", {"cropped", "cropped"}, {"same"});
  m.output("same", TensorProto::BOOL, {"?", "?"});
  Result<Graph> g = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(dtype_of(*g, "m"), DType::kFloat32);
  EXPECT_EQ(dtype_of(*g, "qm"), DType::kInt8);
  EXPECT_EQ(dtype_of(*g, "cropped"), DType::kInt8);
  EXPECT_EQ(dtype_of(*g, "same"), DType::kBool);
}

// The If of an expanded function: its outputs take the then-branch's dtypes, which come from nodes
// inside the branch that read the enclosing graph, not the bool condition.
TEST(InferDtypes, IfOutputsFollowTheBranchNotTheCondition) {
  OnnxModel m(20);
  m.input("c", TensorProto::BOOL, {});
  m.input("x", TensorProto::FLOAT16, {"4"});
  m.initializer(testing::raw_tensor<int64_t>("axes", TensorProto::INT64, {1}, {0}));
  m.node("ReduceMax", "outer_max", {"x", "axes"}, {"mx"});
  auto branch = [](const std::string& name, const std::string& op) {
    onnx::GraphProto b;
    b.set_name(name);
    testing::OnnxGraph bg(&b);
    bg.node(op, name + "_n", {"mx"}, {name + "_y"});
    auto* out = b.add_output();
    out->set_name(name + "_y");
    return b;
  };
  auto* n = m.node("If", "if0", {"c"}, {"y"});
  testing::attr_graph(n, "then_branch", branch("then", "Neg"));
  testing::attr_graph(n, "else_branch", branch("else", "Abs"));
  m.node("Shape", "shape", {"y"}, {"s"});
  m.output("s", TensorProto::INT64, {"?"});
  Result<Graph> g = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(dtype_of(*g, "mx"), DType::kFloat16);
  EXPECT_EQ(dtype_of(*g, "y"), DType::kFloat16);
  const Node& if_node = g->node(g->value(g->find_value("y")).producer);
  const Graph& then_g = *if_node.attrs.at("then_branch").g;
  EXPECT_EQ(dtype_of(then_g, "mx"), DType::kFloat16);
  EXPECT_EQ(dtype_of(then_g, "then_y"), DType::kFloat16);
}

// onnxruntime's QOperator graphs: a QLinearConcat's first input is its float output scale, yet it
// writes its output zero point's uint8, and so does the MaxPool behind it (GoogLeNet's
// inception branches). Kernels are picked by these dtypes: a float32 guess picks the float MaxPool.
TEST(InferDtypes, MicrosoftQuantizedOpsWriteTheirZeroPointsType) {
  OnnxModel m(13);
  m.import_opset("com.microsoft", 1);
  m.input("a", TensorProto::UINT8, {"1", "2", "4", "4"});
  m.input("b", TensorProto::UINT8, {"1", "2", "4", "4"});
  m.initializer(testing::float_tensor("s", {}, {0.1f}));
  m.initializer(testing::raw_tensor<uint8_t>("z", TensorProto::UINT8, {}, {128}));
  m.node("QLinearConcat", "cat", {"s", "z", "a", "s", "z", "b", "s", "z"}, {"c"}, "com.microsoft");
  auto* pool = m.node("MaxPool", "pool", {"c"}, {"p"});
  testing::attr_ints(pool, "kernel_shape", {2, 2});
  m.node("QLinearAdd", "add", {"p", "s", "z", "p", "s", "z", "s", "z"}, {"y"}, "com.microsoft");
  m.output("y", TensorProto::UINT8, {"?", "?", "?", "?"});
  Result<Graph> g = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(dtype_of(*g, "c"), DType::kUInt8);
  EXPECT_EQ(dtype_of(*g, "p"), DType::kUInt8);
}

TEST(InferDtypes, RulesPerOperator) {
  Graph g;
  auto node_of = [&](const std::string& op, size_t outputs) {
    std::vector<ValueId> outs;
    for (size_t i = 0; i < outputs; ++i) outs.push_back(g.add_value(op + std::to_string(i)));
    return g.add_node(op, op, {}, outs);
  };
  const std::vector<DType> f32{DType::kFloat32};
  {
    Node& n = g.node(node_of("TopK", 2));
    EXPECT_EQ(fallback_output_dtypes(n, {DType::kFloat32, DType::kInt64}),
              (std::vector<DType>{DType::kFloat32, DType::kInt64}));
  }
  {
    Node& n = g.node(node_of("CastLike", 1));
    EXPECT_EQ(fallback_output_dtypes(n, {DType::kFloat32, DType::kFloat16}), std::vector<DType>{DType::kFloat16});
  }
  {
    Node& n = g.node(node_of("Cast", 1));
    Attribute to;
    to.i = static_cast<int64_t>(DType::kInt8);
    n.attrs["to"] = to;
    EXPECT_EQ(fallback_output_dtypes(n, f32), std::vector<DType>{DType::kInt8});
  }
  {
    Node& n = g.node(node_of("DequantizeLinear", 1));
    EXPECT_EQ(fallback_output_dtypes(n, {DType::kInt8, DType::kFloat16}), std::vector<DType>{DType::kFloat16});
  }
  {
    Node& n = g.node(node_of("QuantizeLinear", 1));
    EXPECT_EQ(fallback_output_dtypes(n, {DType::kFloat32, DType::kFloat32}), std::vector<DType>{DType::kUInt8});
  }
  {
    // QGemm: the y_zero_point's type, uint8 with y_scale alone, float32 without y_scale.
    Node& n = g.node(node_of("QGemm", 1));
    n.domain = "com.microsoft";
    const DType u8 = DType::kUInt8, s8 = DType::kInt8, f = DType::kFloat32, none = DType::kUndefined;
    EXPECT_EQ(fallback_output_dtypes(n, {s8, f, s8, s8, f, s8, DType::kInt32, f, s8}), std::vector<DType>{s8});
    EXPECT_EQ(fallback_output_dtypes(n, {u8, f, u8, s8, f, s8, none, f}), std::vector<DType>{u8});
    EXPECT_EQ(fallback_output_dtypes(n, {u8, f, u8, s8, f, s8}), std::vector<DType>{f});
  }
  {
    Node& n = g.node(node_of("GreaterOrEqual", 1));
    EXPECT_EQ(fallback_output_dtypes(n, {DType::kInt16, DType::kInt16}), std::vector<DType>{DType::kBool});
  }
}

}  // namespace
}  // namespace streamline::graph
