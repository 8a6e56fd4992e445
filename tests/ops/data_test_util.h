#pragma once
// Helpers for the data-movement kernel tests: a one-node graph builder, the CPU and reference
// registries, random tensors and exact/approximate tensor comparison.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/evaluator.h"

namespace streamline::ops::testing {

inline const KernelRegistry& cpu_reg() {
  static const KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    const Status s = register_cpu_kernels(*reg);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return reg;
  }();
  return *r;
}

inline const KernelRegistry& ref_reg() {
  static const KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    const Status s = register_reference_kernels(*reg);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return reg;
  }();
  return *r;
}

// One node of `op` at `opset` with `num_inputs` inputs (false in `present` marks an omitted optional
// input) and `num_outputs` outputs.
class OneNode {
 public:
  OneNode(const std::string& op, int opset, size_t num_inputs, size_t num_outputs = 1, std::vector<bool> present = {}) {
    g_.opsets[""] = opset;
    std::vector<graph::ValueId> ins, outs;
    for (size_t i = 0; i < num_inputs; ++i) {
      const bool here = present.empty() || present[i];
      ins.push_back(here ? g_.add_value("in" + std::to_string(i)) : graph::kNoValue);
    }
    for (size_t i = 0; i < num_outputs; ++i) outs.push_back(g_.add_value("out" + std::to_string(i)));
    id_ = g_.add_node(op, op + "_node", ins, outs);
    g_.node(id_).opset = opset;
  }
  OneNode& i(const std::string& k, int64_t v) {
    return set(k, graph::Attribute::Kind::kInt, [&](auto& a) { a.i = v; });
  }
  OneNode& f(const std::string& k, float v) {
    return set(k, graph::Attribute::Kind::kFloat, [&](auto& a) { a.f = v; });
  }
  OneNode& s(const std::string& k, const std::string& v) {
    return set(k, graph::Attribute::Kind::kString, [&](auto& a) { a.s = v; });
  }
  OneNode& ints(const std::string& k, std::vector<int64_t> v) {
    return set(k, graph::Attribute::Kind::kInts, [&](auto& a) { a.ints = v; });
  }
  OneNode& floats(const std::string& k, std::vector<float> v) {
    return set(k, graph::Attribute::Kind::kFloats, [&](auto& a) { a.floats = v; });
  }
  OneNode& t(const std::string& k, Tensor v) {
    return set(k, graph::Attribute::Kind::kTensor, [&](auto& a) { a.t = v; });
  }

  const graph::Graph& graph() const { return g_; }
  const graph::Node& node() const { return g_.node(id_); }

  Result<std::vector<Tensor>> run(const KernelRegistry& reg, const std::vector<Tensor>& inputs,
                                  const EvalOptions& opt = {}) const {
    return evaluate_node(reg, g_, node(), inputs, opt);
  }
  Result<std::vector<Tensor>> cpu(const std::vector<Tensor>& inputs, int threads = 1) const {
    EvalOptions o;
    o.num_threads = threads;
    return run(cpu_reg(), inputs, o);
  }
  Result<std::vector<Tensor>> ref(const std::vector<Tensor>& inputs) const { return run(ref_reg(), inputs); }

  // The CPU kernel itself, for reshape()-level checks (known_values, inplace, layouts).
  Result<std::unique_ptr<Kernel>> kernel(const std::vector<Tensor>& constants) const {
    std::vector<const Tensor*> c;
    std::vector<DType> d;
    for (const auto& t : constants) {
      c.push_back(t.defined() ? &t : nullptr);
      d.push_back(t.dtype());
    }
    SL_ASSIGN_OR_RETURN(const KernelDef* def,
                        cpu_reg().find(node().op_type, "", node().opset, Device::kCpu, selector_dtype(d, 0)));
    return def->create(KernelCreateArgs{g_, node(), c, d, {}});
  }

 private:
  template <typename F>
  OneNode& set(const std::string& k, graph::Attribute::Kind kind, F fill) {
    graph::Attribute a;
    a.kind = kind;
    fill(a);
    g_.node(id_).attrs[k] = a;
    return *this;
  }
  graph::Graph g_;
  graph::NodeId id_ = graph::kNoNode;
};

inline TensorInfo info_of(const Tensor& t, bool constant = true) {
  TensorInfo i;
  i.dtype = t.dtype();
  i.shape = t.shape();
  i.layout = t.layout();
  i.value = constant ? &t : nullptr;
  return i;
}

template <typename T>
Tensor vec(std::vector<T> v) {
  return Tensor::from_vector<T>(Shape{static_cast<int64_t>(v.size())}, v);
}
inline Tensor i64(std::vector<int64_t> v) {
  return vec<int64_t>(std::move(v));
}

// Random values of `dtype` (float32, int64, int32, uint8, bool ...).
inline Tensor random_tensor(DType dtype, const Shape& shape, std::mt19937& rng) {
  Tensor t = Tensor::empty(dtype, shape);
  std::uniform_int_distribution<int> bytes(0, 255);
  std::uniform_real_distribution<float> real(-10.f, 10.f);
  for (int64_t k = 0; k < t.numel(); ++k) {
    switch (dtype) {
      case DType::kFloat32:
        t.data<float>()[k] = real(rng);
        break;
      case DType::kInt64:
        t.data<int64_t>()[k] = static_cast<int64_t>(rng()) - (int64_t{1} << 31);
        break;
      case DType::kInt32:
        t.data<int32_t>()[k] = static_cast<int32_t>(rng());
        break;
      case DType::kBool:
        t.data<uint8_t>()[k] = static_cast<uint8_t>(bytes(rng) & 1);
        break;
      default:
        for (size_t b = 0; b < dtype_size(dtype); ++b)
          static_cast<uint8_t*>(t.raw())[static_cast<size_t>(k) * dtype_size(dtype) + b] =
              static_cast<uint8_t>(bytes(rng));
    }
  }
  return t;
}

inline Shape random_shape(std::mt19937& rng, int min_rank, int max_rank, int64_t max_dim) {
  std::uniform_int_distribution<int> rank(min_rank, max_rank);
  std::uniform_int_distribution<int64_t> dim(1, max_dim);
  Shape s;
  const int r = rank(rng);
  for (int i = 0; i < r; ++i) s.push_back(dim(rng));
  return s;
}

// Same dtype and shape, and the same elements: bytewise for integers, within `tol` for float32.
inline ::testing::AssertionResult same_tensor(const Tensor& got, const Tensor& want, double tol = 0.0) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return ::testing::AssertionFailure() << "got " << got.describe() << ", want " << want.describe();
  if (got.dtype() == DType::kFloat32) {
    for (int64_t k = 0; k < got.numel(); ++k) {
      const float a = got.data<float>()[k], b = want.data<float>()[k];
      if (!(std::fabs(a - b) <= tol * (1.0 + std::fabs(b))))
        return ::testing::AssertionFailure() << "element " << k << ": got " << a << ", want " << b;
    }
    return ::testing::AssertionSuccess();
  }
  if (std::memcmp(got.raw(), want.raw(), got.nbytes()) != 0) {
    for (int64_t k = 0; k < got.numel(); ++k)
      if (element_as_double(got, k) != element_as_double(want, k))
        return ::testing::AssertionFailure()
               << "element " << k << ": got " << element_as_double(got, k) << ", want " << element_as_double(want, k);
    return ::testing::AssertionFailure() << "bytes differ";
  }
  return ::testing::AssertionSuccess();
}

template <typename T>
std::vector<T> values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

}  // namespace streamline::ops::testing
