// The int8 rewrites (graph/pass_quant.cc, pass_quant_unsigned.cc) on small QDQ and dynamically
// quantised graphs: which ops they leave, and that the rewritten graph (run with the CPU kernels)
// computes what the original (run with the reference kernels) does, within one output step.

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "graph/quant_test_util.h"

namespace streamline::graph {
namespace {

using namespace quant_test;  // NOLINT(google-build-using-namespace): this file's helpers

// x -> Q/DQ -> Conv(DQ(w), DQ(b)) -> [Relu] -> Q/DQ -> y, with a residual branch when asked:
// ... -> Q/DQ -> Add(DQ(x2)) -> Q/DQ -> y.
struct ConvGraph {
  Builder b;
  float y_scale = 0.05f;
};
ConvGraph conv_graph(DType act, bool per_channel, bool relu, bool residual, uint32_t seed) {
  ConvGraph t;
  Builder& b = t.b;
  std::mt19937 rng(seed);
  const DimList xd{1, 8, 6, 6};
  const int zx = act == DType::kInt8 ? -3 : 125;
  const ValueId x = b.input("x", xd);
  const ValueId xdq = b.qdq(x, 0.03f, zx, act, xd);
  const ValueId w = b.weight(Shape{8, 8, 3, 3}, rng, per_channel, 0);
  // Bias: int32 with scale x_scale * w_scale (what quantize_static writes) for per-tensor weights,
  // a float constant otherwise.
  ValueId bias;
  if (!per_channel) {
    const float ws = b.g.value(b.g.node(b.g.value(w).producer).inputs[1]).constant->data<float>()[0];
    Tensor bq = Tensor::empty(DType::kInt32, Shape{8});
    for (int i = 0; i < 8; ++i) bq.data<int32_t>()[i] = 40 * i - 150;
    bias = b.value("bias");
    b.node("DequantizeLinear", {b.constant("bq", bq), b.constant("bs", Tensor::scalar<float>(0.03f * ws))}, {bias});
  } else {
    Tensor bf = Tensor::empty(DType::kFloat32, Shape{8});
    for (int i = 0; i < 8; ++i) bf.data<float>()[i] = 0.05f * static_cast<float>(i) - 0.2f;
    bias = b.constant("bias", bf);
  }
  const ValueId c = b.value("c", DType::kFloat32, xd);
  const NodeId conv = b.node("Conv", {xdq, w, bias}, {c});
  set_ints(b.g.node(conv), "pads", {1, 1, 1, 1});
  ValueId cur = c;
  if (relu && !residual) {
    cur = b.value("r", DType::kFloat32, xd);
    b.node("Relu", {c}, {cur});
  }
  const int zy = act == DType::kInt8 ? (relu ? -128 : 2) : (relu ? 0 : 130);
  cur = b.qdq(cur, t.y_scale, zy, act, xd);
  if (residual) {
    const ValueId x2 = b.input("x2", xd);
    const ValueId zdq = b.qdq(x2, 0.04f, act == DType::kInt8 ? 5 : 120, act, xd);
    const ValueId s = b.value("sum", DType::kFloat32, xd);
    b.node("Add", {cur, zdq}, {s});
    ValueId r = s;
    if (relu) {
      r = b.value("sr", DType::kFloat32, xd);
      b.node("Relu", {s}, {r});
    }
    cur = b.qdq(r, t.y_scale, zy, act, xd);
  }
  b.g.add_output(cur);
  return t;
}

TEST(QuantPasses, QdqConvBecomesQConvOnUint8) {
  for (DType act : {DType::kUInt8, DType::kInt8}) {
    for (bool per_channel : {false, true}) {
      ConvGraph t = conv_graph(act, per_channel, /*relu=*/true, /*residual=*/false, 11);
      std::mt19937 rng(3);
      const Graph after = rewrite_and_compare(t.b.g, {random_input(Shape{1, 8, 6, 6}, rng)}, 1.01 * t.y_scale);
      const auto ops = op_counts(after);
      EXPECT_EQ(ops.count("Conv"), 0u);
      ASSERT_EQ(ops.count("QConv"), 1u);
      // Input Q, the QConv, the output DQ: nothing else.
      EXPECT_EQ(after.live_node_count(), 3) << "per_channel " << per_channel;
      const Node* qc = find(after, "QConv");
      EXPECT_EQ(qc->attr_string("activation", ""), "Relu");
      // int8 activations become uint8 with the zero point moved by 128: a Relu'd tensor gets 0.
      EXPECT_EQ(after.value(qc->inputs[0]).dtype, DType::kUInt8);
      EXPECT_EQ(after.value(qc->outputs[0]).dtype, DType::kUInt8);
      EXPECT_EQ(element_as_double(*after.value(qc->inputs[7]).constant, 0), 0.0);
      EXPECT_EQ(after.value(qc->inputs[8]).constant->dtype(), DType::kInt32);
    }
  }
}

TEST(QuantPasses, ResidualAddFoldsIntoTheConv) {
  for (DType act : {DType::kUInt8, DType::kInt8}) {
    ConvGraph t = conv_graph(act, true, /*relu=*/true, /*residual=*/true, 12);
    std::mt19937 rng(4);
    // One rounding instead of two: within one output step plus the dropped intermediate step.
    const Graph after = rewrite_and_compare(
        t.b.g, {random_input(Shape{1, 8, 6, 6}, rng), random_input(Shape{1, 8, 6, 6}, rng)}, 2.01 * t.y_scale);
    const auto ops = op_counts(after);
    EXPECT_EQ(ops.count("Add"), 0u);
    EXPECT_EQ(ops.count("QAdd"), 0u);
    const Node* qc = find(after, "QConv");
    ASSERT_NE(qc, nullptr);
    ASSERT_EQ(qc->inputs.size(), 12u);
    EXPECT_NE(qc->inputs[9], kNoValue);
    EXPECT_EQ(qc->attr_string("activation", ""), "Relu");
  }
}

TEST(QuantPasses, ConvWithoutFinalQuantizeWritesFloat) {
  ConvGraph t = conv_graph(DType::kUInt8, false, false, false, 13);
  // Drop the output Q/DQ: the Conv's float result is the graph output's producer's input.
  Graph& g = t.b.g;
  const Node* conv = nullptr;
  for (size_t i = 0; i < g.num_nodes(); ++i)
    if (g.node(static_cast<NodeId>(i)).op_type == "Conv") conv = &g.node(static_cast<NodeId>(i));
  ASSERT_NE(conv, nullptr);
  const ValueId c = conv->outputs[0];
  // Drop the Q/DQ pair after the Conv: a float op reads its result instead.
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    Node& n = g.node(static_cast<NodeId>(i));
    if (n.op_type == "QuantizeLinear" && n.inputs[0] == c) {
      n.dead = true;
      for (size_t j = 0; j < g.num_nodes(); ++j)
        if (g.node(static_cast<NodeId>(j)).op_type == "DequantizeLinear" &&
            g.node(static_cast<NodeId>(j)).inputs[0] == n.outputs[0])
          g.node(static_cast<NodeId>(j)).dead = true;
    }
  }
  const ValueId y = t.b.value("y");
  t.b.node("Sigmoid", {c}, {y});
  g.mutable_outputs() = {y};
  std::mt19937 rng(5);
  const Graph after = rewrite_and_compare(g, {random_input(Shape{1, 8, 6, 6}, rng)}, 1e-4);
  const Node* qc = find(after, "QConv");
  ASSERT_NE(qc, nullptr);
  EXPECT_EQ(qc->inputs[6], kNoValue);
  EXPECT_EQ(qc->attr_string("activation", ""), "Sigmoid");
}

TEST(QuantPasses, PoolsReshapesAndAddsStayQuantized) {
  Builder b;
  const DimList xd{1, 4, 8, 8}, pd{1, 4, 4, 4};
  const ValueId x = b.input("x", xd), x2 = b.input("x2", pd);
  ValueId q;
  const ValueId d = b.qdq(x, 0.02f, 10, DType::kInt8, xd, &q);
  const ValueId mp = b.value("mp", DType::kFloat32, pd);
  const NodeId pool = b.node("MaxPool", {d}, {mp});
  set_ints(b.g.node(pool), "kernel_shape", {2, 2});
  set_ints(b.g.node(pool), "strides", {2, 2});
  const ValueId mpd = b.qdq(mp, 0.02f, 10, DType::kInt8, pd);  // same parameters: exact
  const ValueId other = b.qdq(x2, 0.03f, -7, DType::kInt8, pd);
  const ValueId s = b.value("s", DType::kFloat32, pd);
  b.node("Add", {mpd, other}, {s});
  const ValueId sd = b.qdq(s, 0.05f, 0, DType::kInt8, pd);
  const ValueId gp = b.value("gp", DType::kFloat32, DimList{1, 4, 1, 1});
  b.node("GlobalAveragePool", {sd}, {gp});
  const ValueId gd = b.qdq(gp, 0.01f, 3, DType::kInt8, DimList{1, 4, 1, 1});
  const ValueId f = b.value("f", DType::kFloat32, DimList{1, 4});
  b.node("Flatten", {gd}, {f});
  const ValueId fd = b.qdq(f, 0.01f, 3, DType::kInt8, DimList{1, 4});
  b.g.add_output(fd);
  std::mt19937 rng(6);
  const Graph after =
      rewrite_and_compare(b.g, {random_input(Shape{1, 4, 8, 8}, rng), random_input(Shape{1, 4, 4, 4}, rng)}, 0.0101);
  const auto ops = op_counts(after);
  EXPECT_EQ(ops.at("QuantizeLinear"), 2);    // the two graph inputs
  EXPECT_EQ(ops.at("DequantizeLinear"), 1);  // the graph output
  EXPECT_EQ(ops.at("MaxPool"), 1);
  EXPECT_EQ(ops.at("QAdd"), 1);
  EXPECT_EQ(ops.at("QGlobalAveragePool"), 1);
  EXPECT_EQ(ops.at("Flatten"), 1);
  EXPECT_EQ(after.value(find(after, "MaxPool")->inputs[0]).dtype, DType::kUInt8);
  EXPECT_EQ(after.value(find(after, "Flatten")->outputs[0]).dtype, DType::kUInt8);
}

TEST(QuantPasses, ConcatBranchesQuantizeStraightToTheConcatScale) {
  Builder b;
  std::mt19937 rng(15);
  const DimList xd{1, 8, 5, 5}, cd{1, 16, 5, 5};
  const ValueId x = b.input("x", xd);
  const ValueId xdq = b.qdq(x, 0.03f, 128, DType::kUInt8, xd);
  std::vector<ValueId> branches;
  for (float scale : {0.02f, 0.05f}) {
    const ValueId c = b.value("c" + std::to_string(branches.size()), DType::kFloat32, xd);
    b.node("Conv", {xdq, b.weight(Shape{8, 8, 1, 1}, rng, true, 0)}, {c});
    branches.push_back(b.qdq(c, scale, 120, DType::kUInt8, xd));
  }
  const ValueId cat = b.value("cat", DType::kFloat32, cd);
  const NodeId concat = b.node("Concat", branches, {cat});
  Attribute axis;
  axis.kind = Attribute::Kind::kInt;
  axis.i = 1;
  b.g.node(concat).attrs["axis"] = axis;
  b.g.add_output(b.qdq(cat, 0.04f, 125, DType::kUInt8, cd));
  const Graph after = rewrite_and_compare(b.g, {random_input(Shape{1, 8, 5, 5}, rng)}, 0.0401 + 0.025);
  const auto ops = op_counts(after);
  EXPECT_EQ(ops.at("QConv"), 2);
  EXPECT_EQ(ops.at("DequantizeLinear"), 1);
  const Node* c = find(after, "Concat");
  ASSERT_NE(c, nullptr);
  for (ValueId v : c->inputs) {
    const Node& conv = after.node(after.value(v).producer);
    EXPECT_EQ(conv.op_type, "QConv");
    EXPECT_EQ(after.value(conv.inputs[6]).constant->data<float>()[0], 0.04f);
  }
}

TEST(QuantPasses, SiluAndSqueezeExciteBecomeTablesAndQMul) {
  Builder b;
  std::mt19937 rng(16);
  const DimList xd{1, 8, 6, 6}, vd{1, 8, 1, 1};
  const ValueId x = b.input("x", xd);
  const ValueId xdq = b.qdq(x, 0.03f, 0, DType::kInt8, xd);
  const ValueId c = b.value("c", DType::kFloat32, xd);
  b.node("Conv", {xdq, b.weight(Shape{8, 8, 1, 1}, rng, true, 0)}, {c});
  // SiLU as quantize_static writes it: the sigmoid gets its own Q/DQ, the product another.
  const ValueId cdq = b.qdq(c, 0.04f, 10, DType::kInt8, xd);
  const ValueId sg = b.value("sg", DType::kFloat32, xd);
  b.node("Sigmoid", {cdq}, {sg});
  const ValueId sgdq = b.qdq(sg, 1.f / 255, -128, DType::kInt8, xd);
  const ValueId silu = b.value("silu", DType::kFloat32, xd);
  b.node("Mul", {cdq, sgdq}, {silu});
  const ValueId sdq = b.qdq(silu, 0.03f, -120, DType::kInt8, xd);
  // Squeeze-and-excite: the pooled vector through a 1x1 conv and a sigmoid scales the channels.
  const ValueId pooled = b.value("pooled", DType::kFloat32, vd);
  b.node("GlobalAveragePool", {sdq}, {pooled});
  const ValueId pdq = b.qdq(pooled, 0.01f, 0, DType::kInt8, vd);
  const ValueId e = b.value("e", DType::kFloat32, vd);
  b.node("Conv", {pdq, b.weight(Shape{8, 8, 1, 1}, rng, true, 0)}, {e});
  const ValueId edq = b.qdq(e, 0.02f, 0, DType::kInt8, vd);
  const ValueId es = b.value("es", DType::kFloat32, vd);
  b.node("Sigmoid", {edq}, {es});
  const ValueId esdq = b.qdq(es, 1.f / 255, -128, DType::kInt8, vd);
  const ValueId scaled = b.value("scaled", DType::kFloat32, xd);
  b.node("Mul", {sdq, esdq}, {scaled});
  b.g.add_output(b.qdq(scaled, 0.02f, 0, DType::kInt8, xd));
  // The tables reproduce the QDQ arithmetic exactly; the convolutions round once.
  const Graph after = rewrite_and_compare(b.g, {random_input(Shape{1, 8, 6, 6}, rng)}, 0.0201);
  const auto ops = op_counts(after);
  EXPECT_EQ(ops.count("Sigmoid"), 0u);
  EXPECT_EQ(ops.count("Mul"), 0u);
  EXPECT_EQ(ops.at("QLookup"), 2);  // x * sigmoid(x) in one table, the excitation's sigmoid in another
  EXPECT_EQ(ops.at("QMul"), 1);
  EXPECT_EQ(ops.at("QGlobalAveragePool"), 1);
  EXPECT_EQ(ops.at("QConv"), 2);
  EXPECT_EQ(ops.at("DequantizeLinear"), 1);
}

TEST(QuantPasses, ConcatInputFromAMovingOpIsRequantisedByATable) {
  Builder b;
  std::mt19937 rng(17);
  const DimList xd{1, 8, 6, 6}, pd{1, 8, 3, 3}, cd{1, 16, 3, 3};
  const ValueId x = b.input("x", xd);
  const ValueId xdq = b.qdq(x, 0.03f, 128, DType::kUInt8, xd);
  const ValueId mp = b.value("mp", DType::kFloat32, pd);
  const NodeId pool = b.node("MaxPool", {xdq}, {mp});
  set_ints(b.g.node(pool), "kernel_shape", {2, 2});
  set_ints(b.g.node(pool), "strides", {2, 2});
  const ValueId mpdq = b.qdq(mp, 0.03f, 128, DType::kUInt8, pd);
  const ValueId cv = b.value("cv", DType::kFloat32, pd);
  const NodeId conv = b.node("Conv", {mpdq, b.weight(Shape{8, 8, 1, 1}, rng, true, 0)}, {cv});
  (void)conv;
  const ValueId cvdq = b.qdq(cv, 0.05f, 120, DType::kUInt8, pd);
  const ValueId cat = b.value("cat", DType::kFloat32, cd);
  const NodeId concat = b.node("Concat", {mpdq, cvdq}, {cat});
  Attribute axis;
  axis.kind = Attribute::Kind::kInt;
  axis.i = 1;
  b.g.node(concat).attrs["axis"] = axis;
  b.g.add_output(b.qdq(cat, 0.045f, 125, DType::kUInt8, cd));
  const Graph after = rewrite_and_compare(b.g, {random_input(Shape{1, 8, 6, 6}, rng)}, 0.0451 + 0.031);
  const auto ops = op_counts(after);
  EXPECT_EQ(ops.at("QLookup"), 1);  // the pooled branch: MaxPool writes it, so only a table can rescale it
  EXPECT_EQ(ops.at("DequantizeLinear"), 1);
  EXPECT_EQ(after.value(find(after, "Concat")->outputs[0]).dtype, DType::kUInt8);
}

TEST(QuantPasses, BatchNormPadAndAveragePoolStayQuantized) {
  Builder b;
  std::mt19937 rng(18);
  const DimList xd{1, 8, 6, 6}, pd{1, 8, 8, 8}, od{1, 8, 4, 4};
  const ValueId x = b.input("x", xd);
  const ValueId xdq = b.qdq(x, 0.03f, -5, DType::kInt8, xd);
  auto vec = [&](float lo, float hi) {
    Tensor t = Tensor::empty(DType::kFloat32, Shape{8});
    std::uniform_real_distribution<float> d(lo, hi);
    for (int i = 0; i < 8; ++i) t.data<float>()[i] = d(rng);
    return b.constant("bn" + std::to_string(b.g.num_values()), t);
  };
  // DenseNet's pre-activation: BatchNormalization and Relu between a DQ and a Q.
  const ValueId bn = b.value("bn", DType::kFloat32, xd), r = b.value("r", DType::kFloat32, xd);
  b.node("BatchNormalization", {xdq, vec(0.5f, 2.f), vec(-0.5f, 0.5f), vec(-0.2f, 0.2f), vec(0.5f, 1.5f)}, {bn});
  b.node("Relu", {bn}, {r});
  const ValueId rdq = b.qdq(r, 0.02f, -128, DType::kInt8, xd);
  // Its transition: Pad with zeros, then AveragePool.
  const ValueId padded = b.value("padded", DType::kFloat32, pd);
  b.node("Pad", {rdq, b.constant("pads", Tensor::from_vector<int64_t>(Shape{8}, {0, 0, 1, 1, 0, 0, 1, 1}))}, {padded});
  const ValueId pdq = b.qdq(padded, 0.02f, -128, DType::kInt8, pd);
  const ValueId avg = b.value("avg", DType::kFloat32, od);
  const NodeId pool = b.node("AveragePool", {pdq}, {avg});
  set_ints(b.g.node(pool), "kernel_shape", {2, 2});
  set_ints(b.g.node(pool), "strides", {2, 2});
  b.g.add_output(b.qdq(avg, 0.015f, -100, DType::kInt8, od));
  const Graph after = rewrite_and_compare(b.g, {random_input(Shape{1, 8, 6, 6}, rng)}, 0.0151 + 0.02);
  const auto ops = op_counts(after);
  EXPECT_EQ(ops.count("BatchNormalization"), 0u);
  EXPECT_EQ(ops.at("QScaleShift"), 1);
  EXPECT_EQ(ops.at("QAveragePool"), 1);
  EXPECT_EQ(ops.at("DequantizeLinear"), 1);
  // The padding is the zero point's code (uint8 after the switch from int8: -128 + 128 = 0).
  const Node* pad = find(after, "Pad");
  ASSERT_NE(pad, nullptr);
  EXPECT_EQ(after.value(pad->inputs[0]).dtype, DType::kUInt8);
  EXPECT_EQ(element_as_double(*after.value(pad->inputs[2]).constant, 0), 0.0);
}

TEST(QuantPasses, MovingOpWithOtherOutputParametersIsLeft) {
  Builder b;
  const DimList xd{1, 4, 8, 8}, pd{1, 4, 4, 4};
  const ValueId x = b.input("x", xd);
  const ValueId d = b.qdq(x, 0.02f, 10, DType::kUInt8, xd);
  const ValueId mp = b.value("mp", DType::kFloat32, pd);
  const NodeId pool = b.node("MaxPool", {d}, {mp});
  set_ints(b.g.node(pool), "kernel_shape", {2, 2});
  set_ints(b.g.node(pool), "strides", {2, 2});
  b.g.add_output(b.qdq(mp, 0.04f, 10, DType::kUInt8, pd));  // another scale: requantisation, not a move
  ops::KernelEvaluator ev(ops::default_cpu_registry());
  PassReport r;
  ASSERT_TRUE(run_passes(b.g, PassOptions{}, &ev, &r).ok());
  EXPECT_EQ(r.quant_fused, 0);
  EXPECT_EQ(b.g.value(find(b.g, "MaxPool")->inputs[0]).dtype, DType::kFloat32);
}

TEST(QuantPasses, QdqGemmBecomesQMatMulWithTransposedWeights) {
  for (bool trans_b : {false, true}) {
    Builder b;
    std::mt19937 rng(7);
    const ValueId x = b.input("x", {3, 16});
    const ValueId xd = b.qdq(x, 0.03f, -10, DType::kInt8, {3, 16});
    const ValueId w = b.weight(trans_b ? Shape{5, 16} : Shape{16, 5}, rng, true, trans_b ? 0 : 1);
    const ValueId bias = b.constant("bias", Tensor::from_vector<float>(Shape{5}, {0.1f, -0.2f, 0.3f, 0.f, 1.f}));
    const ValueId y = b.value("y", DType::kFloat32, DimList{3, 5});
    const NodeId gemm = b.node("Gemm", {xd, w, bias}, {y});
    Attribute t;
    t.kind = Attribute::Kind::kInt;
    t.i = trans_b ? 1 : 0;
    b.g.node(gemm).attrs["transB"] = t;
    Attribute alpha;
    alpha.kind = Attribute::Kind::kFloat;
    alpha.f = 0.5f;
    b.g.node(gemm).attrs["alpha"] = alpha;
    b.g.add_output(b.qdq(y, 0.02f, 0, DType::kUInt8, {3, 5}));
    const Graph after = rewrite_and_compare(b.g, {random_input(Shape{3, 16}, rng)}, 0.0201);
    const Node* qm = find(after, "QMatMul");
    ASSERT_NE(qm, nullptr);
    EXPECT_EQ(after.value(qm->inputs[3]).constant->shape(), (Shape{16, 5}));
  }
}

TEST(QuantPasses, DynamicQuantizationChainBecomesMatMulIntegerToFloat) {
  Builder b;
  std::mt19937 rng(8);
  const ValueId x = b.input("x", {4, 32});
  const ValueId xq = b.value("xq", DType::kUInt8, DimList{4, 32});
  const ValueId xs = b.value("xs", DType::kFloat32, DimList{});
  const ValueId xz = b.value("xz", DType::kUInt8, DimList{});
  b.node("DynamicQuantizeLinear", {x}, {xq, xs, xz});
  Tensor w = Tensor::empty(DType::kInt8, Shape{32, 6});
  for (int64_t i = 0; i < w.numel(); ++i)
    w.data<int8_t>()[i] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  const ValueId scale = b.value("scale", DType::kFloat32, DimList{});
  b.node("Mul", {xs, b.constant("ws", Tensor::scalar<float>(0.004f))}, {scale});
  const ValueId acc = b.value("acc", DType::kInt32, DimList{4, 6});
  b.node("MatMulInteger", {xq, b.constant("w", w), xz, b.constant("wz", Tensor::scalar<int8_t>(0))}, {acc});
  const ValueId f = b.value("f", DType::kFloat32, DimList{4, 6});
  const NodeId cast = b.node("Cast", {acc}, {f});
  Attribute to;
  to.kind = Attribute::Kind::kInt;
  to.i = static_cast<int64_t>(DType::kFloat32);
  b.g.node(cast).attrs["to"] = to;
  const ValueId m = b.value("m", DType::kFloat32, DimList{4, 6});
  b.node("Mul", {f, scale}, {m});
  const ValueId y = b.value("y", DType::kFloat32, DimList{4, 6});
  b.node("Add", {b.constant("bias", Tensor::from_vector<float>(Shape{6}, {1, 2, 3, 4, 5, 6})), m}, {y});
  b.g.add_output(y);
  const Graph after = rewrite_and_compare(b.g, {random_input(Shape{4, 32}, rng)}, 1e-4);
  const auto ops = op_counts(after);
  EXPECT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops.at("DynamicQuantizeLinear"), 1);
  const Node* mf = find(after, "MatMulIntegerToFloat");
  ASSERT_NE(mf, nullptr);
  EXPECT_EQ(mf->inputs[2], after.find_value("xs"));  // A's scale, read at run time
  EXPECT_NE(mf->inputs[6], kNoValue);
}

TEST(QuantPasses, Int8GraphOutputsStayInt8) {
  Builder b;
  const DimList xd{1, 4, 8, 8}, pd{1, 4, 4, 4};
  const ValueId x = b.input("x", xd);
  ValueId q;
  const ValueId d = b.qdq(x, 0.02f, 10, DType::kInt8, xd, &q);
  const ValueId mp = b.value("mp", DType::kFloat32, pd);
  const NodeId pool = b.node("MaxPool", {d}, {mp});
  set_ints(b.g.node(pool), "kernel_shape", {2, 2});
  set_ints(b.g.node(pool), "strides", {2, 2});
  ValueId out;
  b.qdq(mp, 0.02f, 10, DType::kInt8, pd, &out);
  b.g.mutable_outputs() = {out};  // the int8 tensor itself is what the caller gets
  ops::KernelEvaluator ev(ops::default_cpu_registry());
  PassReport r;
  ASSERT_TRUE(run_passes(b.g, PassOptions{}, &ev, &r).ok());
  EXPECT_GT(r.quant_fused, 0);
  EXPECT_EQ(b.g.value(b.g.outputs()[0]).dtype, DType::kInt8);
  EXPECT_EQ(b.g.value(find(b.g, "MaxPool")->inputs[0]).dtype, DType::kInt8);
}

TEST(QuantPasses, FloatWeightsOrSwitchedOffLeaveTheGraph) {
  ConvGraph t = conv_graph(DType::kUInt8, false, true, false, 14);
  Graph off = t.b.g;
  PassOptions po;
  po.fuse_quant = false;
  ops::KernelEvaluator ev(ops::default_cpu_registry());
  PassReport r;
  ASSERT_TRUE(run_passes(off, po, &ev, &r).ok());
  EXPECT_EQ(r.quant_fused, 0);
  EXPECT_EQ(op_counts(off).count("QConv"), 0u);
  EXPECT_EQ(op_counts(off).count("Conv") + op_counts(off).count("FusedConv"), 1u);
}

}  // namespace
}  // namespace streamline::graph
