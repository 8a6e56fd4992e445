#pragma once
// Test helpers for the math kernel families: build a one-node graph, run it through a registry with
// ops::evaluate_node, and compare the optimised CPU kernels against the reference kernels.
//
//   OpCase c{"Add", 13};
//   auto outs = run_op(cpu_registry(), c, {a, b});
//   EXPECT_TRUE(match_reference(c, {a, b}, {.atol = 1e-6}));

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ops/evaluator.h"
#include "ops/registry.h"

namespace streamline::ops::testing {

inline graph::Attribute attr_i(int64_t v) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kInt;
  a.i = v;
  return a;
}
inline graph::Attribute attr_f(float v) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kFloat;
  a.f = v;
  return a;
}
inline graph::Attribute attr_s(std::string v) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kString;
  a.s = std::move(v);
  return a;
}
inline graph::Attribute attr_ints(std::vector<int64_t> v) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}

struct OpCase {
  OpCase(std::string op_type, int op_opset = 13, std::map<std::string, graph::Attribute> op_attrs = {},
         int outputs = 1)  // NOLINT(google-explicit-constructor): {"Add", 13} reads best in tests
      : op(std::move(op_type)), opset(op_opset), attrs(std::move(op_attrs)), num_outputs(outputs) {}
  std::string op;
  int opset;
  std::map<std::string, graph::Attribute> attrs;
  int num_outputs;
};

inline const KernelRegistry& cpu_registry() {
  static const KernelRegistry* reg = [] {
    auto* r = new KernelRegistry();
    const Status s = register_cpu_kernels(*r);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return r;
  }();
  return *reg;
}

inline const KernelRegistry& ref_registry() {
  static const KernelRegistry* reg = [] {
    auto* r = new KernelRegistry();
    const Status s = register_reference_kernels(*r);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return r;
  }();
  return *reg;
}

// "x0", "y1", ... (built with append: GCC 12 warns falsely on `"x" + std::to_string(i)` at -O3).
inline std::string value_name(char prefix, size_t i) {
  std::string s(1, prefix);
  s.append(std::to_string(i));
  return s;
}

// Runs one node. Inputs are non-constant unless `options.constant_mask` says otherwise; an undefined
// Tensor stands for an omitted optional input.
inline Result<std::vector<Tensor>> run_op(const KernelRegistry& reg, const OpCase& c, const std::vector<Tensor>& inputs,
                                          EvalOptions options = {}) {
  graph::Graph g;
  g.opsets[""] = c.opset;
  std::vector<graph::ValueId> ins, outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      ins.push_back(graph::kNoValue);
      continue;
    }
    ins.push_back(g.add_value(value_name('x', i), inputs[i].dtype()));
  }
  for (int k = 0; k < c.num_outputs; ++k) outs.push_back(g.add_value(value_name('y', static_cast<size_t>(k))));
  const graph::NodeId id = g.add_node(c.op, "node0", ins, outs);
  g.node(id).attrs = c.attrs;
  if (options.constant_mask.empty()) options.constant_mask.assign(inputs.size(), false);
  return evaluate_node(reg, g, g.node(id), inputs, options);
}

// Uniform random tensor: floats in [lo, hi), integers in [lo, hi], bools 0/1.
inline Tensor random_tensor(DType dt, const Shape& shape, std::mt19937& rng, double lo = -3.0, double hi = 3.0) {
  Tensor t = Tensor::empty(dt, shape);
  std::uniform_real_distribution<double> real(lo, hi);
  std::uniform_int_distribution<int64_t> integer(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (dt) {
      case DType::kFloat32:
        t.data<float>()[i] = static_cast<float>(real(rng));
        break;
      case DType::kFloat64:
        t.data<double>()[i] = real(rng);
        break;
      case DType::kInt32:
        t.data<int32_t>()[i] = static_cast<int32_t>(integer(rng));
        break;
      case DType::kInt64:
        t.data<int64_t>()[i] = integer(rng);
        break;
      case DType::kBool:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(rng() & 1u);
        break;
      case DType::kUInt8:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(integer(rng));
        break;
      case DType::kUInt16:
        t.data<uint16_t>()[i] = static_cast<uint16_t>(integer(rng));
        break;
      case DType::kUInt32:
        t.data<uint32_t>()[i] = static_cast<uint32_t>(integer(rng));
        break;
      case DType::kUInt64:
        t.data<uint64_t>()[i] = static_cast<uint64_t>(integer(rng));
        break;
      default:
        ADD_FAILURE() << "random_tensor: unsupported dtype " << dtype_name(dt);
    }
  }
  return t;
}

// Element-wise comparison; integers and bools exactly, floats within atol + rtol * |want|, NaN == NaN.
inline ::testing::AssertionResult tensors_near(const Tensor& got, const Tensor& want, double atol, double rtol) {
  if (got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << "dtype " << dtype_name(got.dtype()) << " vs " << dtype_name(want.dtype());
  if (got.shape() != want.shape())
    return ::testing::AssertionFailure() << "shape " << got.shape().to_string() << " vs " << want.shape().to_string();
  const bool is_float = got.dtype() == DType::kFloat32 || got.dtype() == DType::kFloat64 ||
                        got.dtype() == DType::kFloat16 || got.dtype() == DType::kBFloat16;
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (is_float) {
      const double g = element_as_double(got, i), w = element_as_double(want, i);
      if (std::isnan(g) && std::isnan(w)) continue;
      if (std::isinf(w) && g == w) continue;
      if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w)))
        return ::testing::AssertionFailure() << "element " << i << ": got " << g << ", want " << w;
    } else if (element_as_int64(got, i) != element_as_int64(want, i) ||
               (got.dtype() == DType::kUInt64 && got.data<uint64_t>()[i] != want.data<uint64_t>()[i])) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << element_as_int64(got, i) << ", want " << element_as_int64(want, i);
    }
  }
  return ::testing::AssertionSuccess();
}

struct Tolerance {
  double atol = 1e-6;
  double rtol = 1e-5;
};

// Runs `c` through the CPU and the reference registries and compares every output.
inline ::testing::AssertionResult match_reference(const OpCase& c, const std::vector<Tensor>& inputs,
                                                  Tolerance tol = {}, EvalOptions options = {}) {
  auto got = run_op(cpu_registry(), c, inputs, options);
  if (!got.ok()) return ::testing::AssertionFailure() << c.op << " (cpu): " << got.status().to_string();
  EvalOptions ref_options = options;
  ref_options.input_layout = Layout::kPlain;
  ref_options.num_threads = 1;
  auto want = run_op(ref_registry(), c, inputs, ref_options);
  if (!want.ok()) return ::testing::AssertionFailure() << c.op << " (reference): " << want.status().to_string();
  if (got->size() != want->size())
    return ::testing::AssertionFailure() << c.op << ": " << got->size() << " outputs vs " << want->size();
  for (size_t k = 0; k < got->size(); ++k) {
    auto r = tensors_near((*got)[k], (*want)[k], tol.atol, tol.rtol);
    if (!r) {
      std::string shapes;
      for (const auto& t : inputs) shapes += (t.defined() ? t.describe() : std::string("none")) + " ";
      return ::testing::AssertionFailure()
             << c.op << " opset " << c.opset << " output " << k << " inputs " << shapes << "layout "
             << layout_name(options.input_layout) << " threads " << options.num_threads << ": " << r.message();
    }
  }
  return ::testing::AssertionSuccess();
}

// A random shape of rank [min_rank, max_rank] with dims in [1, max_dim].
inline Shape random_shape(std::mt19937& rng, int min_rank, int max_rank, int64_t max_dim) {
  const int r = std::uniform_int_distribution<int>(min_rank, max_rank)(rng);
  Shape s;
  for (int i = 0; i < r; ++i) s.push_back(std::uniform_int_distribution<int64_t>(1, max_dim)(rng));
  return s;
}

// A shape that broadcasts to `out`: a random suffix of it with some dims set to 1.
inline Shape broadcast_partner(std::mt19937& rng, const Shape& out) {
  const size_t drop = std::uniform_int_distribution<size_t>(0, out.rank())(rng);
  Shape s;
  for (size_t i = drop; i < out.rank(); ++i) s.push_back((rng() % 3 == 0) ? 1 : out[i]);
  return s;
}

}  // namespace streamline::ops::testing
