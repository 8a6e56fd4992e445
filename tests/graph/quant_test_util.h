#pragma once
// Test helpers for the int8 rewrites (quant_passes_test.cc, quant_qop_test.cc): a graph builder
// for QDQ graphs and rewrite_and_compare, which runs the passes on a copy and checks its outputs
// against the original's on the reference kernels (graph_run_util.h runs both graphs, with the
// reference registry of ops/op_test_util.h for the original).
//
//   Builder b;
//   const ValueId x = b.input("x", {1, 8, 6, 6});
//   b.g.add_output(b.qdq(x, 0.03f, 0, DType::kUInt8, {1, 8, 6, 6}));
//   const Graph after = rewrite_and_compare(b.g, {random_input(Shape{1, 8, 6, 6}, rng)}, 0.03);

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "graph/graph_run_util.h"
#include "graph/passes.h"
#include "ops/evaluator.h"
#include "ops/op_test_util.h"
#include "ops/registry.h"

namespace streamline::graph::quant_test {
struct Builder {
  Graph g;
  Builder() { g.opsets[""] = 13; }
  ValueId input(const std::string& name, DimList dims, DType t = DType::kFloat32) {
    const ValueId v = g.add_value(name, t, std::move(dims));
    g.add_input(v);
    return v;
  }
  ValueId value(const std::string& name, DType t = DType::kFloat32, std::optional<DimList> dims = std::nullopt) {
    return g.add_value(name, t, std::move(dims));
  }
  ValueId constant(const std::string& name, Tensor t) { return g.add_constant(name, std::move(t)); }
  NodeId node(const std::string& op, std::vector<ValueId> in, std::vector<ValueId> out) {
    return g.add_node(op, op + std::to_string(g.num_nodes()), std::move(in), std::move(out));
  }
  // QuantizeLinear then DequantizeLinear of `x` with one scale and zero point; returns the DQ output.
  ValueId qdq(ValueId x, float scale, int zp, DType t, const DimList& dims, ValueId* q_out = nullptr) {
    const ValueId s = constant("s" + std::to_string(g.num_values()), Tensor::scalar<float>(scale));
    const ValueId z = constant("z" + std::to_string(g.num_values()), zp_tensor(t, zp));
    const ValueId q = value("q" + std::to_string(g.num_values()), t, dims);
    const ValueId d = value("d" + std::to_string(g.num_values()), DType::kFloat32, dims);
    node("QuantizeLinear", {x, s, z}, {q});
    node("DequantizeLinear", {q, s, z}, {d});
    if (q_out) *q_out = q;
    return d;
  }
  // DequantizeLinear of a constant int8 weight with per-channel (axis) or per-tensor scales.
  ValueId weight(const Shape& shape, std::mt19937& rng, bool per_channel, int64_t axis) {
    Tensor w = Tensor::empty(DType::kInt8, shape);
    std::uniform_int_distribution<int> d(-127, 127);
    for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(d(rng));
    const int64_t n = per_channel ? shape[static_cast<size_t>(axis)] : 1;
    Tensor s = Tensor::empty(DType::kFloat32, per_channel ? Shape{n} : Shape{});
    Tensor z = Tensor::empty(DType::kInt8, per_channel ? Shape{n} : Shape{});
    std::uniform_real_distribution<float> ds(0.002f, 0.01f);
    for (int64_t i = 0; i < n; ++i) {
      s.data<float>()[i] = ds(rng);
      z.data<int8_t>()[i] = 0;
    }
    const ValueId out = value("w" + std::to_string(g.num_values()));
    const NodeId dq =
        node("DequantizeLinear",
             {constant("wq" + std::to_string(g.num_values()), w), constant("ws" + std::to_string(g.num_values()), s),
              constant("wz" + std::to_string(g.num_values()), z)},
             {out});
    Attribute a;
    a.kind = Attribute::Kind::kInt;
    a.i = axis;
    g.node(dq).attrs["axis"] = a;
    return out;
  }
  static Tensor zp_tensor(DType t, int zp) {
    return t == DType::kInt8 ? Tensor::scalar<int8_t>(static_cast<int8_t>(zp))
                             : Tensor::scalar<uint8_t>(static_cast<uint8_t>(zp));
  }
};

inline void set_ints(Node& n, const std::string& k, std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  n.attrs[k] = a;
}

inline std::map<std::string, int> op_counts(const Graph& g) {
  std::map<std::string, int> c;
  for (size_t i = 0; i < g.num_nodes(); ++i)
    if (!g.node(static_cast<NodeId>(i)).dead) ++c[g.node(static_cast<NodeId>(i)).op_type];
  return c;
}

inline const Node* find(const Graph& g, const std::string& op) {
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(static_cast<NodeId>(i));
    if (!n.dead && n.op_type == op) return &n;
  }
  return nullptr;
}

// Runs the passes on a copy of `g` and checks the rewritten graph's outputs against the
// original's within `tol` (absolute); returns the rewritten graph.
inline Graph rewrite_and_compare(const Graph& g, const std::vector<Tensor>& inputs, double tol) {
  Graph after = g;
  ops::KernelEvaluator ev(ops::default_cpu_registry());
  PassReport report;
  EXPECT_TRUE(run_passes(after, PassOptions{}, &ev, &report).ok());
  EXPECT_GT(report.quant_fused, 0) << report.to_string();
  const Result<std::vector<Tensor>> want = testing::run_graph(g, inputs, ops::testing::ref_reg());
  const Result<std::vector<Tensor>> got = testing::run_graph(after, inputs);
  EXPECT_TRUE(want.ok()) << "the original graph: " << want.status().to_string();
  EXPECT_TRUE(got.ok()) << "the rewritten graph: " << got.status().to_string();
  if (!want.ok() || !got.ok()) return after;
  EXPECT_EQ(got->size(), want->size());
  for (size_t k = 0; k < got->size() && k < want->size(); ++k) {
    const Tensor &a = (*got)[k], &b = (*want)[k];
    EXPECT_EQ(a.shape(), b.shape());
    double worst = 0;
    for (int64_t i = 0; i < b.numel(); ++i)
      worst = std::max(worst, std::fabs(element_as_double(a, i) - element_as_double(b, i)));
    EXPECT_LE(worst, tol) << "output " << k;
  }
  return after;
}

inline Tensor random_input(const Shape& s, std::mt19937& rng) {
  Tensor t = Tensor::empty(DType::kFloat32, s);
  std::normal_distribution<float> d(0.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}
}  // namespace streamline::graph::quant_test
