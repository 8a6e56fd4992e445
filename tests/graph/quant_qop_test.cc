// onnxruntime's QOperator-format ops (com.microsoft QLinearAdd, QLinearSigmoid, QLinearConcat,
// QLinearGlobalAveragePool, QGemm; graph/pass_quant_qop.cc) rewritten onto streamline's int8 ops:
// which ops remain, and that the rewritten graph (CPU kernels) computes what the same model
// written in QDQ form computes on the reference kernels, within a few output steps.

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "graph/quant_test_util.h"

namespace streamline::graph {
namespace {

using namespace quant_test;  // NOLINT(google-build-using-namespace): the int8 test helpers

constexpr const char* kMs = "com.microsoft";

struct QSpec {
  float s;
  int z;
};

// x, x2 [1, 4, 5, 5] -> Q -> Conv(x) 3x3 -> Add(., x2) -> Sigmoid -> Concat(sum, sigmoid) -> GlobalAveragePool
// -> Flatten -> Gemm (int8 weights [3, 8], per-column or per-tensor scales, int32 bias) -> y float.
// `qop`: as the QOperator ops; otherwise as DQ -> float op -> Q.
Graph two_input_head(bool qop, DType act, bool per_column) {
  Builder b;
  b.g.opsets[kMs] = 1;
  const bool s8 = act == DType::kInt8;
  const int off = s8 ? -128 : 0;  // int8 codes are uint8's less 128
  const DimList xd{1, 4, 5, 5}, cd{1, 8, 5, 5}, pd{1, 8, 1, 1}, fd{1, 8}, yd{1, 3};
  int k = 0;
  auto scal = [&](float v) { return b.constant("c" + std::to_string(k++), Tensor::scalar<float>(v)); };
  auto zp = [&](int z) { return b.constant("c" + std::to_string(k++), Builder::zp_tensor(act, z + off)); };
  auto quantize = [&](ValueId x, QSpec q, const DimList& d) {
    const ValueId out = b.value("q" + std::to_string(k++), act, d);
    b.node("QuantizeLinear", {x, scal(q.s), zp(q.z)}, {out});
    return out;
  };
  auto dequantize = [&](ValueId x, QSpec q, const DimList& d) {
    const ValueId out = b.value("d" + std::to_string(k++), DType::kFloat32, d);
    b.node("DequantizeLinear", {x, scal(q.s), zp(q.z)}, {out});
    return out;
  };
  auto ms_node = [&](const std::string& op, std::vector<ValueId> in, std::vector<ValueId> out) {
    return b.g.add_node(op, op + std::to_string(b.g.num_nodes()), std::move(in), std::move(out), kMs);
  };
  // A float op between DQs of `ins` and a Q to `y` (the QDQ twin of a QLinear op).
  auto qdq_op = [&](const std::string& op, std::vector<std::pair<ValueId, QSpec>> ins, QSpec y, const DimList& in_d,
                    const DimList& out_d) {
    std::vector<ValueId> fin;
    for (auto& [v, q] : ins) fin.push_back(dequantize(v, q, in_d));
    const ValueId f = b.value("f" + std::to_string(k++), DType::kFloat32, out_d);
    const NodeId n = b.node(op, fin, {f});
    return std::make_pair(quantize(f, y, out_d), n);
  };

  const QSpec xq{0.03f, 128}, x2q{0.04f, 120}, cq{0.05f, 128}, sq{0.05f, 130}, gq{1.f / 256, 0}, pq{0.02f, 125};
  const ValueId a = quantize(b.input("x", xd), xq, xd);
  const ValueId a2 = quantize(b.input("x2", xd), x2q, xd);
  // The conv: int8 weights [4, 4, 3, 3], one scale per output channel, int32 bias.
  std::mt19937 crng(5);
  Tensor cw = Tensor::empty(DType::kInt8, Shape{4, 4, 3, 3});
  std::uniform_int_distribution<int> dcw(-127, 127);
  for (int64_t i = 0; i < cw.numel(); ++i) cw.data<int8_t>()[i] = static_cast<int8_t>(dcw(crng));
  Tensor cws = Tensor::from_vector<float>(Shape{4}, {0.004f, 0.005f, 0.006f, 0.003f});
  Tensor cwz = Tensor::from_vector<int8_t>(Shape{4}, {0, 0, 0, 0});
  Tensor cb = Tensor::from_vector<int32_t>(Shape{4}, {500, -300, 0, 1200});
  Tensor cbs = Tensor::empty(DType::kFloat32, Shape{4});
  for (int i = 0; i < 4; ++i) cbs.data<float>()[i] = xq.s * cws.data<float>()[i];
  const ValueId cwv = b.constant("cw", cw), cwsv = b.constant("cws", cws), cwzv = b.constant("cwz", cwz);
  const ValueId cbv = b.constant("cb", cb);
  ValueId conv;
  NodeId conv_node;
  if (qop) {
    conv = b.value("conv", act, xd);
    conv_node = b.node("QLinearConv", {a, scal(xq.s), zp(xq.z), cwv, cwsv, cwzv, scal(cq.s), zp(cq.z), cbv}, {conv});
  } else {
    const ValueId wd = b.value("cwd"), bd = b.value("cbd");
    const NodeId wdq = b.node("DequantizeLinear", {cwv, cwsv, cwzv}, {wd});
    const NodeId bdq = b.node("DequantizeLinear", {cbv, b.constant("cbs", cbs)}, {bd});
    Attribute ax;
    ax.kind = Attribute::Kind::kInt;
    ax.i = 0;
    b.g.node(wdq).attrs["axis"] = ax;
    b.g.node(bdq).attrs["axis"] = ax;
    const ValueId f = b.value("convf", DType::kFloat32, xd);
    conv_node = b.node("Conv", {dequantize(a, xq, xd), wd, bd}, {f});
    conv = quantize(f, cq, xd);
  }
  set_ints(b.g.node(conv_node), "pads", {1, 1, 1, 1});
  set_ints(b.g.node(conv_node), "kernel_shape", {3, 3});
  ValueId sum, sig, cat, pool;
  if (qop) {
    sum = b.value("sum", act, xd);
    ms_node("QLinearAdd", {conv, scal(cq.s), zp(cq.z), a2, scal(x2q.s), zp(x2q.z), scal(sq.s), zp(sq.z)}, {sum});
    sig = b.value("sig", act, xd);
    ms_node("QLinearSigmoid", {sum, scal(sq.s), zp(sq.z), scal(gq.s), zp(gq.z)}, {sig});
    cat = b.value("cat", act, cd);
    const NodeId c =
        ms_node("QLinearConcat", {scal(sq.s), zp(sq.z), sum, scal(sq.s), zp(sq.z), sig, scal(gq.s), zp(gq.z)}, {cat});
    Attribute axis;
    axis.kind = Attribute::Kind::kInt;
    axis.i = 1;
    b.g.node(c).attrs["axis"] = axis;
    pool = b.value("pool", act, pd);
    ms_node("QLinearGlobalAveragePool", {cat, scal(sq.s), zp(sq.z), scal(pq.s), zp(pq.z)}, {pool});
  } else {
    sum = qdq_op("Add", {{conv, cq}, {a2, x2q}}, sq, xd, xd).first;
    sig = qdq_op("Sigmoid", {{sum, sq}}, gq, xd, xd).first;
    const auto [c, n] = qdq_op("Concat", {{sum, sq}, {sig, gq}}, sq, xd, cd);
    Attribute axis;
    axis.kind = Attribute::Kind::kInt;
    axis.i = 1;
    b.g.node(n).attrs["axis"] = axis;
    cat = c;
    pool = qdq_op("GlobalAveragePool", {{cat, sq}}, pq, cd, pd).first;
  }
  const ValueId flat = b.value("flat", act, fd);
  b.node("Flatten", {pool}, {flat});

  // Gemm weights [N=3, K=8] (transB), scales per column or one, int32 bias in a_scale * b_scale.
  std::mt19937 rng(per_column ? 7 : 8);
  Tensor w = Tensor::empty(DType::kInt8, Shape{3, 8});
  std::uniform_int_distribution<int> dw(-127, 127);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(dw(rng));
  Tensor ws = Tensor::empty(DType::kFloat32, per_column ? Shape{3} : Shape{});
  Tensor wz = Tensor::empty(DType::kInt8, per_column ? Shape{3} : Shape{});
  for (int64_t i = 0; i < ws.numel(); ++i) {
    ws.data<float>()[i] = 0.004f + 0.002f * static_cast<float>(i);
    wz.data<int8_t>()[i] = 0;
  }
  Tensor bias = Tensor::from_vector<int32_t>(Shape{3}, {300, -200, 50});
  Tensor bias_scale = Tensor::empty(DType::kFloat32, ws.shape());
  for (int64_t i = 0; i < ws.numel(); ++i) bias_scale.data<float>()[i] = pq.s * ws.data<float>()[i];
  const ValueId wv = b.constant("w", w), wsv = b.constant("ws", ws), wzv = b.constant("wz", wz);
  const ValueId y = b.value("y", DType::kFloat32, yd);
  NodeId gemm;
  if (qop) {
    gemm = ms_node("QGemm", {flat, scal(pq.s), zp(pq.z), wv, wsv, wzv, b.constant("bias", bias)}, {y});
  } else {
    const ValueId wd = b.value("wd"), bd = b.value("bd");
    const NodeId wdq = b.node("DequantizeLinear", {wv, wsv, wzv}, {wd});
    const NodeId bdq =
        b.node("DequantizeLinear", {b.constant("bias", bias), b.constant("bias_scale", bias_scale)}, {bd});
    Attribute ax;
    ax.kind = Attribute::Kind::kInt;
    ax.i = 0;
    b.g.node(wdq).attrs["axis"] = ax;
    b.g.node(bdq).attrs["axis"] = ax;
    gemm = b.node("Gemm", {dequantize(flat, pq, fd), wd, bd}, {y});
  }
  Attribute tb;
  tb.kind = Attribute::Kind::kInt;
  tb.i = 1;
  b.g.node(gemm).attrs["transB"] = tb;
  b.g.add_output(y);
  return b.g;
}

class QOperatorHead : public ::testing::TestWithParam<std::tuple<DType, bool>> {};

TEST_P(QOperatorHead, BecomesStreamlineInt8OpsAndMatchesItsQdqForm) {
  const auto [act, per_column] = GetParam();
  Graph qop = two_input_head(true, act, per_column);
  const Graph qdq = two_input_head(false, act, per_column);
  std::mt19937 rng(21);
  const std::vector<Tensor> inputs = {random_input(Shape{1, 4, 5, 5}, rng), random_input(Shape{1, 4, 5, 5}, rng)};

  ops::KernelEvaluator ev(ops::default_cpu_registry());
  PassReport report;
  ASSERT_TRUE(run_passes(qop, PassOptions{}, &ev, &report).ok());
  const auto ops = op_counts(qop);
  for (const char* gone :
       {"QLinearConv", "QLinearAdd", "QLinearSigmoid", "QLinearConcat", "QLinearGlobalAveragePool", "QGemm", "QAdd"})
    EXPECT_EQ(ops.count(gone), 0u) << gone << " left: " << report.to_string();
  // The Add became the conv's residual input.
  ASSERT_EQ(ops.at("QConv"), 1);
  const Node* conv = find(qop, "QConv");
  ASSERT_EQ(conv->inputs.size(), 12u);
  const NodeId z_writer = qop.value(conv->inputs[9]).producer;
  ASSERT_NE(z_writer, kNoNode);
  EXPECT_EQ(qop.node(z_writer).op_type, "QuantizeLinear");  // x2's
  EXPECT_GE(ops.at("QLookup"), 1);                          // the sigmoid (and the requantisation of its Concat input)
  EXPECT_EQ(ops.at("Concat"), 1);
  EXPECT_EQ(ops.at("QGlobalAveragePool"), 1);
  EXPECT_EQ(ops.at("QMatMul"), 1);

  const auto want = testing::run_graph(qdq, inputs, ops::testing::ref_reg());
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  const auto got = testing::run_graph(qop, inputs);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(want->size(), 1u);
  ASSERT_EQ(got->size(), 1u);
  const Tensor &y = (*got)[0], &y_want = (*want)[0];
  ASSERT_EQ(y.shape(), y_want.shape());
  ASSERT_EQ(y.dtype(), DType::kFloat32);
  // The fused residual skips the conv's rounding, so a sum code may differ by one; after pooling,
  // one pooled code off moves an output by at most 0.02 * 127 * 0.008 (about 0.02).
  for (int64_t i = 0; i < y_want.numel(); ++i)
    EXPECT_NEAR(y.data<float>()[i], y_want.data<float>()[i], 0.03) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Formats, QOperatorHead,
                         ::testing::Combine(::testing::Values(DType::kUInt8, DType::kInt8), ::testing::Bool()));

TEST(QOperatorOps, NonConstantScaleIsLeftForTheLoaderToReport) {
  Builder b;
  b.g.opsets[kMs] = 1;
  const DimList xd{1, 4, 5, 5};
  const ValueId x = b.input("x", xd, DType::kUInt8);
  const ValueId scale = b.input("scale", DimList{});  // run-time: not a QAdd
  const ValueId z = b.constant("z", Tensor::scalar<uint8_t>(128));
  const ValueId s = b.constant("s", Tensor::scalar<float>(0.05f));
  const ValueId y = b.value("y", DType::kUInt8, xd);
  b.g.add_node("QLinearAdd", "add", {x, scale, z, x, s, z, s, z}, {y}, kMs);
  b.g.add_output(y);
  ops::KernelEvaluator ev(ops::default_cpu_registry());
  PassReport report;
  ASSERT_TRUE(run_passes(b.g, PassOptions{}, &ev, &report).ok());
  EXPECT_EQ(report.quant_fused, 0);
  EXPECT_NE(find(b.g, "QLinearAdd"), nullptr);
}

}  // namespace
}  // namespace streamline::graph
