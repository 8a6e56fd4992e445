#pragma once
// Helpers for kernel tests: registries with the optimised and the reference kernels, random
// tensors, one-node graphs built by hand, and an optimised-vs-reference comparison.
//
//   using namespace streamline::ops::test_util;
//   std::mt19937 rng(1);
//   compare("Conv", "", {random_tensor({1, 3, 8, 8}, rng), random_tensor({4, 3, 3, 3}, rng)},
//           {{"pads", ints({1, 1, 1, 1})}});

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ops/evaluator.h"
#include "ops/registry.h"

namespace streamline::ops::test_util {

inline const KernelRegistry& cpu_reg() {
  static const KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    EXPECT_TRUE(register_cpu_kernels(*reg).ok());
    return reg;
  }();
  return *r;
}

inline const KernelRegistry& ref_reg() {
  static const KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    EXPECT_TRUE(register_reference_kernels(*reg).ok());
    return reg;
  }();
  return *r;
}

inline Tensor random_tensor(const Shape& s, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  Tensor t = Tensor::empty(DType::kFloat32, s);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

inline graph::Attribute ints(std::vector<int64_t> v) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}
inline graph::Attribute one_int(int64_t v) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kInt;
  a.i = v;
  return a;
}
inline graph::Attribute str(std::string s) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kString;
  a.s = std::move(s);
  return a;
}
inline graph::Attribute floats(std::vector<float> v) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kFloats;
  a.floats = std::move(v);
  return a;
}

// A one-node graph; undefined tensors in `inputs` become omitted optional inputs. `symbolic_x`
// declares input 0 with a symbolic batch, `unknown_x` without a shape.
struct OneNode {
  graph::Graph g;
  graph::NodeId id = graph::kNoNode;
  const graph::Node& node() const { return g.node(id); }
};

inline std::unique_ptr<OneNode> make_node(const std::string& op, const std::string& domain,
                                          const std::vector<Tensor>& inputs,
                                          std::map<std::string, graph::Attribute> attrs, bool symbolic_x = false,
                                          bool unknown_x = false) {
  auto n = std::make_unique<OneNode>();
  n->g.opsets[""] = 13;
  n->g.opsets["streamline"] = 1;
  std::vector<graph::ValueId> ins;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      ins.push_back(graph::kNoValue);
      continue;
    }
    graph::DimList dims;
    for (int64_t d : inputs[i].shape()) dims.push_back(graph::Dim(d));
    if (i == 0 && symbolic_x) dims[0] = graph::Dim::sym("batch");
    std::optional<graph::DimList> decl = dims;
    if (i == 0 && unknown_x) decl.reset();
    ins.push_back(n->g.add_value("in" + std::to_string(i), DType::kFloat32, decl));
  }
  const graph::ValueId y = n->g.add_value("y");
  n->id = n->g.add_node(op, "node0", ins, {y}, domain);
  n->g.node(n->id).attrs = std::move(attrs);
  return n;
}

// Max |a - b| must stay within rel * max |b|.
inline void expect_close(const Tensor& got, const Tensor& want, double rel = 1e-4) {
  ASSERT_EQ(got.shape(), want.shape());
  double max_ref = 0.0, max_diff = 0.0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    max_ref = std::max(max_ref, std::fabs(double(want.data<float>()[i])));
    max_diff = std::max(max_diff, std::fabs(double(got.data<float>()[i]) - want.data<float>()[i]));
  }
  EXPECT_LE(max_diff, rel * std::max(max_ref, 1e-3)) << "max ref " << max_ref;
}

struct RunOpts {
  bool channels_last = false;
  bool blocked = false;  // hand rank-4 activations over in a blocked layout where the kernel prefers it
  int block = 8;         // its channels per block: 8 (nChw8c) or 16 (nChw16c)
  bool const_weights = true;
  int threads = 1;
  bool symbolic_x = false;
  bool unknown_x = false;
  // Per input: constant at create. Empty: input 1 as const_weights says, input 2 constant, rest not.
  std::vector<bool> constant_mask;
};

// Runs the node on the optimised and the reference registry and compares output 0.
inline void compare(const std::string& op, const std::string& domain, const std::vector<Tensor>& inputs,
                    std::map<std::string, graph::Attribute> attrs, const RunOpts& o = {}) {
  auto n = make_node(op, domain, inputs, std::move(attrs), o.symbolic_x, o.unknown_x);
  EvalOptions eo;
  eo.num_threads = o.threads;
  eo.input_layout = o.blocked ? blocked_layout(o.block) : o.channels_last ? Layout::kChannelsLast : Layout::kPlain;
  eo.kernel_options.block = o.block;
  eo.constant_mask.assign(inputs.size(), false);
  if (inputs.size() > 1) eo.constant_mask[1] = o.const_weights;
  if (inputs.size() > 2) eo.constant_mask[2] = true;
  if (!o.constant_mask.empty()) eo.constant_mask = o.constant_mask;
  auto got = evaluate_node(cpu_reg(), n->g, n->node(), inputs, eo);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  auto want = evaluate_node(ref_reg(), n->g, n->node(), inputs);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  ASSERT_EQ(got->size(), want->size());
  expect_close((*got)[0], (*want)[0]);
}

}  // namespace streamline::ops::test_util
