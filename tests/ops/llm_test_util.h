#pragma once
// Helpers for the tests of the opset-23 transformer ops (Attention, RotaryEmbedding,
// RMSNormalization): one-node graphs with inputs of any dtype and a chosen set of outputs, run on
// the optimised and the reference registry, and comparisons that treat -inf as a value.
//
//   auto got = run_one(test_util::cpu_reg(), "Attention", 23, inputs, attrs, {true, false, false, true});
//   expect_same_values(got->at(3), want->at(3), 2e-5, "qk");

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "op_test_util.h"

namespace streamline::ops::llm_test {

// Runs one default-domain node of `opset`. `outputs[i]` says whether output i is requested (a
// trailing run of false drops those outputs; one in the middle becomes an omitted output).
inline Result<std::vector<Tensor>> run_one(const KernelRegistry& reg, const std::string& op, int opset,
                                           const std::vector<Tensor>& inputs,
                                           std::map<std::string, graph::Attribute> attrs,
                                           const std::vector<bool>& outputs = {true}, int threads = 1) {
  graph::Graph g;
  g.opsets[""] = opset;
  std::vector<graph::ValueId> ins, outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      ins.push_back(graph::kNoValue);
      continue;
    }
    graph::DimList dims;
    for (int64_t d : inputs[i].shape()) dims.push_back(graph::Dim(d));
    ins.push_back(g.add_value("in" + std::to_string(i), inputs[i].dtype(), dims));
  }
  size_t last = 0;
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i]) last = i + 1;
  for (size_t i = 0; i < last; ++i)
    outs.push_back(outputs[i] ? g.add_value("out" + std::to_string(i)) : graph::kNoValue);
  const graph::NodeId id = g.add_node(op, "node0", ins, outs);
  g.node(id).attrs = std::move(attrs);
  EvalOptions eo;
  eo.num_threads = threads;
  eo.constant_mask.assign(inputs.size(), false);
  return evaluate_node(reg, g, g.node(id), inputs, eo);
}

// Element-wise |got - want| <= rel * max(max |want|, floor) over the finite values; infinities
// must match exactly, NaN must not appear.
inline void expect_same_values(const Tensor& got, const Tensor& want, double rel, const std::string& what,
                               double floor = 1e-3) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), DType::kFloat32) << what;
  double max_ref = 0.0, max_diff = 0.0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double w = want.data<float>()[i], g = got.data<float>()[i];
    ASSERT_FALSE(std::isnan(g)) << what << ": NaN at " << i;
    if (std::isinf(w) || std::isinf(g)) {
      ASSERT_EQ(g, w) << what << ": at " << i;
      continue;
    }
    max_ref = std::max(max_ref, std::fabs(w));
    max_diff = std::max(max_diff, std::fabs(g - w));
  }
  EXPECT_LE(max_diff, rel * std::max(max_ref, floor)) << what << ": max ref " << max_ref;
}

inline Tensor int64_tensor(const Shape& s, const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>(s, v);
}

// A bool tensor with each element true with probability `p_true`.
inline Tensor random_bool(const Shape& s, std::mt19937& rng, double p_true) {
  Tensor t = Tensor::empty(DType::kBool, s);
  std::bernoulli_distribution dist(p_true);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = dist(rng) ? 1 : 0;
  return t;
}

inline graph::Attribute one_float(float f) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kFloat;
  a.f = f;
  return a;
}

}  // namespace streamline::ops::llm_test
