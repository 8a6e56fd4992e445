#pragma once
// The kernel tests' one helper (tests/ops, and the graph, runtime and CUDA tests that reuse it): the
// CPU and reference registries (a test that needs them takes these rather than building its own),
// attributes, random tensors, one-node graphs, ways to run them (evaluator, eager interpreter) and
// the comparisons the tests assert with. Everything is in streamline::ops::testing; the registries
// are built once per test binary.
//
//   using namespace streamline::ops::testing;
//   std::mt19937 rng(1);
//   // One node, optimised kernel against the reference kernel, output 0:
//   compare("Conv", "", {random_tensor({1, 3, 8, 8}, rng), random_tensor({4, 3, 3, 3}, rng)},
//           {{"pads", ints({1, 1, 1, 1})}});
//   // Every output, any dtype, a fluent builder:
//   NodeCase c("LSTM", 14, 3, 3);
//   c.i("hidden_size", 4).s("direction", "bidirectional");
//   expect_cpu_matches_reference(c, {x, w, r}, 1e-4);
//   // An OpCase through both registries with a tolerance:
//   EXPECT_TRUE(match_reference({"Add", 13}, {a, b}, {.atol = 1e-6}));
//   // Whole values (sequences, optionals, strings) through the eager interpreter:
//   auto outs = run_node({"SequenceAt", "", 11}, {AnyValue::sequence({a, b}, DType::kFloat32), pos});

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ops/eager.h"
#include "ops/evaluator.h"
#include "ops/registry.h"

namespace streamline::ops::testing {

// 1. Registries: every optimised CPU kernel, and the plain reference kernels they are checked against.
const KernelRegistry& cpu_reg();
const KernelRegistry& ref_reg();

// 2. Attributes.
graph::Attribute one_int(int64_t v);
graph::Attribute one_float(float v);
graph::Attribute str(std::string s);
graph::Attribute ints(std::vector<int64_t> v);
graph::Attribute floats(std::vector<float> v);
graph::Attribute strs(std::vector<std::string> v);
graph::Attribute tensor_attr(Tensor t);

// 3. Tensors.
// Float32 values uniform in [lo, hi).
Tensor random_tensor(const Shape& s, std::mt19937& rng, float lo = -1.f, float hi = 1.f);
// Uniform random values of `dt`: floats in [lo, hi), integers in [lo, hi], bools 0/1.
Tensor random_tensor(DType dt, const Shape& shape, std::mt19937& rng, double lo = -3.0, double hi = 3.0);
// Values over most of the range of `dt`: float32 in [-10, 10), int64 and int32 over 32 bits, bools
// 0/1, other dtypes random bytes (for kernels that move data without reading it).
Tensor random_full(DType dt, const Shape& shape, std::mt19937& rng);
// Int64 values uniform in [lo, hi].
Tensor uniform_i64(const Shape& s, std::mt19937& rng, int64_t lo, int64_t hi);
// A bool tensor with each element true with probability `p_true`.
Tensor random_bool(const Shape& s, std::mt19937& rng, double p_true);
// A random shape of rank [min_rank, max_rank] with dims in [1, max_dim].
Shape random_shape(std::mt19937& rng, int min_rank, int max_rank, int64_t max_dim);
// A shape that broadcasts to `out`: a random suffix of it with some dims set to 1.
Shape broadcast_partner(std::mt19937& rng, const Shape& out);

template <typename T>
Tensor vec(std::vector<T> v) {
  return Tensor::from_vector<T>(Shape{static_cast<int64_t>(v.size())}, v);
}
inline Tensor i64(std::vector<int64_t> v) {
  return vec<int64_t>(std::move(v));
}
inline Tensor int64_tensor(const Shape& s, const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>(s, v);
}
template <typename T>
std::vector<T> values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}
// `t` as a kernel sees it at reshape; `constant` hands its values over too.
TensorInfo info_of(const Tensor& t, bool constant = true);

// 4. Comparisons. Each keeps the tolerance model its tests were written against.
// Float32 only: max |got - want| within rel * max(max |want|, 1e-3).
void expect_close(const Tensor& got, const Tensor& want, double rel = 1e-4);
// Float32 only: |got - want| <= rel * max(max |want|, floor) over the finite values; infinities must
// match exactly, NaN must not appear.
void expect_same_values(const Tensor& got, const Tensor& want, double rel, const std::string& what,
                        double floor = 1e-3);
// Integers and bools exactly, floats within atol + rtol * |want|; NaN matches NaN.
::testing::AssertionResult tensors_near(const Tensor& got, const Tensor& want, double atol, double rtol);
// Same dtype and shape; float32 within tol * (1 + |want|), every other dtype bytewise.
::testing::AssertionResult same_tensor(const Tensor& got, const Tensor& want, double tol = 0.0);
// Same dtype and shape; floating values within tol * (1 + |want|) (NaN matches NaN), others exact.
::testing::AssertionResult close_tensor(const Tensor& got, const Tensor& want, double tol);
// Whether `s` failed with `code` and its message holds every one of `parts`.
::testing::AssertionResult fails_with(const Status& s, StatusCode code, std::vector<std::string> parts);

// 5. One-node graphs run through ops::evaluate_node.

// 5a. A float32 node built from its inputs' shapes; undefined tensors in `inputs` become omitted
// optional inputs. `symbolic_x` declares input 0 with a symbolic batch, `unknown_x` without a shape.
struct OneNode {
  graph::Graph g;
  graph::NodeId id = graph::kNoNode;
  const graph::Node& node() const { return g.node(id); }
};
std::unique_ptr<OneNode> make_node(const std::string& op, const std::string& domain, const std::vector<Tensor>& inputs,
                                   std::map<std::string, graph::Attribute> attrs, bool symbolic_x = false,
                                   bool unknown_x = false);

// How compare() runs the optimised kernel.
struct RunOpts {
  bool channels_last = false;  // hand rank-4 activations over channels-last
  bool blocked = false;        // hand rank-4 activations over in a blocked layout where the kernel prefers it
  int block = 8;               // its channels per block: 8 (nChw8c) or 16 (nChw16c)
  bool const_weights = true;   // input 1 is constant at create
  int threads = 1;             // threads of the optimised run
  bool symbolic_x = false;     // input 0 declared with a symbolic batch
  bool unknown_x = false;      // input 0 declared without a shape
  // Per input: constant at create. Empty: input 1 as const_weights says, input 2 constant, rest not.
  std::vector<bool> constant_mask;
};
// Runs the node on the optimised and the reference registry and compares output 0 (expect_close).
void compare(const std::string& op, const std::string& domain, const std::vector<Tensor>& inputs,
             std::map<std::string, graph::Attribute> attrs, const RunOpts& o = {});

// 5b. A fluent builder: `num_inputs` inputs of open type ("in0", ...; false in `present` marks an
// omitted optional input), `num_outputs` outputs, attributes set one by one.
class NodeCase {
 public:
  NodeCase(const std::string& op, int opset, size_t num_inputs, size_t num_outputs = 1, std::vector<bool> present = {},
           const std::string& domain = "");
  NodeCase& i(const std::string& k, int64_t v);
  NodeCase& f(const std::string& k, float v);
  NodeCase& s(const std::string& k, const std::string& v);
  NodeCase& ints(const std::string& k, std::vector<int64_t> v);
  NodeCase& floats(const std::string& k, std::vector<float> v);
  NodeCase& tensor(const std::string& k, const Tensor& v);
  NodeCase& strings(const std::string& k, std::vector<std::string> v);

  const graph::Graph& graph() const { return g_; }
  const graph::Node& node() const { return g_.node(id_); }

  // Runs on `reg`; only the inputs listed in `constant` are seen as constants at create and reshape.
  Result<std::vector<Tensor>> run(const KernelRegistry& reg, const std::vector<Tensor>& inputs, int threads = 1,
                                  std::vector<bool> constant = {}) const;
  // Runs on `reg` with `options` as given (an empty constant_mask: every input constant).
  Result<std::vector<Tensor>> run(const KernelRegistry& reg, const std::vector<Tensor>& inputs,
                                  const EvalOptions& options) const;
  // The CPU and the reference registry, every input constant.
  Result<std::vector<Tensor>> cpu(const std::vector<Tensor>& inputs, int threads = 1) const;
  Result<std::vector<Tensor>> ref(const std::vector<Tensor>& inputs) const;
  // The CPU kernel itself, for reshape()-level checks (known_values, inplace, layouts).
  Result<std::unique_ptr<Kernel>> kernel(const std::vector<Tensor>& constants) const;

 private:
  NodeCase& set(const std::string& k, graph::Attribute a);
  graph::Graph g_;
  graph::NodeId id_ = graph::kNoNode;
};
// Every output of the CPU kernel against the reference kernel (close_tensor).
void expect_cpu_matches_reference(const NodeCase& c, const std::vector<Tensor>& inputs, double tol,
                                  const std::string& what = "", int threads = 1, std::vector<bool> constant = {});

// 5c. An op at an opset with attributes and a number of outputs; inputs keep their dtypes.
struct OpCase {
  OpCase(std::string op_type, int op_opset = 13, std::map<std::string, graph::Attribute> op_attrs = {},
         int outputs = 1)  // NOLINT(google-explicit-constructor): {"Add", 13} reads best in tests
      : op(std::move(op_type)), opset(op_opset), attrs(std::move(op_attrs)), num_outputs(outputs) {}
  std::string op;
  int opset;
  std::map<std::string, graph::Attribute> attrs;
  int num_outputs;
};
struct Tolerance {
  double atol = 1e-6;  // absolute part of the bound
  double rtol = 1e-5;  // part of |want| added to it
};
// "x0", "y1", ...
std::string value_name(char prefix, size_t i);
// Runs one node. Inputs are non-constant unless `options.constant_mask` says otherwise; an undefined
// Tensor stands for an omitted optional input.
Result<std::vector<Tensor>> run_op(const KernelRegistry& reg, const OpCase& c, const std::vector<Tensor>& inputs,
                                   EvalOptions options = {});
// Runs `c` through the CPU and the reference registries and compares every output (tensors_near).
::testing::AssertionResult match_reference(const OpCase& c, const std::vector<Tensor>& inputs, Tolerance tol = {},
                                           EvalOptions options = {});

// 5d. One default-domain node of `opset` with declared input shapes. `outputs[i]` says whether output
// i is requested (a trailing run of false drops those outputs; one in the middle becomes an omitted
// output). Every input is non-constant.
Result<std::vector<Tensor>> run_one(const KernelRegistry& reg, const std::string& op, int opset,
                                    const std::vector<Tensor>& inputs, std::map<std::string, graph::Attribute> attrs,
                                    const std::vector<bool>& outputs = {true}, int threads = 1);

// 6. Whole values (tensors, sequences, optionals, string tensors) through the eager interpreter.
struct NodeSpec {
  std::string op;
  std::string domain;
  int opset = 0;
  std::map<std::string, graph::Attribute> attrs;
  int outputs = 1;
};
// A graph of one node whose inputs are graph inputs of open type ("in0", "in1", ...; an undefined
// value is an omitted input); outputs "y0", "y1", ... The node is named "node0".
graph::Graph one_node_graph(const NodeSpec& spec, const std::vector<AnyValue>& inputs);
// Runs a graph through a SubgraphRunner (kernels made for the values it gets).
Result<std::vector<AnyValue>> run_values(graph::Graph g, const std::vector<AnyValue>& inputs);
Result<std::vector<AnyValue>> run_node(const NodeSpec& spec, const std::vector<AnyValue>& inputs);

}  // namespace streamline::ops::testing
