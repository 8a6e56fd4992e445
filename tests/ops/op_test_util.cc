// The kernel tests' helper (op_test_util.h): bodies, in the order of the header's sections.

#include "ops/op_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

namespace streamline::ops::testing {

// 1. Registries.

const KernelRegistry& cpu_reg() {
  static const KernelRegistry* reg = [] {
    auto* r = new KernelRegistry();
    const Status s = register_cpu_kernels(*r);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return r;
  }();
  return *reg;
}

const KernelRegistry& ref_reg() {
  static const KernelRegistry* reg = [] {
    auto* r = new KernelRegistry();
    const Status s = register_reference_kernels(*r);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return r;
  }();
  return *reg;
}

// 2. Attributes.

namespace {
graph::Attribute attribute(graph::Attribute::Kind kind) {
  graph::Attribute a;
  a.kind = kind;
  return a;
}
}  // namespace

graph::Attribute one_int(int64_t v) {
  graph::Attribute a = attribute(graph::Attribute::Kind::kInt);
  a.i = v;
  return a;
}
graph::Attribute one_float(float v) {
  graph::Attribute a = attribute(graph::Attribute::Kind::kFloat);
  a.f = v;
  return a;
}
graph::Attribute str(std::string s) {
  graph::Attribute a = attribute(graph::Attribute::Kind::kString);
  a.s = std::move(s);
  return a;
}
graph::Attribute ints(std::vector<int64_t> v) {
  graph::Attribute a = attribute(graph::Attribute::Kind::kInts);
  a.ints = std::move(v);
  return a;
}
graph::Attribute floats(std::vector<float> v) {
  graph::Attribute a = attribute(graph::Attribute::Kind::kFloats);
  a.floats = std::move(v);
  return a;
}
graph::Attribute strs(std::vector<std::string> v) {
  graph::Attribute a = attribute(graph::Attribute::Kind::kStrings);
  a.strings = std::move(v);
  return a;
}
graph::Attribute tensor_attr(Tensor t) {
  graph::Attribute a = attribute(graph::Attribute::Kind::kTensor);
  a.t = std::move(t);
  return a;
}

// 3. Tensors.

Tensor random_tensor(const Shape& s, std::mt19937& rng, float lo, float hi) {
  Tensor t = Tensor::empty(DType::kFloat32, s);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

Tensor random_tensor(DType dt, const Shape& shape, std::mt19937& rng, double lo, double hi) {
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

Tensor random_full(DType dt, const Shape& shape, std::mt19937& rng) {
  Tensor t = Tensor::empty(dt, shape);
  std::uniform_int_distribution<int> bytes(0, 255);
  std::uniform_real_distribution<float> real(-10.f, 10.f);
  for (int64_t k = 0; k < t.numel(); ++k) {
    switch (dt) {
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
        for (size_t b = 0; b < dtype_size(dt); ++b)
          static_cast<uint8_t*>(t.raw())[static_cast<size_t>(k) * dtype_size(dt) + b] =
              static_cast<uint8_t>(bytes(rng));
    }
  }
  return t;
}

Tensor uniform_i64(const Shape& s, std::mt19937& rng, int64_t lo, int64_t hi) {
  Tensor t = Tensor::empty(DType::kInt64, s);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  for (int64_t k = 0; k < t.numel(); ++k) t.data<int64_t>()[k] = d(rng);
  return t;
}

Tensor random_bool(const Shape& s, std::mt19937& rng, double p_true) {
  Tensor t = Tensor::empty(DType::kBool, s);
  std::bernoulli_distribution dist(p_true);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = dist(rng) ? 1 : 0;
  return t;
}

Shape random_shape(std::mt19937& rng, int min_rank, int max_rank, int64_t max_dim) {
  const int r = std::uniform_int_distribution<int>(min_rank, max_rank)(rng);
  Shape s;
  for (int i = 0; i < r; ++i) s.push_back(std::uniform_int_distribution<int64_t>(1, max_dim)(rng));
  return s;
}

Shape broadcast_partner(std::mt19937& rng, const Shape& out) {
  const size_t drop = std::uniform_int_distribution<size_t>(0, out.rank())(rng);
  Shape s;
  for (size_t i = drop; i < out.rank(); ++i) s.push_back((rng() % 3 == 0) ? 1 : out[i]);
  return s;
}

TensorInfo info_of(const Tensor& t, bool constant) {
  TensorInfo i;
  i.dtype = t.dtype();
  i.shape = t.shape();
  i.layout = t.layout();
  i.value = constant ? &t : nullptr;
  return i;
}

// 4. Comparisons.

void expect_close(const Tensor& got, const Tensor& want, double rel) {
  ASSERT_EQ(got.shape(), want.shape());
  double max_ref = 0.0, max_diff = 0.0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    max_ref = std::max(max_ref, std::fabs(double(want.data<float>()[i])));
    max_diff = std::max(max_diff, std::fabs(double(got.data<float>()[i]) - want.data<float>()[i]));
  }
  EXPECT_LE(max_diff, rel * std::max(max_ref, 1e-3)) << "max ref " << max_ref;
}

void expect_same_values(const Tensor& got, const Tensor& want, double rel, const std::string& what, double floor) {
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

namespace {
bool is_floating(DType dt) {
  return dt == DType::kFloat32 || dt == DType::kFloat64 || dt == DType::kFloat16 || dt == DType::kBFloat16;
}
}  // namespace

::testing::AssertionResult tensors_near(const Tensor& got, const Tensor& want, double atol, double rtol) {
  if (got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << "dtype " << dtype_name(got.dtype()) << " vs " << dtype_name(want.dtype());
  if (got.shape() != want.shape())
    return ::testing::AssertionFailure() << "shape " << got.shape().to_string() << " vs " << want.shape().to_string();
  const bool is_float = is_floating(got.dtype());
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

::testing::AssertionResult same_tensor(const Tensor& got, const Tensor& want, double tol) {
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

::testing::AssertionResult close_tensor(const Tensor& got, const Tensor& want, double tol) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return ::testing::AssertionFailure() << "got " << got.describe() << ", want " << want.describe();
  const bool fp = is_floating(got.dtype());
  for (int64_t k = 0; k < got.numel(); ++k) {
    const double a = element_as_double(got, k), b = element_as_double(want, k);
    if (fp && std::isnan(a) && std::isnan(b)) continue;
    const bool ok = fp ? (a == b || std::fabs(a - b) <= tol * (1.0 + std::fabs(b))) : a == b;
    if (!ok) return ::testing::AssertionFailure() << "element " << k << ": got " << a << ", want " << b;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult fails_with(const Status& s, StatusCode code, std::vector<std::string> parts) {
  if (s.ok()) return ::testing::AssertionFailure() << "succeeded";
  if (s.code() != code) return ::testing::AssertionFailure() << "wrong code: " << s.to_string();
  for (const std::string& p : parts)
    if (s.message().find(p) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << p << "' missing from: " << s.to_string();
  return ::testing::AssertionSuccess();
}

// 5a. Float32 nodes from input shapes, compare().

std::unique_ptr<OneNode> make_node(const std::string& op, const std::string& domain, const std::vector<Tensor>& inputs,
                                   std::map<std::string, graph::Attribute> attrs, bool symbolic_x, bool unknown_x) {
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

void compare(const std::string& op, const std::string& domain, const std::vector<Tensor>& inputs,
             std::map<std::string, graph::Attribute> attrs, const RunOpts& o) {
  auto n = make_node(op, domain, inputs, std::move(attrs), o.symbolic_x, o.unknown_x);
  EvalOptions eo;
  eo.num_threads = o.threads;
  eo.input_layout = o.blocked ? blocked_layout(o.block) : o.channels_last ? Layout::kChannelsLast : Layout::kPlain;
  eo.kernel_options.blocked_channels = o.block;
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

// 5b. NodeCase.

NodeCase::NodeCase(const std::string& op, int opset, size_t num_inputs, size_t num_outputs, std::vector<bool> present,
                   const std::string& domain) {
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

NodeCase& NodeCase::set(const std::string& k, graph::Attribute a) {
  g_.node(id_).attrs[k] = std::move(a);
  return *this;
}
NodeCase& NodeCase::i(const std::string& k, int64_t v) {
  return set(k, one_int(v));
}
NodeCase& NodeCase::f(const std::string& k, float v) {
  return set(k, one_float(v));
}
NodeCase& NodeCase::s(const std::string& k, const std::string& v) {
  return set(k, str(v));
}
NodeCase& NodeCase::ints(const std::string& k, std::vector<int64_t> v) {
  return set(k, testing::ints(std::move(v)));
}
NodeCase& NodeCase::floats(const std::string& k, std::vector<float> v) {
  return set(k, testing::floats(std::move(v)));
}
NodeCase& NodeCase::tensor(const std::string& k, const Tensor& v) {
  return set(k, tensor_attr(v));
}
NodeCase& NodeCase::strings(const std::string& k, std::vector<std::string> v) {
  return set(k, strs(std::move(v)));
}

Result<std::vector<Tensor>> NodeCase::run(const KernelRegistry& reg, const std::vector<Tensor>& inputs, int threads,
                                          std::vector<bool> constant) const {
  EvalOptions o;
  o.num_threads = threads;
  o.constant_mask = constant.empty() ? std::vector<bool>(inputs.size(), false) : constant;
  return evaluate_node(reg, g_, node(), inputs, o);
}

Result<std::vector<Tensor>> NodeCase::run(const KernelRegistry& reg, const std::vector<Tensor>& inputs,
                                          const EvalOptions& options) const {
  return evaluate_node(reg, g_, node(), inputs, options);
}

Result<std::vector<Tensor>> NodeCase::cpu(const std::vector<Tensor>& inputs, int threads) const {
  EvalOptions o;
  o.num_threads = threads;
  return run(cpu_reg(), inputs, o);
}

Result<std::vector<Tensor>> NodeCase::ref(const std::vector<Tensor>& inputs) const {
  return run(ref_reg(), inputs, EvalOptions{});
}

Result<std::unique_ptr<Kernel>> NodeCase::kernel(const std::vector<Tensor>& constants) const {
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

void expect_cpu_matches_reference(const NodeCase& c, const std::vector<Tensor>& inputs, double tol,
                                  const std::string& what, int threads, std::vector<bool> constant) {
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

// 5c. OpCase.

std::string value_name(char prefix, size_t i) {
  // Built with append: GCC 12 warns falsely on `"x" + std::to_string(i)` at -O3.
  std::string s(1, prefix);
  s.append(std::to_string(i));
  return s;
}

Result<std::vector<Tensor>> run_op(const KernelRegistry& reg, const OpCase& c, const std::vector<Tensor>& inputs,
                                   EvalOptions options) {
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

::testing::AssertionResult match_reference(const OpCase& c, const std::vector<Tensor>& inputs, Tolerance tol,
                                           EvalOptions options) {
  auto got = run_op(cpu_reg(), c, inputs, options);
  if (!got.ok()) return ::testing::AssertionFailure() << c.op << " (cpu): " << got.status().to_string();
  EvalOptions ref_options = options;
  ref_options.input_layout = Layout::kPlain;
  ref_options.num_threads = 1;
  auto want = run_op(ref_reg(), c, inputs, ref_options);
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

// 5d. run_one.

Result<std::vector<Tensor>> run_one(const KernelRegistry& reg, const std::string& op, int opset,
                                    const std::vector<Tensor>& inputs, std::map<std::string, graph::Attribute> attrs,
                                    const std::vector<bool>& outputs, int threads) {
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

// 6. Whole values.

graph::Graph one_node_graph(const NodeSpec& spec, const std::vector<AnyValue>& inputs) {
  graph::Graph g;
  g.opsets[spec.domain] = spec.opset;
  if (!spec.domain.empty()) g.opsets[""] = 18;
  std::vector<graph::ValueId> ins, outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      ins.push_back(graph::kNoValue);
      continue;
    }
    ins.push_back(g.add_value("in" + std::to_string(i)));
    g.add_input(ins.back());
  }
  for (int k = 0; k < spec.outputs; ++k) outs.push_back(g.add_value("y" + std::to_string(k)));
  const graph::NodeId n = g.add_node(spec.op, "node0", ins, outs, spec.domain);
  g.node(n).attrs = spec.attrs;
  for (graph::ValueId v : outs) g.add_output(v);
  return g;
}

Result<std::vector<AnyValue>> run_values(graph::Graph g, const std::vector<AnyValue>& inputs) {
  SubgraphRunner runner(std::make_shared<const graph::Graph>(std::move(g)), {});
  SL_RETURN_IF_ERROR(runner.check_supported());
  return runner.run(inputs, {});
}

Result<std::vector<AnyValue>> run_node(const NodeSpec& spec, const std::vector<AnyValue>& inputs) {
  std::vector<AnyValue> given;
  for (const AnyValue& v : inputs)
    if (v.defined()) given.push_back(v);
  return run_values(one_node_graph(spec, inputs), given);
}

}  // namespace streamline::ops::testing
