// The transformer fusions (LayerNorm, GELU, attention, GELU into a MatMul) on small ONNX graphs:
// each pattern fuses and keeps the outputs within 1e-5 relative of the unfused graph; near misses
// are left alone.

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
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

using testing::attr_int;
using testing::attr_ints;
using testing::attr_string;
using testing::float_tensor;
using testing::OnnxModel;

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

// Runs every node in topological order with the CPU kernels (a tiny interpreter for tests).
using testing::run_graph;

Graph import(const OnnxModel& m) {
  auto g = import_onnx_bytes(m.bytes(), "");
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? std::move(g).value() : Graph();
}

// Folding and elimination only: the reference the fused graph is compared with.
PassOptions no_fusion() {
  PassOptions po;
  po.fuse_conv = po.fuse_gemm = po.fuse_layer_norm = po.fuse_gelu = po.fuse_attention = false;
  po.fuse_elementwise = false;
  return po;
}

// Erf nodes plus Erf instructions of the elementwise programs (fused groups keep their ops).
int count_erf(const Graph& g) {
  int c = 0;
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(static_cast<NodeId>(i));
    if (n.dead) continue;
    c += n.op_type == "Erf";
    for (int64_t op : n.attr_ints("ew_ops")) c += op == static_cast<int64_t>(EwOp::kErf);
  }
  return c;
}

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

Tensor random_input(const Shape& s, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t = Tensor::empty(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

struct Optimised {
  Graph fused, plain;
  PassReport report;
};

// Imports the model twice, optimises one copy with every pass and the other without fusions,
// runs both on `inputs` and checks their outputs agree within 1e-5 relative.
Optimised optimise_and_compare(const OnnxModel& m, const std::vector<Tensor>& inputs) {
  Optimised o{import(m), import(m), {}};
  ops::KernelEvaluator eval(ops::default_cpu_registry());
  EXPECT_TRUE(run_passes(o.fused, PassOptions{}, &eval, &o.report).ok());
  EXPECT_TRUE(run_passes(o.plain, no_fusion(), &eval, nullptr).ok());
  auto a = run_graph(o.fused, inputs);
  auto b = run_graph(o.plain, inputs);
  EXPECT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  if (!a.ok() || !b.ok()) return o;
  EXPECT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size() && i < b->size(); ++i) {
    const Tensor &x = (*a)[i], &y = (*b)[i];
    EXPECT_EQ(x.shape(), y.shape());
    if (x.shape() != y.shape()) continue;
    double max_ref = 0.0, max_diff = 0.0;
    for (int64_t k = 0; k < y.numel(); ++k) {
      max_ref = std::max(max_ref, std::fabs(double(y.data<float>()[k])));
      max_diff = std::max(max_diff, std::fabs(double(x.data<float>()[k]) - y.data<float>()[k]));
    }
    EXPECT_LE(max_diff, 1e-5 * std::max(max_ref, 1e-6)) << "output " << i << " (max ref " << max_ref << ")";
  }
  return o;
}

// ------------------------------------------------------------------------------------------------
// LayerNorm

struct LnSpec {
  int opset = 14;
  bool affine = true;
  bool square_by_mul = false;  // Mul(d, d) instead of Pow(d, 2)
  std::vector<int64_t> axes = {-1};
  std::vector<int64_t> second_axes = {-1};
  std::vector<int64_t> eps_dims = {};  // scalar
  float exponent = 2.f;
  bool sub_reversed = false;  // Sub(mean, x)
  bool leak_d = false;        // d is also a graph output
};

// x [N, 5, 16] -> decomposed LayerNorm -> y, as torch.onnx exports F.layer_norm below opset 17.
std::unique_ptr<OnnxModel> layer_norm_model(const LnSpec& s) {
  auto mp = std::make_unique<OnnxModel>(s.opset);
  OnnxModel& m = *mp;
  m.input("x", kFloat, {"N", "5", "16"});
  std::vector<float> gamma(16), beta(16);
  for (int i = 0; i < 16; ++i) {
    gamma[static_cast<size_t>(i)] = 0.5f + 0.05f * static_cast<float>(i);
    beta[static_cast<size_t>(i)] = 0.1f * static_cast<float>(i) - 0.7f;
  }
  m.initializer(float_tensor("gamma", {16}, gamma));
  m.initializer(float_tensor("beta", {16}, beta));
  m.initializer(float_tensor("two", {}, {s.exponent}));
  int64_t eps_n = 1;
  for (int64_t d : s.eps_dims) eps_n *= d;
  m.initializer(float_tensor("eps", s.eps_dims, std::vector<float>(static_cast<size_t>(eps_n), 1e-5f)));
  attr_ints(m.node("ReduceMean", "mean", {"x"}, {"mean"}), "axes", s.axes);
  m.node("Sub", "sub", s.sub_reversed ? std::vector<std::string>{"mean", "x"} : std::vector<std::string>{"x", "mean"},
         {"d"});
  if (s.square_by_mul)
    m.node("Mul", "sq", {"d", "d"}, {"d2"});
  else
    m.node("Pow", "sq", {"d", "two"}, {"d2"});
  attr_ints(m.node("ReduceMean", "var", {"d2"}, {"var"}), "axes", s.second_axes);
  m.node("Add", "add_eps", {"var", "eps"}, {"ve"});
  m.node("Sqrt", "sqrt", {"ve"}, {"sd"});
  m.node("Div", "div", {"d", "sd"}, {s.affine ? "n" : "y"});
  if (s.affine) {
    m.node("Mul", "scale", {"n", "gamma"}, {"s"});
    m.node("Add", "shift", {"s", "beta"}, {"y"});
  }
  m.output("y", kFloat, {"N", "5", "16"});
  if (s.leak_d) m.output("d", kFloat, {"N", "5", "16"});
  return mp;
}

TEST(FuseLayerNorm, DecomposedPatternBecomesOneNode) {
  const Tensor x = random_input({2, 5, 16}, 1, -3.f, 4.f);
  Optimised o = optimise_and_compare(*layer_norm_model({}), {x});
  EXPECT_EQ(o.report.layer_norm_fused, 1);
  EXPECT_EQ(o.fused.live_node_count(), 1);
  const Node* ln = find_op(o.fused, "LayerNormalization");
  ASSERT_NE(ln, nullptr);
  EXPECT_EQ(ln->domain, kStreamlineDomain);
  EXPECT_EQ(ln->attr_int("axis", 0), -1);
  EXPECT_FLOAT_EQ(ln->attr_float("epsilon", 0.f), 1e-5f);
  EXPECT_EQ(ln->inputs.size(), 3u);
  EXPECT_EQ(o.fused.value(o.fused.outputs()[0]).name, "y");
  EXPECT_EQ(o.fused.opsets.at(kStreamlineDomain), 1);
}

TEST(FuseLayerNorm, VariantsFuse) {
  const Tensor x = random_input({2, 5, 16}, 2, -3.f, 4.f);
  LnSpec no_affine;
  no_affine.affine = false;
  LnSpec by_mul;
  by_mul.square_by_mul = true;
  LnSpec two_axes;  // normalise over the last two dims, written with positive axes of a known rank
  two_axes.axes = two_axes.second_axes = {1, 2};
  for (const LnSpec* s : {&no_affine, &by_mul, &two_axes}) {
    Optimised o = optimise_and_compare(*layer_norm_model(*s), {x});
    EXPECT_EQ(o.report.layer_norm_fused, 1);
    EXPECT_EQ(o.fused.live_node_count(), 1);
    const Node* ln = find_op(o.fused, "LayerNormalization");
    ASSERT_NE(ln, nullptr);
    EXPECT_EQ(ln->attr_int("axis", 0), s->axes.size() == 2 ? -2 : -1);
  }
}

TEST(FuseLayerNorm, NearMissesAreLeftAlone) {
  const Tensor x = random_input({2, 5, 16}, 3, -3.f, 4.f);
  LnSpec wrong_axis;  // statistics over axis 1, not the last one
  wrong_axis.axes = wrong_axis.second_axes = {1};
  LnSpec mixed_axes;  // the two means over different axes
  mixed_axes.second_axes = {1};
  LnSpec eps_vector;  // eps not a scalar
  eps_vector.eps_dims = {16};
  LnSpec cube;  // Pow 3
  cube.exponent = 3.f;
  LnSpec reversed;  // mean - x
  reversed.sub_reversed = true;
  LnSpec leaked;  // x - mean read outside the pattern
  leaked.leak_d = true;
  for (const LnSpec* s : {&wrong_axis, &mixed_axes, &eps_vector, &cube, &reversed, &leaked}) {
    Optimised o = optimise_and_compare(*layer_norm_model(*s), {x});
    EXPECT_EQ(o.report.layer_norm_fused, 0);
    EXPECT_EQ(count_op(o.fused, "LayerNormalization"), 0);
    EXPECT_EQ(count_op(o.fused, "ReduceMean"), 2);
  }
}

// ------------------------------------------------------------------------------------------------
// GELU

enum class GeluForm { kTorch, kHalfFirst, kHalfOfSum, kMulInvSqrt2 };

struct GeluSpec {
  GeluForm form = GeluForm::kTorch;
  float divisor = 1.4142135f;
  float one = 1.f;
  bool leak_erf = false;     // erf output also a graph output
  bool with_matmul = false;  // x = MatMul(in, W) + b
};

std::unique_ptr<OnnxModel> gelu_model(const GeluSpec& s) {
  auto mp = std::make_unique<OnnxModel>(13);
  OnnxModel& m = *mp;
  if (s.with_matmul) {
    m.input("in", kFloat, {"N", "4", "8"});
    std::vector<float> w(8 * 6), b(6);
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.05f * static_cast<float>(static_cast<int>(i % 13) - 6);
    for (size_t i = 0; i < b.size(); ++i) b[i] = 0.1f * static_cast<float>(i) - 0.2f;
    m.initializer(float_tensor("W", {8, 6}, w));
    m.initializer(float_tensor("b", {6}, b));
    m.node("MatMul", "mm", {"in", "W"}, {"xm"});
    m.node("Add", "bias", {"b", "xm"}, {"x"});
  } else {
    m.input("x", kFloat, {"N", "6"});
  }
  m.initializer(float_tensor("c", {}, {s.form == GeluForm::kMulInvSqrt2 ? 0.70710678f : s.divisor}));
  m.initializer(float_tensor("one", {}, {s.one}));
  m.initializer(float_tensor("half", {}, {0.5f}));
  m.node(s.form == GeluForm::kMulInvSqrt2 ? "Mul" : "Div", "scale", {"x", "c"}, {"xs"});
  m.node("Erf", "erf", {"xs"}, {"e"});
  m.node("Add", "add1", {"e", "one"}, {"a"});
  switch (s.form) {
    case GeluForm::kTorch:
    case GeluForm::kMulInvSqrt2:
      m.node("Mul", "mx", {"x", "a"}, {"xa"});
      m.node("Mul", "mh", {"xa", "half"}, {"y"});
      break;
    case GeluForm::kHalfFirst:
      m.node("Mul", "hx", {"half", "x"}, {"hx"});
      m.node("Mul", "mx", {"a", "hx"}, {"y"});
      break;
    case GeluForm::kHalfOfSum:
      m.node("Mul", "ha", {"a", "half"}, {"ha"});
      m.node("Mul", "mx", {"x", "ha"}, {"y"});
      break;
  }
  m.output("y", kFloat, s.with_matmul ? std::vector<std::string>{"N", "4", "6"} : std::vector<std::string>{"N", "6"});
  if (s.leak_erf) m.output("e", kFloat, {"N", "6"});
  return mp;
}

TEST(FuseGelu, EveryExporterFormBecomesGelu) {
  const Tensor x = random_input({3, 6}, 4, -4.f, 4.f);
  for (GeluForm f : {GeluForm::kTorch, GeluForm::kHalfFirst, GeluForm::kHalfOfSum, GeluForm::kMulInvSqrt2}) {
    GeluSpec s;
    s.form = f;
    Optimised o = optimise_and_compare(*gelu_model(s), {x});
    EXPECT_EQ(o.report.gelu_fused, 1) << static_cast<int>(f);
    EXPECT_EQ(o.fused.live_node_count(), 1);
    const Node* g = find_op(o.fused, "Gelu");
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->domain, kStreamlineDomain);
    EXPECT_EQ(o.fused.value(o.fused.outputs()[0]).name, "y");
  }
}

TEST(FuseGelu, NearMissesAreLeftAlone) {
  const Tensor x = random_input({3, 6}, 5, -4.f, 4.f);
  GeluSpec wrong_divisor;
  wrong_divisor.divisor = 2.f;
  GeluSpec wrong_one;
  wrong_one.one = 2.f;
  GeluSpec leaked;
  leaked.leak_erf = true;
  for (const GeluSpec* s : {&wrong_divisor, &wrong_one, &leaked}) {
    Optimised o = optimise_and_compare(*gelu_model(*s), {x});
    EXPECT_EQ(o.report.gelu_fused, 0);
    EXPECT_EQ(count_op(o.fused, "Gelu"), 0);
    EXPECT_EQ(count_erf(o.fused), 1);
  }
}

TEST(FuseGelu, MovesIntoTheMatMulBeforeIt) {
  GeluSpec s;
  s.with_matmul = true;
  const Tensor x = random_input({2, 4, 8}, 6, -3.f, 3.f);
  Optimised o = optimise_and_compare(*gelu_model(s), {x});
  EXPECT_EQ(o.fused.live_node_count(), 1);
  const Node* mm = find_op(o.fused, "FusedMatMul");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->attr_string("activation", ""), "Gelu");
  EXPECT_EQ(mm->inputs.size(), 3u);
  EXPECT_NE(mm->inputs[2], kNoValue);  // the bias Add went into it too
}

// ONNX's Gelu (opset 20) after a MatMul becomes the product's activation too; the tanh form stays.
TEST(FuseGelu, OnnxGeluMovesIntoTheMatMul) {
  for (const char* approx : {"none", "tanh"}) {
    OnnxModel m(20);
    m.input("x", kFloat, {"2", "8"});
    m.initializer(float_tensor("w", {8, 4}, std::vector<float>(32, 0.25f)));
    m.node("MatMul", "mm", {"x", "w"}, {"h"});
    attr_string(m.node("Gelu", "gelu", {"h"}, {"y"}), "approximate", approx);
    m.output("y", kFloat, {"2", "4"});
    Optimised o = optimise_and_compare(m, {random_input({2, 8}, 13, -3.f, 3.f)});
    const bool fused = std::string(approx) == "none";
    EXPECT_EQ(o.fused.live_node_count(), fused ? 1 : 2) << approx;
    const Node* mm = find_op(o.fused, "FusedMatMul");
    if (fused) {
      ASSERT_NE(mm, nullptr);
      EXPECT_EQ(mm->attr_string("activation", ""), "Gelu");
    } else {
      EXPECT_EQ(count_op(o.fused, "Gelu"), 1);
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Attention

struct AttnSpec {
  bool bert = false;  // [B, S, H, D] operands with a padding mask; else nn.MultiheadAttention's [S, N, D]
  int64_t softmax_axis = -1;
  bool leak_scores = false;   // the score MatMul's output also a graph output
  bool vector_scale = false;  // the scale is a [S] tensor, not a scalar
  int opset = 13;
};

std::unique_ptr<OnnxModel> attention_model(const AttnSpec& s) {
  auto mp = std::make_unique<OnnxModel>(s.opset);
  OnnxModel& m = *mp;
  if (s.bert) {
    // q, k, v [B=2, S=5, H=3, D=4]; mask [B, 1, 1, S]; scale after the product, then the mask.
    for (const char* n : {"q", "k", "v"}) m.input(n, kFloat, {"B", "5", "3", "4"});
    m.input("mask", kFloat, {"B", "1", "1", "5"});
    attr_ints(m.node("Transpose", "tq", {"q"}, {"qt"}), "perm", {0, 2, 1, 3});
    attr_ints(m.node("Transpose", "tk", {"k"}, {"kt"}), "perm", {0, 2, 3, 1});
    attr_ints(m.node("Transpose", "tv", {"v"}, {"vt"}), "perm", {0, 2, 1, 3});
    m.node("MatMul", "qk", {"qt", "kt"}, {"scores"});
    m.initializer(float_tensor("sqrt_d", s.vector_scale ? std::vector<int64_t>{5} : std::vector<int64_t>{},
                               std::vector<float>(s.vector_scale ? 5 : 1, 2.f)));
    m.node("Div", "scale", {"scores", "sqrt_d"}, {"scaled"});
    m.node("Add", "add_mask", {"scaled", "mask"}, {"masked"});
    attr_int(m.node("Softmax", "sm", {"masked"}, {"p"}), "axis", s.softmax_axis);
    m.node("MatMul", "pv", {"p", "vt"}, {"o"});
    attr_ints(m.node("Transpose", "to", {"o"}, {"y"}), "perm", {0, 2, 1, 3});
    m.output("y", kFloat, {"B", "5", "3", "4"});
  } else {
    // q, k, v [S=5, N=6, D=8]; the scale on q before the product, as torch 1.13 writes it.
    for (const char* n : {"q", "k", "v"}) m.input(n, kFloat, {"5", "N", "8"});
    attr_ints(m.node("Transpose", "tq", {"q"}, {"qt"}), "perm", {1, 0, 2});
    m.initializer(float_tensor("sqrt_d", s.vector_scale ? std::vector<int64_t>{8} : std::vector<int64_t>{},
                               std::vector<float>(s.vector_scale ? 8 : 1, 2.828427f)));
    m.node("Div", "scale", {"qt", "sqrt_d"}, {"qs"});
    attr_ints(m.node("Transpose", "tk", {"k"}, {"kt"}), "perm", {1, 2, 0});
    m.node("MatMul", "qk", {"qs", "kt"}, {"scores"});
    auto* sm = m.node("Softmax", "sm", {"scores"}, {"p"});
    if (s.softmax_axis != -100) attr_int(sm, "axis", s.softmax_axis);
    attr_ints(m.node("Transpose", "tv", {"v"}, {"vt"}), "perm", {1, 0, 2});
    m.node("MatMul", "pv", {"p", "vt"}, {"o"});
    attr_ints(m.node("Transpose", "to", {"o"}, {"y"}), "perm", {1, 0, 2});
    m.output("y", kFloat, {"5", "N", "8"});
  }
  if (s.leak_scores) m.output("scores", kFloat, {"?", "?", "?"});
  return mp;
}

std::vector<Tensor> attention_inputs(const AttnSpec& s) {
  if (!s.bert) return {random_input({5, 6, 8}, 7), random_input({5, 6, 8}, 8), random_input({5, 6, 8}, 9)};
  Tensor mask = Tensor::empty(DType::kFloat32, Shape{2, 1, 1, 5});
  for (int64_t i = 0; i < mask.numel(); ++i) mask.data<float>()[i] = (i % 5 >= 3 && i >= 5) ? -10000.f : 0.f;
  return {random_input({2, 5, 3, 4}, 10), random_input({2, 5, 3, 4}, 11), random_input({2, 5, 3, 4}, 12), mask};
}

TEST(FuseAttention, TorchMultiheadAttentionPattern) {
  AttnSpec s;
  Optimised o = optimise_and_compare(*attention_model(s), attention_inputs(s));
  EXPECT_EQ(o.report.attention_fused, 1);
  EXPECT_EQ(o.fused.live_node_count(), 1);  // the four transposes went into the node as perms
  const Node* a = find_op(o.fused, "Attention");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->domain, kStreamlineDomain);
  EXPECT_NEAR(a->attr_float("scale", 0.f), 1.f / 2.828427f, 1e-7);
  EXPECT_EQ(a->attr_ints("q_perm"), (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(a->attr_ints("k_perm"), (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(a->attr_ints("v_perm"), (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(a->attr_ints("out_perm"), (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(a->inputs.size(), 3u);
  EXPECT_EQ(o.fused.value(o.fused.outputs()[0]).name, "y");
}

TEST(FuseAttention, BertPatternWithMask) {
  AttnSpec s;
  s.bert = true;
  Optimised o = optimise_and_compare(*attention_model(s), attention_inputs(s));
  EXPECT_EQ(o.report.attention_fused, 1);
  EXPECT_EQ(o.fused.live_node_count(), 1);
  const Node* a = find_op(o.fused, "Attention");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->inputs.size(), 4u);
  EXPECT_EQ(o.fused.value(a->inputs[3]).name, "mask");
  EXPECT_NEAR(a->attr_float("scale", 0.f), 0.5f, 1e-7);
  // Explicit last axis (3 of rank 4) counts as the last axis.
  s.softmax_axis = 3;
  Optimised o2 = optimise_and_compare(*attention_model(s), attention_inputs(s));
  EXPECT_EQ(o2.report.attention_fused, 1);
}

// GPT-2's export: scores = Where(causal keep mask, q @ k / sqrt(d), fill) before the Softmax, the
// fill -1e4 or float32's lowest. q, k, v [B=2, H=2, S=5, D=4]; keep [1, 1, 5, 5] bool, a graph input.
std::unique_ptr<OnnxModel> where_mask_model(float fill) {
  auto mp = std::make_unique<OnnxModel>(13);
  OnnxModel& m = *mp;
  for (const char* n : {"q", "k", "v"}) m.input(n, kFloat, {"2", "2", "5", "4"});
  m.input("keep", onnx::TensorProto::BOOL, {"1", "1", "5", "5"});
  attr_ints(m.node("Transpose", "tk", {"k"}, {"kt"}), "perm", {0, 1, 3, 2});
  m.node("MatMul", "qk", {"q", "kt"}, {"scores"});
  m.initializer(float_tensor("sqrt_d", {}, {2.f}));
  m.node("Div", "scale", {"scores", "sqrt_d"}, {"scaled"});
  m.initializer(float_tensor("fill", {}, {fill}));
  m.node("Where", "causal", {"keep", "scaled", "fill"}, {"masked"});
  attr_int(m.node("Softmax", "sm", {"masked"}, {"p"}), "axis", -1);
  m.node("MatMul", "pv", {"p", "v"}, {"y"});
  m.output("y", kFloat, {"2", "2", "5", "4"});
  return mp;
}

std::vector<Tensor> where_mask_inputs() {
  Tensor keep = Tensor::empty(DType::kBool, Shape{1, 1, 5, 5});
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 5; ++j) keep.data<uint8_t>()[i * 5 + j] = j <= i;
  return {random_input({2, 2, 5, 4}, 20), random_input({2, 2, 5, 4}, 21), random_input({2, 2, 5, 4}, 22), keep};
}

TEST(FuseAttention, GptWhereMaskBecomesAnAdditiveMask) {
  for (float fill : {-1e4f, -3.4028235e38f}) {
    SCOPED_TRACE("fill " + std::to_string(fill));
    Optimised o = optimise_and_compare(*where_mask_model(fill), where_mask_inputs());
    EXPECT_EQ(o.report.attention_fused, 1);
    const Node* a = find_op(o.fused, "Attention");
    ASSERT_NE(a, nullptr);
    ASSERT_EQ(a->inputs.size(), 4u);
    EXPECT_EQ(o.fused.value(a->inputs[3]).dtype, DType::kFloat32);  // the additive form of the mask
    EXPECT_NEAR(a->attr_float("scale", 0.f), 0.5f, 1e-7);
  }
  // A fill a score could reach (-100) is no mask to fuse: the pattern stays as it is.
  Optimised o = optimise_and_compare(*where_mask_model(-100.f), where_mask_inputs());
  EXPECT_EQ(o.report.attention_fused, 0);
}

// A LLaMA-style causal mask: an additive [1, 1, 8, 8] buffer cut to the run's sequence length by
// two Slices whose ends come from Shape(q) at run time, so the mask's dims are never inferred.
TEST(FuseAttention, AMaskCutFromABufferAtRunTimeStillFuses) {
  OnnxModel m(13);
  for (const char* n : {"q", "k", "v"}) m.input(n, kFloat, {"1", "2", "S", "4"});
  std::vector<float> buf(64);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) buf[static_cast<size_t>(i * 8 + j)] = j <= i ? 0.f : -1e9f;
  m.initializer(float_tensor("buf", {1, 1, 8, 8}, buf));
  m.initializer(testing::raw_tensor<int64_t>("two", onnx::TensorProto::INT64, {}, {2}));
  m.initializer(testing::raw_tensor<int64_t>("zero1", onnx::TensorProto::INT64, {1}, {0}));
  m.initializer(testing::raw_tensor<int64_t>("ax2", onnx::TensorProto::INT64, {1}, {2}));
  m.initializer(testing::raw_tensor<int64_t>("ax3", onnx::TensorProto::INT64, {1}, {3}));
  m.node("Shape", "shape", {"q"}, {"qs"});
  m.node("Gather", "len", {"qs", "two"}, {"len"});
  m.node("Unsqueeze", "ends", {"len", "zero1"}, {"ends"});
  m.node("Slice", "rows", {"buf", "zero1", "ends", "ax2"}, {"rows"});
  m.node("Slice", "cols", {"rows", "zero1", "ends", "ax3"}, {"mask"});
  attr_ints(m.node("Transpose", "tk", {"k"}, {"kt"}), "perm", {0, 1, 3, 2});
  m.node("MatMul", "qk", {"q", "kt"}, {"scores"});
  m.initializer(float_tensor("sqrt_d", {}, {2.f}));
  m.node("Div", "scale", {"scores", "sqrt_d"}, {"scaled"});
  m.node("Add", "add_mask", {"scaled", "mask"}, {"masked"});
  attr_int(m.node("Softmax", "sm", {"masked"}, {"p"}), "axis", -1);
  m.node("MatMul", "pv", {"p", "v"}, {"y"});
  m.output("y", kFloat, {"1", "2", "S", "4"});
  // The interpreter of these tests needs constant Slice ends (a plan folds them once the shapes
  // are known), so this checks the rewrite; the LLaMA-style model test checks the numbers.
  Graph g = import(m);
  ops::KernelEvaluator eval(ops::default_cpu_registry());
  PassReport report;
  ASSERT_TRUE(run_passes(g, PassOptions{}, &eval, &report).ok());
  EXPECT_EQ(report.attention_fused, 1);
  const Node* a = find_op(g, "Attention");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->inputs.size(), 4u);
  EXPECT_EQ(g.value(a->inputs[3]).name, "mask");
}

TEST(FuseAttention, NearMissesAreLeftAlone) {
  AttnSpec wrong_axis;
  wrong_axis.softmax_axis = 1;
  AttnSpec leaked;
  leaked.leak_scores = true;
  AttnSpec bert_vector_scale;  // a [S] divisor between the product and the softmax
  bert_vector_scale.bert = true;
  bert_vector_scale.vector_scale = true;
  AttnSpec old_default_axis;  // opset 12 Softmax without axis: axis 1 of a rank-3 input
  old_default_axis.opset = 12;
  old_default_axis.softmax_axis = -100;
  for (const AttnSpec* s : {&wrong_axis, &leaked, &bert_vector_scale, &old_default_axis}) {
    SCOPED_TRACE(s == &wrong_axis          ? "wrong axis"
                 : s == &leaked            ? "leaked scores"
                 : s == &bert_vector_scale ? "vector scale"
                                           : "opset 12 default axis");
    Optimised o = optimise_and_compare(*attention_model(*s), attention_inputs(*s));
    EXPECT_EQ(o.report.attention_fused, 0);
    EXPECT_EQ(count_op(o.fused, "Attention"), 0);
    EXPECT_EQ(count_op(o.fused, "Softmax"), 1);
  }
}

TEST(FuseAttention, NonScalarScaleOnQStaysOutside) {
  // q / [D] vector is not a scale of the scores: the Div (and the transpose before it) stay, the
  // attention core still fuses with scale 1.
  AttnSpec s;
  s.vector_scale = true;
  Optimised o = optimise_and_compare(*attention_model(s), attention_inputs(s));
  EXPECT_EQ(o.report.attention_fused, 1);
  const Node* a = find_op(o.fused, "Attention");
  ASSERT_NE(a, nullptr);
  EXPECT_FLOAT_EQ(a->attr_float("scale", 0.f), 1.f);
  EXPECT_FALSE(a->has_attr("q_perm"));
  EXPECT_EQ(count_op(o.fused, "Div"), 1);
  EXPECT_EQ(count_op(o.fused, "Transpose"), 1);
}

TEST(TransformerPasses, CanBeSwitchedOff) {
  ops::KernelEvaluator eval(ops::default_cpu_registry());
  PassOptions po;
  po.fuse_layer_norm = po.fuse_gelu = po.fuse_attention = false;
  Graph ln = import(*layer_norm_model({}));
  PassReport r;
  ASSERT_TRUE(run_passes(ln, po, &eval, &r).ok());
  EXPECT_EQ(r.layer_norm_fused, 0);
  EXPECT_EQ(count_op(ln, "ReduceMean"), 2);
  EXPECT_EQ(r.to_string().find("layer_norm"), std::string::npos);
  Graph ln2 = import(*layer_norm_model({}));
  ASSERT_TRUE(run_passes(ln2, PassOptions{}, &eval, &r).ok());
  EXPECT_NE(r.to_string().find("layer_norm_fused=1"), std::string::npos) << r.to_string();
}

}  // namespace
}  // namespace streamline::graph
