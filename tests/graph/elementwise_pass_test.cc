// The elementwise fusion pass on small ONNX graphs: groups of elementwise nodes go into the
// epilogue of the Conv/MatMul before them or into one Elementwise node, the outputs stay within
// 1e-5 relative of the unfused graph (every fused graph here is run with the CPU kernels), and
// values that must survive (read elsewhere, graph outputs, broadcast-sized) are left alone.
// Also the rewrites that feed it: standalone BatchNormalization as a scale and shift, and zero
// Pads folded into the Conv or AveragePool after them.

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>

#include "graph/ew_program.h"
#include "graph/graph_run_util.h"
#include "graph/onnx_import.h"
#include "graph/onnx_test_models.h"
#include "graph/passes.h"
#include "ops/evaluator.h"

namespace streamline::graph {
namespace {

using testing::attr_float;
using testing::attr_ints;
using testing::float_tensor;
constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
using testing::OnnxModel;

using testing::run_graph;

int count_op(const Graph& g, const std::string& op) {
  int c = 0;
  for (size_t i = 0; i < g.num_nodes(); ++i)
    c += !g.node(static_cast<NodeId>(i)).dead && g.node(static_cast<NodeId>(i)).op_type == op;
  return c;
}

const Node* find_op(const Graph& g, const std::string& op) {
  for (size_t i = 0; i < g.num_nodes(); ++i)
    if (!g.node(static_cast<NodeId>(i)).dead && g.node(static_cast<NodeId>(i)).op_type == op)
      return &g.node(static_cast<NodeId>(i));
  return nullptr;
}

Tensor random_input(const Shape& s, uint32_t seed, float lo = -3.f, float hi = 3.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  Tensor t = Tensor::empty(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-0.5f, 0.5f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

struct Optimised {
  Graph fused;
  PassReport report;
};

// Optimises one import with every pass and another with every fusion off, runs both on `inputs`
// and checks their outputs agree within 1e-5 relative.
Optimised optimise_and_compare(const OnnxModel& m, const std::vector<Tensor>& inputs) {
  auto a = import_onnx_bytes(m.bytes(), "");
  auto b = import_onnx_bytes(m.bytes(), "");
  EXPECT_TRUE(a.ok() && b.ok());
  Optimised o{std::move(a).value(), {}};
  Graph plain = std::move(b).value();
  ops::KernelEvaluator eval(ops::default_cpu_registry());
  EXPECT_TRUE(run_passes(o.fused, PassOptions{}, &eval, &o.report).ok());
  PassOptions off;
  off.fuse_conv = off.fuse_gemm = off.fuse_layer_norm = off.fuse_gelu = off.fuse_attention = false;
  off.fuse_elementwise = false;
  EXPECT_TRUE(run_passes(plain, off, &eval, nullptr).ok());
  auto ra = run_graph(o.fused, inputs);
  auto rb = run_graph(plain, inputs);
  EXPECT_TRUE(ra.ok()) << ra.status().to_string();
  EXPECT_TRUE(rb.ok()) << rb.status().to_string();
  if (!ra.ok() || !rb.ok()) return o;
  for (size_t i = 0; i < ra->size(); ++i) {
    const Tensor &x = (*ra)[i], &y = (*rb)[i];
    EXPECT_EQ(x.shape(), y.shape());
    double max_ref = 0, max_diff = 0;
    for (int64_t k = 0; k < y.numel() && x.shape() == y.shape(); ++k) {
      max_ref = std::max(max_ref, std::fabs(double(y.data<float>()[k])));
      max_diff = std::max(max_diff, std::fabs(double(x.data<float>()[k]) - y.data<float>()[k]));
    }
    EXPECT_LE(max_diff, 1e-5 * std::max(max_ref, 1e-6)) << "output " << i << " (max ref " << max_ref << ")";
  }
  return o;
}

// x [1,8,6,6] -> Conv 3x3 (16 filters, bias) -> "c".
void conv_stem(OnnxModel& m) {
  m.input("x", kFloat, {"1", "8", "6", "6"});
  m.initializer(float_tensor("w", {16, 8, 3, 3}, random_values(16 * 8 * 9, 1)));
  m.initializer(float_tensor("b", {16}, random_values(16, 2)));
  auto* c = m.node("Conv", "conv", {"x", "w", "b"}, {"c"});
  attr_ints(c, "pads", {1, 1, 1, 1});
}

void scalar(OnnxModel& m, const std::string& name, float v) {
  m.initializer(float_tensor(name, {}, {v}));
}

TEST(FuseElementwise, SiluAfterAConvBecomesItsEpilogue) {
  for (bool sigmoid_first : {false, true}) {
    OnnxModel m(13);
    conv_stem(m);
    m.node("Sigmoid", "sig", {"c"}, {"s"});
    m.node("Mul", "silu", sigmoid_first ? std::vector<std::string>{"s", "c"} : std::vector<std::string>{"c", "s"},
           {"y"});
    m.output("y", kFloat, {"1", "16", "6", "6"});
    Optimised o = optimise_and_compare(m, {random_input({1, 8, 6, 6}, 3)});
    EXPECT_EQ(o.report.elementwise_fused, 1);
    EXPECT_EQ(count_op(o.fused, "Sigmoid"), 0);
    EXPECT_EQ(count_op(o.fused, "Mul"), 0);
    const Node* conv = find_op(o.fused, "FusedConv");
    ASSERT_NE(conv, nullptr);
    auto p = read_program_attrs(*conv);
    ASSERT_TRUE(p.ok() && p->has_value());
    EXPECT_EQ((*p)->num_inputs, 1);
    EXPECT_EQ((*p)->to_string(), sigmoid_first ? "r1=Sigmoid(r0) r2=Mul(r1,r0)" : "r1=Sigmoid(r0) r2=Mul(r0,r1)");
  }
}

// x * relu6(x + 3) / 6, as older exporters write HardSwish.
TEST(FuseElementwise, HardSwishWrittenOutAfterAConv) {
  OnnxModel m(13);
  conv_stem(m);
  scalar(m, "three", 3.f);
  scalar(m, "zero", 0.f);
  scalar(m, "six", 6.f);
  m.node("Add", "add3", {"c", "three"}, {"a"});
  m.node("Clip", "relu6", {"a", "zero", "six"}, {"r"});
  m.node("Mul", "mul", {"c", "r"}, {"p"});
  m.node("Div", "div6", {"p", "six"}, {"y"});
  m.output("y", kFloat, {"1", "16", "6", "6"});
  Optimised o = optimise_and_compare(m, {random_input({1, 8, 6, 6}, 4, -8.f, 8.f)});
  EXPECT_EQ(o.report.elementwise_fused, 1);
  for (const char* op : {"Add", "Clip", "Mul", "Div"}) EXPECT_EQ(count_op(o.fused, op), 0) << op;
  EXPECT_EQ(count_op(o.fused, "FusedConv"), 1);
}

enum class Gelu { kTanh, kSigmoid, kErfReassociated };

// in [2,4,8] -> MatMul W [8,6] -> Add b -> GELU spelled one of three ways.
void gelu_after_matmul(OnnxModel& m, Gelu form) {
  m.input("in", kFloat, {"2", "4", "8"});
  m.initializer(float_tensor("w", {8, 6}, random_values(48, 5)));
  m.initializer(float_tensor("bias", {6}, random_values(6, 6)));
  m.node("MatMul", "mm", {"in", "w"}, {"h"});
  m.node("Add", "addb", {"h", "bias"}, {"x"});
  scalar(m, "half", 0.5f);
  scalar(m, "one", 1.f);
  if (form == Gelu::kTanh) {
    // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
    scalar(m, "three", 3.f);
    scalar(m, "c1", 0.044715f);
    scalar(m, "c2", 0.7978845608f);
    m.node("Pow", "cube", {"x", "three"}, {"x3"});
    m.node("Mul", "m1", {"c1", "x3"}, {"t1"});
    m.node("Add", "a1", {"x", "t1"}, {"t2"});
    m.node("Mul", "m2", {"t2", "c2"}, {"t3"});
    m.node("Tanh", "th", {"t3"}, {"t4"});
    m.node("Add", "a2", {"t4", "one"}, {"t5"});
    m.node("Mul", "m3", {"x", "half"}, {"t6"});
    m.node("Mul", "m4", {"t6", "t5"}, {"y"});
  } else if (form == Gelu::kSigmoid) {
    scalar(m, "k", 1.702f);
    m.node("Mul", "m1", {"x", "k"}, {"t1"});
    m.node("Sigmoid", "sg", {"t1"}, {"t2"});
    m.node("Mul", "m2", {"x", "t2"}, {"y"});
  } else {
    // x * (erf(x * (1/sqrt 2)) * 0.5 + 0.5): not the association the GELU matcher knows.
    scalar(m, "isq", 0.70710678f);
    m.node("Mul", "m1", {"x", "isq"}, {"t1"});
    m.node("Erf", "erf", {"t1"}, {"t2"});
    m.node("Mul", "m2", {"t2", "half"}, {"t3"});
    m.node("Add", "a1", {"t3", "half"}, {"t4"});
    m.node("Mul", "m3", {"x", "t4"}, {"y"});
  }
  m.output("y", kFloat, {"2", "4", "6"});
}

TEST(FuseElementwise, GeluSpellingsGoIntoTheMatMul) {
  for (Gelu form : {Gelu::kTanh, Gelu::kSigmoid, Gelu::kErfReassociated}) {
    OnnxModel m(13);
    gelu_after_matmul(m, form);
    Optimised o = optimise_and_compare(m, {random_input({2, 4, 8}, 7)});
    SCOPED_TRACE(static_cast<int>(form));
    EXPECT_EQ(o.fused.live_node_count(), 1);
    const Node* mm = find_op(o.fused, "FusedMatMul");
    ASSERT_NE(mm, nullptr);
    EXPECT_TRUE(mm->has_attr("ew_ops"));
    EXPECT_EQ(mm->inputs.size(), 3u);  // A, B, bias: the program reads nothing else
  }
}

// Add of two tensors, then a chain with immediates and a Where on a mask: one Elementwise node.
TEST(FuseElementwise, ChainsWithoutAProducerBecomeOneNode) {
  OnnxModel m(13);
  m.input("a", kFloat, {"2", "3", "4", "5"});
  m.input("b", kFloat, {"1", "3", "1", "5"});
  m.input("mask", onnx::TensorProto::BOOL, {"2", "1", "4", "5"});
  scalar(m, "half", 0.5f);
  scalar(m, "zero", 0.f);
  m.node("Add", "add", {"a", "b"}, {"s"});
  m.node("Relu", "relu", {"s"}, {"r"});
  m.node("Mul", "scale", {"r", "half"}, {"h"});
  m.node("Where", "where", {"mask", "h", "zero"}, {"y"});
  m.output("y", kFloat, {"2", "3", "4", "5"});
  Tensor mask = Tensor::empty(DType::kBool, Shape{2, 1, 4, 5});
  for (int64_t i = 0; i < mask.numel(); ++i) mask.data<uint8_t>()[i] = (i * 7) % 3 == 0;
  Optimised o = optimise_and_compare(m, {random_input({2, 3, 4, 5}, 8), random_input({1, 3, 1, 5}, 9), mask});
  EXPECT_EQ(o.report.elementwise_fused, 1);
  EXPECT_EQ(o.fused.live_node_count(), 1);
  const Node* n = find_op(o.fused, "Elementwise");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->domain, kStreamlineDomain);
  EXPECT_EQ(n->inputs.size(), 4u);  // a, b, the mask and the zero tensor (a scalar, but Where's value)
}

// Squeeze-excitation: the scale is a [1,C,1,1] tensor and x is read by the pooling too, so the Mul
// cannot join the convolution before it; the sigmoid goes into the second 1x1 convolution.
TEST(FuseElementwise, SqueezeExcitationKeepsItsScaleSmall) {
  OnnxModel m(13);
  conv_stem(m);
  m.initializer(float_tensor("w1", {4, 16, 1, 1}, random_values(64, 10)));
  m.initializer(float_tensor("w2", {16, 4, 1, 1}, random_values(64, 11)));
  m.node("GlobalAveragePool", "gap", {"c"}, {"g"});
  m.node("Conv", "fc1", {"g", "w1"}, {"f1"});
  m.node("Relu", "r", {"f1"}, {"f1r"});
  m.node("Conv", "fc2", {"f1r", "w2"}, {"f2"});
  m.node("Sigmoid", "sig", {"f2"}, {"s"});
  m.node("Mul", "scale", {"c", "s"}, {"y"});
  m.output("y", kFloat, {"1", "16", "6", "6"});
  Optimised o = optimise_and_compare(m, {random_input({1, 8, 6, 6}, 12)});
  EXPECT_EQ(count_op(o.fused, "Sigmoid"), 0);
  EXPECT_EQ(count_op(o.fused, "Relu"), 0);
  EXPECT_EQ(count_op(o.fused, "Mul"), 1);
}

TEST(FuseElementwise, ValuesThatMustSurviveStayOutside) {
  // (1) The sigmoid is also a graph output: it stays, the Mul still joins the conv.
  {
    OnnxModel m(13);
    conv_stem(m);
    m.node("Sigmoid", "sig", {"c"}, {"s"});
    m.node("Mul", "silu", {"c", "s"}, {"y"});
    m.output("y", kFloat, {"1", "16", "6", "6"});
    m.output("s", kFloat, {"1", "16", "6", "6"});
    Optimised o = optimise_and_compare(m, {random_input({1, 8, 6, 6}, 13)});
    EXPECT_EQ(count_op(o.fused, "Sigmoid"), 1);
  }
  // (2) The conv output is read by another node: the group cannot be its epilogue, and a group of
  //     one node stays as it is.
  {
    OnnxModel m(13);
    conv_stem(m);
    m.node("Relu", "relu", {"c"}, {"r"});
    m.node("Neg", "neg", {"r"}, {"y"});
    m.node("GlobalAveragePool", "gap", {"c"}, {"g"});
    m.output("y", kFloat, {"1", "16", "6", "6"});
    m.output("g", kFloat, {"1", "16", "1", "1"});
    Optimised o = optimise_and_compare(m, {random_input({1, 8, 6, 6}, 14)});
    EXPECT_EQ(count_op(o.fused, "Conv"), 1);
    EXPECT_EQ(count_op(o.fused, "Elementwise"), 1);  // relu and neg on the conv's output
  }
  // (3) A node at a broadcast size is not computed at the output's size.
  {
    OnnxModel m(13);
    m.input("x", kFloat, {"2", "6", "5", "5"});
    m.input("t", kFloat, {"2", "6", "1", "1"});
    m.node("Sigmoid", "sig", {"t"}, {"s"});
    m.node("Mul", "mul", {"x", "s"}, {"y"});
    m.output("y", kFloat, {"2", "6", "5", "5"});
    Optimised o = optimise_and_compare(m, {random_input({2, 6, 5, 5}, 15), random_input({2, 6, 1, 1}, 16)});
    EXPECT_EQ(o.report.elementwise_fused, 0);
    EXPECT_EQ(count_op(o.fused, "Sigmoid"), 1);
    EXPECT_EQ(count_op(o.fused, "Mul"), 1);
  }
}

// DenseNet's pre-activation: BatchNormalization -> Relu -> Conv. The BN cannot fold into a conv
// before it, so it becomes a per-channel scale and shift inside one Elementwise node with the Relu.
TEST(FuseElementwise, StandaloneBatchNormJoinsTheGroup) {
  OnnxModel m(13);
  m.input("x", kFloat, {"1", "8", "6", "6"});
  m.initializer(float_tensor("scale", {8}, random_values(8, 20)));
  m.initializer(float_tensor("shift", {8}, random_values(8, 21)));
  m.initializer(float_tensor("mean", {8}, random_values(8, 22)));
  std::vector<float> var = random_values(8, 23);
  for (float& v : var) v = 0.6f + v;
  m.initializer(float_tensor("var", {8}, var));
  m.initializer(float_tensor("w", {4, 8, 1, 1}, random_values(32, 24)));
  m.node("BatchNormalization", "bn", {"x", "scale", "shift", "mean", "var"}, {"b"});
  m.node("Relu", "relu", {"b"}, {"r"});
  m.node("Conv", "conv", {"r", "w"}, {"y"});
  m.output("y", kFloat, {"1", "4", "6", "6"});
  Optimised o = optimise_and_compare(m, {random_input({1, 8, 6, 6}, 25)});
  EXPECT_EQ(count_op(o.fused, "BatchNormalization"), 0);
  EXPECT_EQ(count_op(o.fused, "Relu"), 0);
  EXPECT_EQ(count_op(o.fused, "Elementwise"), 1);
  EXPECT_EQ(count_op(o.fused, "Conv"), 1);
}

// Zero padding before an AveragePool becomes the pool's own padding, counted as the Pad's zeros
// were; before a Conv it adds to the Conv's pads. A Pad of another value, mode or of the channels
// stays.
TEST(FusePad, ZeroPadsBecomeTheConsumersPadding) {
  for (int kind = 0; kind < 5; ++kind) {
    OnnxModel m(13);
    m.input("x", kFloat, {"1", "4", "7", "7"});
    const std::vector<int64_t> pads =
        kind == 4 ? std::vector<int64_t>{0, 1, 0, 0, 0, 1, 0, 0} : std::vector<int64_t>{0, 0, 1, 2, 0, 0, 2, 1};
    m.initializer(testing::raw_tensor<int64_t>("pads", onnx::TensorProto::INT64, {8}, pads));
    m.initializer(float_tensor("fill", {}, {kind == 3 ? 1.f : 0.f}));
    auto* p = m.node("Pad", "pad", {"x", "pads", "fill"}, {"p"});
    testing::attr_string(p, "mode", kind == 2 ? "reflect" : "constant");
    const int64_t c = kind == 4 ? 6 : 4, h = kind == 4 ? 7 : 10;
    if (kind == 1) {
      m.initializer(float_tensor("w", {3, 4, 3, 3}, random_values(108, 30)));
      auto* conv = m.node("Conv", "conv", {"p", "w"}, {"y"});
      attr_ints(conv, "pads", {1, 0, 0, 1});
      m.output("y", kFloat, {"1", "3", "9", "9"});
    } else {
      auto* pool = m.node("AveragePool", "pool", {"p"}, {"y"});
      attr_ints(pool, "kernel_shape", {3, 3});
      m.output("y", kFloat, {"1", std::to_string(c), std::to_string(h - 2), std::to_string(h - 2)});
    }
    Optimised o = optimise_and_compare(m, {random_input({1, 4, 7, 7}, 31)});
    SCOPED_TRACE(kind);
    EXPECT_EQ(count_op(o.fused, "Pad"), kind >= 2 ? 1 : 0);
    EXPECT_EQ(o.report.pads_fused, kind >= 2 ? 0 : 1);
  }
}

// Shapes inference cannot know (as after a Reshape to a computed shape) are still compared: two
// products of one input with [K, N] weights have the same shape, so a SwiGLU gate joins the first
// product as its epilogue, reading the second.
TEST(FuseElementwise, UnknownShapesFollowTheirProducers) {
  OnnxModel m(13);
  m.input("in", kFloat, {"?", "?", "?"});  // no dims known anywhere
  m.node("Identity", "id", {"in"}, {"h"});
  m.initializer(float_tensor("w1", {8, 6}, random_values(48, 40)));
  m.initializer(float_tensor("w3", {8, 6}, random_values(48, 41)));
  m.node("MatMul", "mm1", {"h", "w1"}, {"a"});
  m.node("MatMul", "mm3", {"h", "w3"}, {"b"});
  m.node("Sigmoid", "sig", {"a"}, {"sa"});
  m.node("Mul", "silu", {"a", "sa"}, {"g"});
  m.node("Mul", "gate", {"g", "b"}, {"y"});
  m.output("y", kFloat, {"2", "4", "6"});  // declared, but unknown inside the graph
  Optimised o = optimise_and_compare(m, {random_input({2, 4, 8}, 42)});
  EXPECT_EQ(count_op(o.fused, "Sigmoid"), 0);
  EXPECT_EQ(count_op(o.fused, "Mul"), 0);
  const Node* host = nullptr;
  for (size_t i = 0; i < o.fused.num_nodes(); ++i) {
    const Node& n = o.fused.node(static_cast<NodeId>(i));
    if (!n.dead && n.op_type == "FusedMatMul" && n.has_attr("ew_ops")) host = &n;
  }
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(host->inputs.size(), 4u);  // A, B, no bias, the other product
}

}  // namespace
}  // namespace streamline::graph
