#pragma once
// Helpers for the long-tail kernel tests (loss, rnn, quant, einsum, sampling, ...): a one-node graph
// with a domain, several outputs and attributes set fluently, run on the CPU and the reference
// registries, and an all-outputs comparison.
//
//   NodeCase c("LSTM", 14, 3, 3);
//   c.i("hidden_size", 4).s("direction", "bidirectional");
//   expect_cpu_matches_reference(c, {x, w, r}, 1e-4);

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ops/data_test_util.h"

namespace streamline::ops::testing {

class NodeCase {
 public:
  // `present[i]` false marks an omitted optional input; empty = all present.
  NodeCase(const std::string& op, int opset, size_t num_inputs, size_t num_outputs = 1, std::vector<bool> present = {},
           const std::string& domain = "") {
    g_.opsets[domain] = opset;
    std::vector<graph::ValueId> ins, outs;
    for (size_t k = 0; k < num_inputs; ++k) {
      const bool here = present.empty() || present[k];
      ins.push_back(here ? g_.add_value("in" + std::to_string(k)) : graph::kNoValue);
    }
    for (size_t k = 0; k < num_outputs; ++k) outs.push_back(g_.add_value("out" + std::to_string(k)));
    id_ = g_.add_node(op, op + "_node", ins, outs, domain);
    g_.node(id_).opset = opset;
  }
  NodeCase& i(const std::string& k, int64_t v) {
    return set(k, graph::Attribute::Kind::kInt, [&](auto& a) { a.i = v; });
  }
  NodeCase& f(const std::string& k, float v) {
    return set(k, graph::Attribute::Kind::kFloat, [&](auto& a) { a.f = v; });
  }
  NodeCase& s(const std::string& k, const std::string& v) {
    return set(k, graph::Attribute::Kind::kString, [&](auto& a) { a.s = v; });
  }
  NodeCase& ints(const std::string& k, std::vector<int64_t> v) {
    return set(k, graph::Attribute::Kind::kInts, [&](auto& a) { a.ints = v; });
  }
  NodeCase& floats(const std::string& k, std::vector<float> v) {
    return set(k, graph::Attribute::Kind::kFloats, [&](auto& a) { a.floats = v; });
  }
  NodeCase& tensor(const std::string& k, const Tensor& v) {
    return set(k, graph::Attribute::Kind::kTensor, [&](auto& a) { a.t = v; });
  }
  NodeCase& strings(const std::string& k, std::vector<std::string> v) {
    return set(k, graph::Attribute::Kind::kStrings, [&](auto& a) { a.strings = v; });
  }

  const graph::Graph& graph() const { return g_; }
  const graph::Node& node() const { return g_.node(id_); }

  // Runs on `reg`; inputs listed in `constant` are seen as constants at create and reshape.
  Result<std::vector<Tensor>> run(const KernelRegistry& reg, const std::vector<Tensor>& inputs, int threads = 1,
                                  std::vector<bool> constant = {}) const {
    EvalOptions o;
    o.num_threads = threads;
    o.constant_mask = constant.empty() ? std::vector<bool>(inputs.size(), false) : constant;
    return evaluate_node(reg, g_, node(), inputs, o);
  }

 private:
  template <typename F>
  NodeCase& set(const std::string& k, graph::Attribute::Kind kind, F fill) {
    graph::Attribute a;
    a.kind = kind;
    fill(a);
    g_.node(id_).attrs[k] = a;
    return *this;
  }
  graph::Graph g_;
  graph::NodeId id_ = graph::kNoNode;
};

// Same dtype and shape; floating values within tol * (1 + |want|) (NaN matches NaN), others exact.
inline ::testing::AssertionResult close_tensor(const Tensor& got, const Tensor& want, double tol) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return ::testing::AssertionFailure() << "got " << got.describe() << ", want " << want.describe();
  const bool fp = got.dtype() == DType::kFloat32 || got.dtype() == DType::kFloat64 || got.dtype() == DType::kFloat16 ||
                  got.dtype() == DType::kBFloat16;
  for (int64_t k = 0; k < got.numel(); ++k) {
    const double a = element_as_double(got, k), b = element_as_double(want, k);
    if (fp && std::isnan(a) && std::isnan(b)) continue;
    const bool ok = fp ? (a == b || std::fabs(a - b) <= tol * (1.0 + std::fabs(b))) : a == b;
    if (!ok) return ::testing::AssertionFailure() << "element " << k << ": got " << a << ", want " << b;
  }
  return ::testing::AssertionSuccess();
}

// Every output of the CPU kernel against the reference kernel.
inline void expect_cpu_matches_reference(const NodeCase& c, const std::vector<Tensor>& inputs, double tol,
                                         const std::string& what = "", int threads = 1,
                                         std::vector<bool> constant = {}) {
  auto want = c.run(ref_reg(), inputs, 1, constant);
  ASSERT_TRUE(want.ok()) << what << ": reference: " << want.status().to_string();
  auto got = c.run(cpu_reg(), inputs, threads, constant);
  ASSERT_TRUE(got.ok()) << what << ": cpu: " << got.status().to_string();
  ASSERT_EQ(got->size(), want->size()) << what;
  for (size_t k = 0; k < got->size(); ++k) {
    if (!(*want)[k].defined()) continue;
    EXPECT_TRUE(close_tensor((*got)[k], (*want)[k], tol)) << what << " output " << k;
  }
}

// Uniform float32 values in [lo, hi).
inline Tensor uniform_f32(const Shape& s, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  Tensor t = Tensor::empty(DType::kFloat32, s);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = d(rng);
  return t;
}

// Uniform int64 values in [lo, hi].
inline Tensor uniform_i64(const Shape& s, std::mt19937& rng, int64_t lo, int64_t hi) {
  Tensor t = Tensor::empty(DType::kInt64, s);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  for (int64_t k = 0; k < t.numel(); ++k) t.data<int64_t>()[k] = d(rng);
  return t;
}

}  // namespace streamline::ops::testing
