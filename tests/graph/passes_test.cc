// Tests of the graph rewrite passes on small hand-built graphs.

#include "graph/passes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ops/evaluator.h"
#include "ops/registry.h"

namespace streamline::graph {
namespace {

Tensor floats(const Shape& s, const std::vector<float>& v) {
  return Tensor::from_vector<float>(s, v);
}

std::vector<float> values_of(const Tensor& t) {
  std::vector<float> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(static_cast<float>(element_as_double(t, i)));
  return out;
}

// Fluent helper for building test graphs.
struct Builder {
  Graph g;
  explicit Builder(int opset = 13) { g.opsets[""] = opset; }
  ValueId input(const std::string& name, DimList dims) {
    const ValueId v = g.add_value(name, DType::kFloat32, std::move(dims));
    g.add_input(v);
    return v;
  }
  ValueId value(const std::string& name, std::optional<DimList> dims = std::nullopt) {
    return g.add_value(name, DType::kFloat32, std::move(dims));
  }
  ValueId constant(const std::string& name, Tensor t) { return g.add_constant(name, std::move(t)); }
  NodeId node(const std::string& op, const std::string& name, std::vector<ValueId> in, std::vector<ValueId> out) {
    return g.add_node(op, name, std::move(in), std::move(out));
  }
  void output(ValueId v) { g.add_output(v); }
};

void set_float(Node& n, const std::string& key, float f) {
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.f = f;
  n.attrs[key] = a;
}
void set_int(Node& n, const std::string& key, int64_t i) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = i;
  n.attrs[key] = a;
}

std::vector<const Node*> live_nodes(const Graph& g) {
  std::vector<const Node*> out;
  for (size_t i = 0; i < g.num_nodes(); ++i)
    if (!g.node(static_cast<NodeId>(i)).dead) out.push_back(&g.node(static_cast<NodeId>(i)));
  return out;
}
const Node* find_op(const Graph& g, const std::string& op) {
  for (const Node* n : live_nodes(g))
    if (n->op_type == op) return n;
  return nullptr;
}
std::string output_name(const Graph& g, size_t i) {
  return g.value(g.outputs()[i]).name;
}

// A ConstantEvaluator for tests: Add/Mul of same-shaped float tensors or a scalar, Clip with
// optional bounds, and "Echo" that returns its first input. Everything else is Unsupported.
class FakeEvaluator final : public ConstantEvaluator {
 public:
  int calls = 0;
  Result<std::vector<Tensor>> evaluate(const Graph&, const Node& node, std::span<const Tensor> in) override {
    ++calls;
    if (node.op_type == "Echo") return std::vector<Tensor>{in[0]};
    if (node.op_type == "Add" || node.op_type == "Mul") {
      const Tensor& a = in[0];
      const Tensor& b = in[1];
      const Tensor& big = a.numel() >= b.numel() ? a : b;
      Tensor out = Tensor::empty(DType::kFloat32, big.shape());
      for (int64_t i = 0; i < big.numel(); ++i) {
        const double x = element_as_double(a, a.numel() == 1 ? 0 : i);
        const double y = element_as_double(b, b.numel() == 1 ? 0 : i);
        out.data<float>()[i] = static_cast<float>(node.op_type == "Add" ? x + y : x * y);
      }
      return std::vector<Tensor>{out};
    }
    if (node.op_type == "Clip") {
      const double lo = in.size() > 1 && in[1].defined() ? element_as_double(in[1], 0) : -1e30;
      const double hi = in.size() > 2 && in[2].defined() ? element_as_double(in[2], 0) : 1e30;
      Tensor out = Tensor::empty(DType::kFloat32, in[0].shape());
      for (int64_t i = 0; i < out.numel(); ++i)
        out.data<float>()[i] = static_cast<float>(std::min(hi, std::max(lo, element_as_double(in[0], i))));
      return std::vector<Tensor>{out};
    }
    return unsupported("fake evaluator: " + node.op_type);
  }
};

// ---------------------------------------------------------------------------------------------
// BatchNormalization folding

struct ConvBnGraph {
  Builder b;
  ValueId x = kNoValue, w = kNoValue, bias = kNoValue, c = kNoValue, y = kNoValue;
  NodeId conv = kNoNode, bn = kNoNode;
};

// X[1,2,1,1] -> Conv(W[2,2,1,1], B[2]) -> c -> BatchNormalization -> y (graph output).
ConvBnGraph make_conv_bn(int opset, bool with_eps) {
  ConvBnGraph t{Builder(opset)};
  Builder& b = t.b;
  t.x = b.input("x", {1, 2, 1, 1});
  t.w = b.constant("w", floats({2, 2, 1, 1}, {1, 2, 3, 4}));
  t.bias = b.constant("b", floats({2}, {0.5f, -1.f}));
  t.c = b.value("c", DimList{1, 2, 1, 1});
  t.y = b.value("y", DimList{1, 2, 1, 1});
  t.conv = b.node("Conv", "conv", {t.x, t.w, t.bias}, {t.c});
  const ValueId scale = b.constant("scale", floats({2}, {2.f, 0.5f}));
  const ValueId shift = b.constant("shift", floats({2}, {0.1f, 0.2f}));
  const ValueId mean = b.constant("mean", floats({2}, {1.f, -2.f}));
  const ValueId var = b.constant("var", floats({2}, {3.f, 0.25f}));
  t.bn = b.node("BatchNormalization", "bn", {t.c, scale, shift, mean, var}, {t.y});
  if (with_eps) set_float(b.g.node(t.bn), "epsilon", 1e-3f);
  b.output(t.y);
  return t;
}

TEST(FoldBatchNorm, FoldsIntoConvAndMatchesUnfoldedResult) {
  ConvBnGraph t = make_conv_bn(13, /*with_eps=*/true);
  Graph& g = t.b.g;
  ASSERT_EQ(fold_batchnorm_into_conv(g), 1);
  const Node& conv = g.node(t.conv);
  EXPECT_TRUE(g.node(t.bn).dead);
  EXPECT_EQ(conv.op_type, "Conv");
  ASSERT_EQ(conv.outputs.size(), 1u);
  EXPECT_EQ(conv.outputs[0], t.y);  // BN's output value (and name) kept
  ASSERT_EQ(conv.inputs.size(), 3u);
  ASSERT_NE(conv.inputs[1], t.w);  // new constants, the originals untouched
  ASSERT_NE(conv.inputs[2], t.bias);
  EXPECT_EQ(values_of(*g.value(t.w).constant), (std::vector<float>{1, 2, 3, 4}));

  // Hand-computed: s = scale / sqrt(var + eps).
  const double eps = 1e-3;
  const double s0 = 2.0 / std::sqrt(3.0 + eps);
  const double s1 = 0.5 / std::sqrt(0.25 + eps);
  const std::vector<float> w2 = values_of(*g.value(conv.inputs[1]).constant);
  const std::vector<float> b2 = values_of(*g.value(conv.inputs[2]).constant);
  ASSERT_EQ(w2.size(), 4u);
  EXPECT_NEAR(w2[0], 1 * s0, 1e-5);
  EXPECT_NEAR(w2[1], 2 * s0, 1e-5);
  EXPECT_NEAR(w2[2], 3 * s1, 1e-5);
  EXPECT_NEAR(w2[3], 4 * s1, 1e-5);
  EXPECT_NEAR(b2[0], (0.5 - 1.0) * s0 + 0.1, 1e-5);
  EXPECT_NEAR(b2[1], (-1.0 + 2.0) * s1 + 0.2, 1e-5);

  // A 1x1 conv by hand on one input pixel, before and after the fold.
  const double x[2] = {0.7, -1.3};
  const double w[4] = {1, 2, 3, 4}, bb[2] = {0.5, -1}, sc[2] = {2, 0.5}, sh[2] = {0.1, 0.2};
  const double mu[2] = {1, -2}, va[2] = {3, 0.25};
  for (int c = 0; c < 2; ++c) {
    const double conv_out = w[2 * c] * x[0] + w[2 * c + 1] * x[1] + bb[c];
    const double ref = (conv_out - mu[c]) / std::sqrt(va[c] + eps) * sc[c] + sh[c];
    const double fused = w2[2 * c] * x[0] + w2[2 * c + 1] * x[1] + b2[c];
    EXPECT_NEAR(fused, ref, 1e-4) << "channel " << c;
  }
  EXPECT_EQ(output_name(g, 0), "y");
}

TEST(FoldBatchNorm, DefaultEpsilonAndConvWithoutBias) {
  ConvBnGraph t = make_conv_bn(9, /*with_eps=*/false);
  Graph& g = t.b.g;
  g.node(t.conv).inputs.resize(2);  // Conv without B
  ASSERT_EQ(fold_batchnorm_into_conv(g), 1);
  const Node& conv = g.node(t.conv);
  ASSERT_EQ(conv.inputs.size(), 3u);
  const std::vector<float> b2 = values_of(*g.value(conv.inputs[2]).constant);
  const double s0 = 2.0 / std::sqrt(3.0 + 1e-5);
  const double s1 = 0.5 / std::sqrt(0.25 + 1e-5);
  EXPECT_NEAR(b2[0], -1.0 * s0 + 0.1, 1e-6);
  EXPECT_NEAR(b2[1], 2.0 * s1 + 0.2, 1e-6);
}

TEST(FoldBatchNorm, SkippedForNonSpatialOrTrainingOutputsOrFanOut) {
  {
    ConvBnGraph t = make_conv_bn(7, true);
    set_int(t.b.g.node(t.bn), "spatial", 0);
    EXPECT_EQ(fold_batchnorm_into_conv(t.b.g), 0);
  }
  {
    ConvBnGraph t = make_conv_bn(7, true);
    const ValueId running_mean = t.b.value("running_mean");
    t.b.g.node(t.bn).outputs.push_back(running_mean);
    t.b.output(running_mean);
    EXPECT_EQ(fold_batchnorm_into_conv(t.b.g), 0);
  }
  {
    ConvBnGraph t = make_conv_bn(13, true);
    const ValueId r = t.b.value("r");
    t.b.node("Relu", "other_reader", {t.c}, {r});
    t.b.output(r);
    EXPECT_EQ(fold_batchnorm_into_conv(t.b.g), 0);
    EXPECT_FALSE(t.b.g.node(t.bn).dead);
  }
  {
    ConvBnGraph t = make_conv_bn(13, true);
    t.b.g.value(t.w).constant.reset();  // weights computed at run time
    EXPECT_EQ(fold_batchnorm_into_conv(t.b.g), 0);
  }
}

TEST(FoldBatchNorm, SharedWeightsGetSeparateFoldedCopies) {
  ConvBnGraph t = make_conv_bn(13, true);
  Builder& b = t.b;
  const ValueId c2 = b.value("c2"), y2 = b.value("y2");
  const NodeId conv2 = b.node("Conv", "conv2", {t.x, t.w}, {c2});
  const ValueId scale = b.constant("scale2", floats({2}, {1.f, 1.f}));
  const ValueId zero = b.constant("zero2", floats({2}, {0.f, 0.f}));
  const ValueId four = b.constant("four2", floats({2}, {4.f, 4.f}));
  b.node("BatchNormalization", "bn2", {c2, scale, zero, zero, four}, {y2});
  b.output(y2);
  ASSERT_EQ(fold_batchnorm_into_conv(b.g), 2);
  const ValueId w1 = b.g.node(t.conv).inputs[1];
  const ValueId w2 = b.g.node(conv2).inputs[1];
  EXPECT_NE(w1, w2);
  EXPECT_NE(b.g.value(w1).name, b.g.value(w2).name);
  EXPECT_EQ(values_of(*b.g.value(t.w).constant), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_NEAR(values_of(*b.g.value(w2).constant)[3], 4.0 / std::sqrt(4.0 + 1e-5), 1e-6);
}

// ---------------------------------------------------------------------------------------------
// Conv fusion

struct ConvGraph {
  Builder b;
  ValueId x = kNoValue, w = kNoValue, c = kNoValue;
  NodeId conv = kNoNode;
};

// X[N,4,8,8] -> Conv(W, no bias) -> c[N,4,8,8].
ConvGraph make_conv(int opset = 13) {
  ConvGraph t{Builder(opset)};
  t.x = t.b.input("x", {Dim::sym("N"), 4, 8, 8});
  t.w = t.b.constant("w", floats({4, 4, 3, 3}, std::vector<float>(144, 0.1f)));
  t.c = t.b.value("c", DimList{Dim::sym("N"), 4, 8, 8});
  t.conv = t.b.node("Conv", "conv", {t.x, t.w}, {t.c});
  Attribute pads;
  pads.kind = Attribute::Kind::kInts;
  pads.ints = {1, 1, 1, 1};
  t.b.g.node(t.conv).attrs["pads"] = pads;
  return t;
}

TEST(FuseConv, ConvAddReluBecomesOneFusedConvWithResidual) {
  ConvGraph t = make_conv();
  Builder& b = t.b;
  const ValueId skip = b.input("skip", {Dim::sym("N"), 4, 8, 8});
  const ValueId a = b.value("a", DimList{Dim::sym("N"), 4, 8, 8});
  const ValueId y = b.value("y");
  b.node("Add", "add", {skip, t.c}, {a});
  b.node("Relu", "relu", {a}, {y});
  b.output(y);

  PassReport report;
  ASSERT_TRUE(run_passes(b.g, PassOptions{}, nullptr, &report).ok());
  EXPECT_EQ(report.conv_fused, 1);
  ASSERT_EQ(b.g.live_node_count(), 1);
  const Node& n = b.g.node(0);
  EXPECT_EQ(n.op_type, "FusedConv");
  EXPECT_EQ(n.domain, kStreamlineDomain);
  ASSERT_EQ(n.inputs.size(), 4u);
  EXPECT_EQ(b.g.value(n.inputs[0]).name, "x");
  EXPECT_EQ(b.g.value(n.inputs[1]).name, "w");
  EXPECT_EQ(n.inputs[2], kNoValue);
  EXPECT_EQ(b.g.value(n.inputs[3]).name, "skip");
  EXPECT_EQ(n.attr_string("activation", ""), "Relu");
  EXPECT_TRUE(n.attr_floats("activation_params", {-1.f}).empty());
  EXPECT_EQ(n.attr_ints("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
  ASSERT_EQ(n.outputs.size(), 1u);
  EXPECT_EQ(n.outputs[0], b.g.outputs()[0]);
  EXPECT_EQ(output_name(b.g, 0), "y");
  EXPECT_EQ(b.g.opsets.at(kStreamlineDomain), 1);
}

TEST(FuseConv, ClipBoundsFromInputsOrAttributes) {
  {
    ConvGraph t = make_conv(13);
    const ValueId lo = t.b.constant("lo", Tensor::scalar<float>(0.f));
    const ValueId hi = t.b.constant("hi", Tensor::scalar<float>(6.f));
    const ValueId y = t.b.value("y");
    t.b.node("Clip", "clip", {t.c, lo, hi}, {y});
    t.b.output(y);
    ASSERT_EQ(fuse_conv_activation(t.b.g), 1);
    const Node& n = t.b.g.node(t.conv);
    EXPECT_EQ(n.op_type, "FusedConv");
    EXPECT_EQ(n.inputs.size(), 3u);  // X, W, B=kNoValue; no residual
    EXPECT_EQ(n.attr_string("activation", ""), "Clip");
    EXPECT_EQ(n.attr_floats("activation_params"), (std::vector<float>{0.f, 6.f}));
  }
  {
    ConvGraph t = make_conv(13);  // only max given: min is -inf
    const ValueId hi = t.b.constant("hi", Tensor::scalar<float>(6.f));
    const ValueId y = t.b.value("y");
    t.b.node("Clip", "clip", {t.c, kNoValue, hi}, {y});
    t.b.output(y);
    ASSERT_EQ(fuse_conv_activation(t.b.g), 1);
    const std::vector<float> p = t.b.g.node(t.conv).attr_floats("activation_params");
    ASSERT_EQ(p.size(), 2u);
    EXPECT_EQ(p[0], -std::numeric_limits<float>::infinity());
    EXPECT_EQ(p[1], 6.f);
  }
  {
    ConvGraph t = make_conv(6);  // attribute form, max missing
    const ValueId y = t.b.value("y");
    const NodeId clip = t.b.node("Clip", "clip", {t.c}, {y});
    set_float(t.b.g.node(clip), "min", 0.f);
    t.b.output(y);
    ASSERT_EQ(fuse_conv_activation(t.b.g), 1);
    const std::vector<float> p = t.b.g.node(t.conv).attr_floats("activation_params");
    ASSERT_EQ(p.size(), 2u);
    EXPECT_EQ(p[0], 0.f);
    EXPECT_EQ(p[1], std::numeric_limits<float>::infinity());
  }
  {
    ConvGraph t = make_conv(13);  // a bound computed at run time blocks the fusion
    const ValueId hi = t.b.input("hi", {});
    const ValueId y = t.b.value("y");
    t.b.node("Clip", "clip", {t.c, kNoValue, hi}, {y});
    t.b.output(y);
    EXPECT_EQ(fuse_conv_activation(t.b.g), 0);
    EXPECT_EQ(t.b.g.node(t.conv).op_type, "Conv");
  }
}

TEST(FuseConv, FanOutPreventsFusion) {
  ConvGraph t = make_conv();
  const ValueId y1 = t.b.value("y1"), y2 = t.b.value("y2");
  t.b.node("Relu", "relu", {t.c}, {y1});
  t.b.node("Sigmoid", "sig", {t.c}, {y2});
  t.b.output(y1);
  t.b.output(y2);
  EXPECT_EQ(fuse_conv_activation(t.b.g), 0);
  EXPECT_EQ(t.b.g.node(t.conv).op_type, "Conv");
  EXPECT_EQ(t.b.g.live_node_count(), 3);
}

TEST(FuseConv, ConvOutputThatIsAGraphOutputIsNotFused) {
  ConvGraph t = make_conv();
  const ValueId y = t.b.value("y");
  t.b.node("Relu", "relu", {t.c}, {y});
  t.b.output(t.c);
  t.b.output(y);
  EXPECT_EQ(fuse_conv_activation(t.b.g), 0);
}

TEST(FuseConv, ResidualWhoseSumFansOutKeepsNoActivation) {
  ConvGraph t = make_conv();
  const ValueId skip = t.b.input("skip", {Dim::sym("N"), 4, 8, 8});
  const ValueId a = t.b.value("a"), y1 = t.b.value("y1"), y2 = t.b.value("y2");
  t.b.node("Add", "add", {t.c, skip}, {a});
  t.b.node("Relu", "relu", {a}, {y1});
  t.b.node("Tanh", "tanh", {a}, {y2});
  t.b.output(y1);
  t.b.output(y2);
  ASSERT_EQ(fuse_conv_activation(t.b.g), 1);
  const Node& n = t.b.g.node(t.conv);
  EXPECT_EQ(n.op_type, "FusedConv");
  EXPECT_EQ(n.inputs.size(), 4u);
  EXPECT_FALSE(n.has_attr("activation"));
  EXPECT_EQ(n.outputs[0], a);
  EXPECT_EQ(t.b.g.live_node_count(), 3);
}

TEST(FuseConv, BroadcastOrUnknownResidualShapesAreNotFused) {
  const std::vector<DimList> others = {
      {Dim::sym("N"), 4, 1, 1},  // broadcast
      {Dim::sym("M"), 4, 8, 8},  // another symbol
      {Dim(), 4, 8, 8},          // unknown dim
  };
  for (const DimList& dims : others) {
    ConvGraph t = make_conv();
    const ValueId other = t.b.input("other", dims);
    const ValueId a = t.b.value("a"), y = t.b.value("y");
    t.b.node("Add", "add", {t.c, other}, {a});
    t.b.node("Relu", "relu", {a}, {y});
    t.b.output(y);
    EXPECT_EQ(fuse_conv_activation(t.b.g), 0) << dims_to_string(dims);
    EXPECT_EQ(t.b.g.node(t.conv).op_type, "Conv");
    EXPECT_EQ(t.b.g.live_node_count(), 3);
  }
  {
    ConvGraph t = make_conv();  // a constant operand is a bias, not a residual
    const ValueId other = t.b.constant("k", floats({1, 4, 8, 8}, std::vector<float>(256, 1.f)));
    t.b.g.value(t.c).dims = DimList{1, 4, 8, 8};
    const ValueId a = t.b.value("a");
    t.b.node("Add", "add", {t.c, other}, {a});
    t.b.output(a);
    EXPECT_EQ(fuse_conv_activation(t.b.g), 0);
  }
}

TEST(FuseConv, LeakyReluAndHardSigmoidParams) {
  ConvGraph t = make_conv();
  const ValueId y = t.b.value("y");
  const NodeId act = t.b.node("HardSigmoid", "hs", {t.c}, {y});
  set_float(t.b.g.node(act), "alpha", 0.25f);
  t.b.output(y);
  ASSERT_EQ(fuse_conv_activation(t.b.g), 1);
  EXPECT_EQ(t.b.g.node(t.conv).attr_floats("activation_params"), (std::vector<float>{0.25f, 0.5f}));

  ConvGraph u = make_conv();
  const ValueId z = u.b.value("z");
  u.b.node("LeakyRelu", "lr", {u.c}, {z});
  u.b.output(z);
  ASSERT_EQ(fuse_conv_activation(u.b.g), 1);
  EXPECT_EQ(u.b.g.node(u.conv).attr_floats("activation_params"), (std::vector<float>{0.01f}));
}

TEST(FuseConv, PlainConvStaysConv) {
  ConvGraph t = make_conv();
  t.b.output(t.c);
  PassReport r;
  ASSERT_TRUE(run_passes(t.b.g, PassOptions{}, nullptr, &r).ok());
  EXPECT_EQ(r.conv_fused, 0);
  EXPECT_EQ(t.b.g.node(0).op_type, "Conv");
  EXPECT_EQ(t.b.g.opsets.count(kStreamlineDomain), 0u);
}

TEST(FuseConv, ConvBatchNormReluEndToEnd) {
  ConvBnGraph t = make_conv_bn(13, true);
  Builder& b = t.b;
  b.g.mutable_outputs().clear();
  const ValueId out = b.value("out");
  b.node("Relu", "relu", {t.y}, {out});
  b.output(out);
  PassReport r;
  ASSERT_TRUE(run_passes(b.g, PassOptions{}, nullptr, &r).ok());
  EXPECT_EQ(r.batchnorm_folded, 1);
  EXPECT_EQ(r.conv_fused, 1);
  ASSERT_EQ(b.g.live_node_count(), 1);
  EXPECT_EQ(b.g.node(0).op_type, "FusedConv");
  EXPECT_EQ(b.g.node(0).attr_string("activation", ""), "Relu");
  EXPECT_EQ(output_name(b.g, 0), "out");
  // Old weights and BN statistics no longer referenced are gone after compact.
  EXPECT_EQ(b.g.find_value("mean"), kNoValue);
  EXPECT_EQ(b.g.find_value("w"), kNoValue);
  EXPECT_EQ(r.to_string(), "folded=0 eliminated=0 batchnorm_folded=1 conv_fused=1 gemm_fused=0 dead_removed=0");
}

// ---------------------------------------------------------------------------------------------
// Gemm / MatMul fusion

TEST(FuseGemm, GemmReluBecomesFusedGemm) {
  Builder b;
  const ValueId a = b.input("a", {2, 3});
  const ValueId w = b.constant("w", floats({4, 3}, std::vector<float>(12, 1.f)));
  const ValueId c = b.constant("c", floats({4}, {1, 2, 3, 4}));
  const ValueId g_out = b.value("g"), y = b.value("y");
  const NodeId gemm = b.node("Gemm", "gemm", {a, w, c}, {g_out});
  set_int(b.g.node(gemm), "transB", 1);
  b.node("Relu", "relu", {g_out}, {y});
  b.output(y);
  ASSERT_EQ(fuse_gemm_activation(b.g), 1);
  const Node& n = b.g.node(gemm);
  EXPECT_EQ(n.op_type, "FusedGemm");
  EXPECT_EQ(n.domain, kStreamlineDomain);
  EXPECT_EQ(n.inputs, (std::vector<ValueId>{a, w, c}));
  EXPECT_EQ(n.outputs, (std::vector<ValueId>{y}));
  EXPECT_EQ(n.attr_int("transB", 0), 1);
  EXPECT_EQ(n.attr_string("activation", ""), "Relu");
}

TEST(FuseGemm, GemmWithoutActivationIsLeft) {
  Builder b;
  const ValueId a = b.input("a", {2, 3});
  const ValueId w = b.input("w", {3, 4});
  const ValueId y = b.value("y");
  b.node("Gemm", "gemm", {a, w}, {y});
  b.output(y);
  EXPECT_EQ(fuse_gemm_activation(b.g), 0);
}

struct MatMulGraph {
  Builder b;
  ValueId a = kNoValue, w = kNoValue, m = kNoValue;
  NodeId mm = kNoNode;
};

// A[N,3] @ W[3,4] (constant) -> m.
MatMulGraph make_matmul() {
  MatMulGraph t;
  t.a = t.b.input("a", {Dim::sym("N"), 3});
  t.w = t.b.constant("w", floats({3, 4}, std::vector<float>(12, 0.5f)));
  t.m = t.b.value("m");
  t.mm = t.b.node("MatMul", "mm", {t.a, t.w}, {t.m});
  return t;
}

TEST(FuseGemm, MatMulBiasReluBecomesFusedMatMul) {
  MatMulGraph t = make_matmul();
  const ValueId bias = t.b.constant("bias", floats({4}, {1, 2, 3, 4}));
  const ValueId s = t.b.value("s"), y = t.b.value("y");
  t.b.node("Add", "add", {bias, t.m}, {s});  // bias on the left
  t.b.node("Relu", "relu", {s}, {y});
  t.b.output(y);
  PassReport r;
  ASSERT_TRUE(run_passes(t.b.g, PassOptions{}, nullptr, &r).ok());
  EXPECT_EQ(r.gemm_fused, 1);
  ASSERT_EQ(t.b.g.live_node_count(), 1);
  const Node& n = t.b.g.node(0);
  EXPECT_EQ(n.op_type, "FusedMatMul");
  ASSERT_EQ(n.inputs.size(), 3u);
  EXPECT_EQ(t.b.g.value(n.inputs[0]).name, "a");
  EXPECT_EQ(t.b.g.value(n.inputs[1]).name, "w");
  EXPECT_EQ(t.b.g.value(n.inputs[2]).name, "bias");
  EXPECT_EQ(n.attr_string("activation", ""), "Relu");
  EXPECT_EQ(output_name(t.b.g, 0), "y");
  EXPECT_EQ(t.b.g.opsets.at(kStreamlineDomain), 1);
}

TEST(FuseGemm, MatMulRowBiasWithoutActivation) {
  MatMulGraph t = make_matmul();
  const ValueId bias = t.b.constant("bias", floats({1, 4}, {1, 2, 3, 4}));
  const ValueId s = t.b.value("s");
  t.b.node("Add", "add", {t.m, bias}, {s});
  t.b.output(s);
  ASSERT_EQ(fuse_gemm_activation(t.b.g), 1);
  const Node& n = t.b.g.node(t.mm);
  EXPECT_EQ(n.op_type, "FusedMatMul");
  ASSERT_EQ(n.inputs.size(), 3u);
  EXPECT_EQ(n.inputs[0], t.a);
  EXPECT_EQ(n.inputs[1], t.w);
  ASSERT_NE(n.inputs[2], bias);  // a 1-D copy; the [1,4] original is left as it was
  const Tensor& flat = *t.b.g.value(n.inputs[2]).constant;
  EXPECT_EQ(flat.shape(), Shape{4});
  EXPECT_EQ(values_of(flat), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(t.b.g.value(bias).constant->shape(), (Shape{1, 4}));
  EXPECT_FALSE(n.has_attr("activation"));
  EXPECT_EQ(n.outputs, (std::vector<ValueId>{s}));
}

TEST(FuseGemm, MatMulBiasOfWrongShapeOrRuntimeWeightsNotFused) {
  {
    MatMulGraph t = make_matmul();
    const ValueId bias = t.b.constant("bias", floats({3}, {1, 2, 3}));
    const ValueId s = t.b.value("s");
    t.b.node("Add", "add", {t.m, bias}, {s});
    t.b.output(s);
    EXPECT_EQ(fuse_gemm_activation(t.b.g), 0);
  }
  {
    MatMulGraph t = make_matmul();
    const ValueId bias = t.b.constant("bias", floats({2, 4}, std::vector<float>(8, 1.f)));
    const ValueId s = t.b.value("s");
    t.b.node("Add", "add", {t.m, bias}, {s});
    t.b.output(s);
    EXPECT_EQ(fuse_gemm_activation(t.b.g), 0);
  }
  {
    MatMulGraph t = make_matmul();
    t.b.g.value(t.w).constant.reset();
    const ValueId bias = t.b.constant("bias", floats({4}, {1, 2, 3, 4}));
    const ValueId s = t.b.value("s");
    t.b.node("Add", "add", {t.m, bias}, {s});
    t.b.output(s);
    EXPECT_EQ(fuse_gemm_activation(t.b.g), 0);
  }
}

TEST(FuseGemm, MatMulActivationAloneAndFanOut) {
  {
    MatMulGraph t = make_matmul();
    const ValueId y = t.b.value("y");
    t.b.node("Sigmoid", "sig", {t.m}, {y});
    t.b.output(y);
    ASSERT_EQ(fuse_gemm_activation(t.b.g), 1);
    const Node& n = t.b.g.node(t.mm);
    EXPECT_EQ(n.op_type, "FusedMatMul");
    EXPECT_EQ(n.inputs, (std::vector<ValueId>{t.a, t.w, kNoValue}));
    EXPECT_EQ(n.attr_string("activation", ""), "Sigmoid");
  }
  {
    MatMulGraph t = make_matmul();
    const ValueId bias = t.b.constant("bias", floats({4}, {1, 2, 3, 4}));
    const ValueId s = t.b.value("s"), y = t.b.value("y"), z = t.b.value("z");
    t.b.node("Add", "add", {t.m, bias}, {s});
    t.b.node("Relu", "relu", {t.m}, {y});  // m read twice
    t.b.node("Tanh", "tanh", {s}, {z});
    t.b.output(y);
    t.b.output(z);
    EXPECT_EQ(fuse_gemm_activation(t.b.g), 0);
    EXPECT_EQ(t.b.g.node(t.mm).op_type, "MatMul");
  }
}

// ---------------------------------------------------------------------------------------------
// Identity / Dropout elimination

TEST(EliminateIdentity, MiddleIdentityIsBypassed) {
  Builder b;
  const ValueId x = b.input("x", {2});
  const ValueId r = b.value("r"), i = b.value("i"), y = b.value("y");
  b.node("Relu", "relu", {x}, {r});
  const NodeId id = b.node("Identity", "id", {r}, {i});
  const NodeId sig = b.node("Sigmoid", "sig", {i}, {y});
  b.output(y);
  ASSERT_EQ(eliminate_identity(b.g), 1);
  EXPECT_TRUE(b.g.node(id).dead);
  EXPECT_EQ(b.g.node(sig).inputs[0], r);
  EXPECT_EQ(b.g.value(r).consumers, (std::vector<NodeId>{sig}));
}

TEST(EliminateIdentity, GraphOutputNameIsPreserved) {
  Builder b;
  const ValueId x = b.input("x", {2});
  const ValueId r = b.value("r"), y = b.value("y"), z = b.value("z");
  const NodeId relu = b.node("Relu", "relu", {x}, {r});
  b.node("Identity", "id1", {r}, {y});
  b.node("Identity", "id2", {y}, {z});  // Identity between two graph outputs: kept
  b.output(y);
  b.output(z);
  PassReport rep;
  ASSERT_TRUE(run_passes(b.g, PassOptions{}, nullptr, &rep).ok());
  EXPECT_EQ(rep.eliminated, 1);
  ASSERT_EQ(b.g.outputs().size(), 2u);
  EXPECT_EQ(output_name(b.g, 0), "y");
  EXPECT_EQ(output_name(b.g, 1), "z");
  EXPECT_EQ(b.g.live_node_count(), 2);
  const Node* r_node = find_op(b.g, "Relu");
  ASSERT_NE(r_node, nullptr);
  EXPECT_EQ(r_node->outputs[0], b.g.outputs()[0]);  // Relu now writes "y"
  EXPECT_NE(find_op(b.g, "Identity"), nullptr);
  (void)relu;
}

TEST(EliminateIdentity, KeptWhenOutputNameCannotBeKept) {
  {
    Builder b;  // graph input straight to graph output
    const ValueId x = b.input("x", {2});
    const ValueId y = b.value("y");
    b.node("Identity", "id", {x}, {y});
    b.output(y);
    EXPECT_EQ(eliminate_identity(b.g), 0);
  }
  {
    Builder b;  // input read by another node too
    const ValueId x = b.input("x", {2});
    const ValueId r = b.value("r"), y = b.value("y"), z = b.value("z");
    b.node("Relu", "relu", {x}, {r});
    b.node("Identity", "id", {r}, {y});
    b.node("Neg", "neg", {r}, {z});
    b.output(y);
    b.output(z);
    EXPECT_EQ(eliminate_identity(b.g), 0);
  }
  {
    Builder b;  // constant input
    const ValueId k = b.constant("k", floats({2}, {1, 2}));
    const ValueId y = b.value("y");
    b.node("Identity", "id", {k}, {y});
    b.output(y);
    EXPECT_EQ(eliminate_identity(b.g), 0);
  }
}

TEST(EliminateIdentity, DropoutOnlyWithoutUsedMaskOrTraining) {
  {
    Builder b(13);
    const ValueId x = b.input("x", {2});
    const ValueId d = b.value("d"), mask = b.value("mask"), y = b.value("y");
    b.node("Dropout", "drop", {x}, {d, mask});
    const NodeId relu = b.node("Relu", "relu", {d}, {y});
    b.output(y);
    ASSERT_EQ(eliminate_identity(b.g), 1);
    EXPECT_EQ(b.g.node(relu).inputs[0], x);
  }
  {
    Builder b(13);
    const ValueId x = b.input("x", {2});
    const ValueId d = b.value("d"), mask = b.value("mask"), y = b.value("y"), m2 = b.value("m2");
    b.node("Dropout", "drop", {x}, {d, mask});
    b.node("Relu", "relu", {d}, {y});
    b.node("Not", "not", {mask}, {m2});
    b.output(y);
    b.output(m2);
    EXPECT_EQ(eliminate_identity(b.g), 0);
  }
  {
    Builder b(13);
    const ValueId x = b.input("x", {2});
    const ValueId ratio = b.constant("ratio", Tensor::scalar<float>(0.5f));
    const ValueId training = b.constant("training", Tensor::scalar<bool>(true));
    const ValueId d = b.value("d"), y = b.value("y");
    b.node("Dropout", "drop", {x, ratio, training}, {d});
    b.node("Relu", "relu", {d}, {y});
    b.output(y);
    EXPECT_EQ(eliminate_identity(b.g), 0);
    b.g.value(training).constant = Tensor::scalar<bool>(false);
    EXPECT_EQ(eliminate_identity(b.g), 1);
  }
}

// ---------------------------------------------------------------------------------------------
// Dead code

TEST(DeadCode, UnreachableBranchAndItsConstantsDropped) {
  Builder b;
  const ValueId x = b.input("x", {2});
  const ValueId k = b.constant("only_for_dead", floats({2}, {1, 2}));
  const ValueId r = b.value("r"), d1 = b.value("d1"), d2 = b.value("d2");
  b.node("Relu", "relu", {x}, {r});
  b.node("Add", "dead_add", {x, k}, {d1});
  b.node("Neg", "dead_neg", {d1}, {d2});
  b.output(r);
  EXPECT_EQ(eliminate_dead_code(b.g), 2);
  EXPECT_EQ(b.g.live_node_count(), 1);
  b.g.compact();
  EXPECT_EQ(b.g.find_value("only_for_dead"), kNoValue);
  EXPECT_EQ(b.g.find_value("d2"), kNoValue);
  EXPECT_NE(b.g.find_value("x"), kNoValue);  // graph inputs stay even when unused
}

// ---------------------------------------------------------------------------------------------
// Constant folding

TEST(FoldConstants, ChainFoldsThroughFakeEvaluator) {
  Builder b;
  const ValueId x = b.input("x", {3});
  const ValueId c1 = b.constant("c1", floats({3}, {1, 2, 3}));
  const ValueId c2 = b.constant("c2", floats({3}, {10, 20, 30}));
  const ValueId c3 = b.constant("c3", Tensor::scalar<float>(2.f));
  const ValueId t = b.value("t"), u = b.value("u"), v = b.value("v"), y = b.value("y");
  const ValueId hi = b.constant("hi", Tensor::scalar<float>(50.f));
  b.node("Add", "add1", {c1, c2}, {t});
  b.node("Mul", "mul", {t, c3}, {u});
  b.node("Clip", "clip", {u, kNoValue, hi}, {v});  // omitted optional input
  const NodeId last = b.node("Add", "add2", {v, x}, {y});
  b.output(y);
  FakeEvaluator ev;
  ASSERT_EQ(fold_constants(b.g, ev, 1 << 20), 3);
  ASSERT_TRUE(b.g.value(v).constant.has_value());
  EXPECT_EQ(values_of(*b.g.value(v).constant), (std::vector<float>{22, 44, 50}));
  EXPECT_EQ(b.g.value(v).producer, kNoNode);
  EXPECT_FALSE(b.g.node(last).dead);
  EXPECT_EQ(b.g.live_node_count(), 1);
}

TEST(FoldConstants, SkipsRandomFailingLargeSubgraphAndOutputProducers) {
  Builder b;
  const ValueId k = b.constant("k", floats({4}, {1, 2, 3, 4}));
  const ValueId r = b.value("r"), f = b.value("f"), big = b.value("big"), out = b.value("out"), s = b.value("s");
  const ValueId sum = b.value("sum");
  b.node("RandomUniformLike", "rnd", {k}, {r});
  b.node("Unknown", "unknown", {k}, {f});
  b.node("Echo", "echo_big", {k}, {big});
  b.node("Echo", "echo_out", {k}, {out});
  const NodeId with_sub = b.node("Echo", "echo_sub", {k}, {s});
  Attribute body;
  body.kind = Attribute::Kind::kGraph;
  body.g = std::make_shared<Graph>();
  b.g.node(with_sub).attrs["body"] = body;
  b.node("Sum", "sum", {r, f, big, s}, {sum});
  b.output(out);
  b.output(sum);
  FakeEvaluator ev;
  EXPECT_EQ(fold_constants(b.g, ev, /*max_bytes=*/8), 0);  // "big" is 16 bytes
  EXPECT_EQ(ev.calls, 2);                                  // "unknown" and "echo_big" only
  EXPECT_EQ(b.g.live_node_count(), 6);
  EXPECT_EQ(fold_constants(b.g, ev, 1 << 20), 1);  // now "echo_big" fits
  EXPECT_TRUE(b.g.value(big).constant.has_value());
  EXPECT_FALSE(b.g.value(out).constant.has_value());
}

// THROUGH THE REAL CPU KERNELS (ops::KernelEvaluator), the only test here that is: MatMul + bias +
// Relu on constants is fused into FusedMatMul, which is then folded by the oneDNN kernel; the result
// must equal relu(A @ W + bias) computed by hand.
TEST(FoldConstants, FusedMatMulThroughKernelEvaluator) {
  const ops::KernelRegistry& reg = ops::default_cpu_registry();
  ASSERT_TRUE(reg.has_op("FusedMatMul", kStreamlineDomain, 1, ops::Device::kCpu)) << "no CPU FusedMatMul kernel";
  Builder b(13);
  const std::vector<float> av = {1, -2, 3, 0.5f, 4, -1};
  const std::vector<float> wv = {1, 0, -1, 2, 0.5f, 1, 1, -1, -2, 3, 0, 1};
  const std::vector<float> bv = {0.5f, -10, 1, 0};
  const ValueId a = b.constant("a", floats({2, 3}, av));
  const ValueId w = b.constant("w", floats({3, 4}, wv));
  const ValueId bias = b.constant("bias", floats({4}, bv));
  const ValueId x = b.input("x", {2, 4});
  const ValueId m = b.value("m"), s = b.value("s"), r = b.value("r"), y = b.value("y");
  b.node("MatMul", "mm", {a, w}, {m});
  b.node("Add", "add", {m, bias}, {s});
  b.node("Relu", "relu", {s}, {r});
  b.node("Add", "keep", {r, x}, {y});
  b.output(y);
  ASSERT_EQ(fuse_gemm_activation(b.g), 1);
  ops::KernelEvaluator ev(reg);
  ASSERT_EQ(fold_constants(b.g, ev, 1 << 20), 1);
  ASSERT_TRUE(b.g.value(r).constant.has_value());
  const Tensor& got = *b.g.value(r).constant;
  ASSERT_EQ(got.shape(), (Shape{2, 4}));
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      double acc = bv[j];
      for (int k = 0; k < 3; ++k) acc += av[i * 3 + k] * wv[k * 4 + j];
      EXPECT_NEAR(element_as_double(got, i * 4 + j), std::max(acc, 0.0), 1e-5) << i << "," << j;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Driver, options, subgraphs

TEST(RunPasses, DisabledLeavesGraphUnchanged) {
  ConvBnGraph t = make_conv_bn(13, true);
  Builder& b = t.b;
  b.g.mutable_outputs().clear();
  const ValueId i = b.value("i"), out = b.value("out"), dead = b.value("dead");
  b.node("Identity", "id", {t.y}, {i});
  b.node("Relu", "relu", {i}, {out});
  b.node("Neg", "unused", {t.x}, {dead});
  b.output(out);
  const size_t nodes = b.g.num_nodes(), values = b.g.num_values();
  PassOptions off;
  off.enabled = false;
  PassReport r;
  r.folded = 7;
  FakeEvaluator ev;
  ASSERT_TRUE(run_passes(b.g, off, &ev, &r).ok());
  EXPECT_EQ(r.to_string(), PassReport{}.to_string());
  EXPECT_EQ(b.g.num_nodes(), nodes);
  EXPECT_EQ(b.g.num_values(), values);
  EXPECT_EQ(b.g.live_node_count(), static_cast<int>(nodes));
  EXPECT_EQ(b.g.node(t.conv).op_type, "Conv");
  EXPECT_EQ(b.g.node(t.conv).inputs[1], t.w);
  EXPECT_EQ(b.g.opsets.count(kStreamlineDomain), 0u);
  EXPECT_EQ(ev.calls, 0);

  // The same graph with everything on, for contrast.
  PassReport on;
  ASSERT_TRUE(run_passes(b.g, PassOptions{}, &ev, &on).ok());
  EXPECT_EQ(on.eliminated, 1);
  EXPECT_EQ(on.batchnorm_folded, 1);
  EXPECT_EQ(on.conv_fused, 1);
  EXPECT_EQ(on.dead_removed, 1);
  EXPECT_EQ(b.g.live_node_count(), 1);
}

TEST(RunPasses, IndividualSwitches) {
  ConvBnGraph t = make_conv_bn(13, true);
  PassOptions po;
  po.fold_batchnorm = false;
  PassReport r;
  ASSERT_TRUE(run_passes(t.b.g, po, nullptr, &r).ok());
  EXPECT_EQ(r.batchnorm_folded, 0);
  EXPECT_EQ(t.b.g.live_node_count(), 2);
}

TEST(RunPasses, CycleIsAnError) {
  Builder b;
  const ValueId a = b.value("a"), c = b.value("c");
  b.node("Relu", "r1", {c}, {a});
  b.node("Relu", "r2", {a}, {c});
  b.output(c);
  const Status s = run_passes(b.g, PassOptions{}, nullptr, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(RunPasses, ValuesReadBySubgraphsAreProtected) {
  ConvGraph t = make_conv();
  Builder& b = t.b;
  const ValueId y = b.value("y"), cond = b.input("cond", {}), out = b.value("out");
  b.node("Relu", "relu", {t.c}, {y});
  b.output(y);
  // An If whose branch reads "c" from the outer scope by name.
  auto branch = std::make_shared<Graph>();
  const ValueId inner_c = branch->add_value("c");
  const ValueId inner_out = branch->add_value("branch_out");
  branch->add_node("Neg", "neg", {inner_c}, {inner_out});
  branch->add_output(inner_out);
  const NodeId if_node = b.node("If", "if", {cond}, {out});
  Attribute then_branch;
  then_branch.kind = Attribute::Kind::kGraph;
  then_branch.g = branch;
  b.g.node(if_node).attrs["then_branch"] = then_branch;
  b.g.node(if_node).attrs["else_branch"] = then_branch;
  b.output(out);
  PassReport r;
  ASSERT_TRUE(run_passes(b.g, PassOptions{}, nullptr, &r).ok());
  EXPECT_EQ(r.conv_fused, 0);
  EXPECT_NE(find_op(b.g, "Conv"), nullptr);
  EXPECT_NE(b.g.find_value("c"), kNoValue);
}

}  // namespace
}  // namespace streamline::graph

namespace streamline::graph {
namespace {

// x -> Mul(x, w) -> Resize(scales) -> y.
TEST(ConvertToHalf, WeightsAndValuesBecomeHalfWithCastsAtTheBoundary) {
  Graph g;
  g.opsets[""] = 13;
  const ValueId x = g.add_value("x", DType::kFloat32, DimList{1, 1, 2, 2});
  g.add_input(x);
  const ValueId w = g.add_constant("w", Tensor::from_vector<float>(Shape{1}, {70000.f}));  // beyond half range
  const ValueId scales = g.add_constant("scales", Tensor::from_vector<float>(Shape{4}, {1, 1, 2, 2}));
  const ValueId m = g.add_value("m", DType::kFloat32);
  const ValueId y = g.add_value("y", DType::kFloat32);
  g.add_node("Mul", "mul", {x, w}, {m});
  g.add_node("Resize", "resize", {m, kNoValue, scales}, {y});
  g.add_output(y);
  HalfReport r;
  ASSERT_TRUE(convert_to_half(g, &r).ok());
  EXPECT_EQ(r.constants, 1);       // w; the scales stay float32 (read on the host)
  EXPECT_EQ(r.casts_inserted, 2);  // after x, before y
  EXPECT_EQ(r.overflowed, 1);
  EXPECT_EQ(g.value(w).constant->dtype(), DType::kFloat16);
  EXPECT_EQ(g.value(scales).constant->dtype(), DType::kFloat32);
  EXPECT_EQ(g.value(m).dtype, DType::kFloat16);
  EXPECT_EQ(g.value(x).dtype, DType::kFloat32);
  EXPECT_EQ(g.value(y).dtype, DType::kFloat32);
  // The graph reads x through a Cast to float16 and writes y through a Cast to float32.
  const Node& mul = g.node(0);
  EXPECT_NE(mul.inputs[0], x);
  const Node& first_cast = g.node(g.value(mul.inputs[0]).producer);
  EXPECT_EQ(first_cast.op_type, "Cast");
  EXPECT_EQ(first_cast.attr_int("to", 0), 10);
  EXPECT_EQ(first_cast.inputs[0], x);
  const Node& last = g.node(g.value(y).producer);
  EXPECT_EQ(last.op_type, "Cast");
  EXPECT_EQ(last.attr_int("to", 0), 1);
  EXPECT_EQ(g.value(last.inputs[0]).dtype, DType::kFloat16);
  EXPECT_EQ(g.outputs(), std::vector<ValueId>{y});
  EXPECT_TRUE(g.topological_order().ok());
}

}  // namespace
}  // namespace streamline::graph
