// Node-by-node execution of a graph (run_eager) and the shape-only walk that tells when a graph
// needs it (probe_shapes). See eager.h.

#include "ops/eager.h"

#include <omp.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "core/allocator.h"
#include "core/layout_convert.h"
#include "ops/cpu/data_common.h"
#include "ops/layout_choice.h"
#include "ops/registry.h"

namespace streamline::ops {
namespace {

// Stand-in values larger than this are not made when probing (the node is taken as value-dependent).
constexpr int64_t kMaxStandInElements = int64_t{1} << 24;
// Why sequences, optionals and strings run eagerly, after what holds one.
constexpr const char* kEagerTypes = ": sequences, optionals and string tensors run node by node";

// The kernel for node n, given the inputs it is about to get (subgraph runners pick by dtype).
using KernelFor = std::function<Result<const Kernel*>(graph::NodeId n, std::span<const AnyValue> inputs)>;

KernelFor from_table(const graph::Graph& g, KernelTable kernels) {
  return [&g, kernels](graph::NodeId n, std::span<const AnyValue>) -> Result<const Kernel*> {
    const Kernel* k = static_cast<size_t>(n) < kernels.size() ? kernels[static_cast<size_t>(n)].get() : nullptr;
    if (!k) return internal_error("no kernel for " + g.node(n).describe());
    return k;
  };
}

// A value of a subgraph that the subgraph does not define: a reference to an enclosing scope.
bool is_outer_reference(const graph::Graph& g, graph::ValueId v) {
  const graph::Value& val = g.value(v);
  return val.producer == graph::kNoNode && !val.constant && !g.is_graph_input(v);
}

// Names a node's subgraphs (recursively) read from the scope the node is in.
void outer_names(const graph::Node& node, std::unordered_set<std::string>& names) {
  for (const auto& [key, attr] : node.attrs) {
    if (attr.kind != graph::Attribute::Kind::kGraph || !attr.g) continue;
    const graph::Graph& sub = *attr.g;
    for (size_t v = 0; v < sub.num_values(); ++v)
      if (is_outer_reference(sub, static_cast<graph::ValueId>(v)))
        names.insert(sub.value(static_cast<graph::ValueId>(v)).name);
    for (size_t n = 0; n < sub.num_nodes(); ++n) {
      const graph::Node& inner = sub.node(static_cast<graph::NodeId>(n));
      if (inner.dead) continue;
      std::unordered_set<std::string> deeper;
      outer_names(inner, deeper);
      for (const auto& name : deeper) {
        const graph::ValueId here = sub.find_value(name);
        if (here == graph::kNoValue || is_outer_reference(sub, here)) names.insert(name);
      }
    }
  }
}

// Per value: how many reads are left (explicit inputs plus names read by subgraphs). Graph outputs
// get one extra read that is never released.
std::vector<int> count_reads(const graph::Graph& g, const std::vector<graph::NodeId>& order) {
  std::vector<int> reads(g.num_values(), 0);
  for (graph::NodeId n : order) {
    const graph::Node& node = g.node(n);
    for (graph::ValueId v : node.inputs)
      if (v != graph::kNoValue) ++reads[static_cast<size_t>(v)];
    std::unordered_set<std::string> names;
    outer_names(node, names);
    for (const auto& name : names) {
      const graph::ValueId v = g.find_value(name);
      if (v != graph::kNoValue) ++reads[static_cast<size_t>(v)];
    }
  }
  for (graph::ValueId v : g.outputs()) ++reads[static_cast<size_t>(v)];
  return reads;
}

// The signature a cached reshape result is found by: per input its dtype, layout and shape, and
// for a constant the address of its data (reshape read that value).
std::vector<int64_t> signature(std::span<const TensorInfo> infos) {
  std::vector<int64_t> s;
  s.reserve(infos.size() * 8);
  for (const TensorInfo& t : infos) {
    s.push_back(static_cast<int64_t>(t.dtype));
    s.push_back(static_cast<int64_t>(t.layout));
    s.push_back(t.shape.rank());
    for (int64_t d : t.shape.dims()) s.push_back(d);
    s.push_back(t.value ? static_cast<int64_t>(reinterpret_cast<intptr_t>(t.value->raw())) : 0);
  }
  return s;
}

// Runs one kernel on known inputs: known values when reshape gives them, otherwise allocated
// outputs and run(). Outputs come back plain. With a cache, reshape is first asked with values for
// the constants alone (`constant[i]`), and that answer, when it gives one, serves every later run
// with the same signature.
Result<std::vector<Tensor>> evaluate(const graph::Node& node, const Kernel& kernel, std::span<const Tensor> inputs,
                                     int num_threads, std::span<const char> constant = {},
                                     ReshapeCache* cache = nullptr, bool plain_outputs = true) {
  std::vector<TensorInfo> infos(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    infos[i].dtype = inputs[i].dtype();
    infos[i].shape = inputs[i].shape();
    infos[i].layout = inputs[i].layout();
    infos[i].value = &inputs[i];
  }
  std::shared_ptr<const ReshapeCache::Entry> entry;
  if (cache) {
    std::vector<TensorInfo> bare = infos;
    for (size_t i = 0; i < bare.size(); ++i)
      if (i >= constant.size() || !constant[i]) bare[i].value = nullptr;
    std::vector<int64_t> sig = signature(bare);
    entry = cache->find(&kernel, sig);
    if (!entry) {
      auto made = std::make_shared<ReshapeCache::Entry>();
      made->signature = std::move(sig);
      auto rr = kernel.reshape(bare);
      if (rr.ok() && rr->outputs.size() >= node.outputs.size()) made->result = std::move(rr).value();
      cache->put(&kernel, made);
      entry = std::move(made);
    }
  }
  ReshapeResult fresh;
  const ReshapeResult* rp = entry && entry->result ? &*entry->result : nullptr;
  if (!rp) {
    auto rr = kernel.reshape(infos);
    // Name the opset too: an op's accepted inputs and types change with it.
    if (!rr.ok()) return rr.status().with_context(node.describe() + " (opset " + std::to_string(node.opset) + ")");
    fresh = std::move(rr).value();
    rp = &fresh;
  }
  const ReshapeResult& r = *rp;
  if (r.outputs.size() < node.outputs.size())
    return internal_error(node.describe() + ": kernel returned " + std::to_string(r.outputs.size()) + " outputs for " +
                          std::to_string(node.outputs.size()));
  std::vector<Tensor> outs;
  const bool known = !r.known_values.empty() && std::all_of(r.known_values.begin(), r.known_values.end(),
                                                            [](const auto& t) { return t.has_value(); });
  if (known) {
    for (const auto& t : r.known_values) outs.push_back(*t);
  } else {
    // A kernel that answered as a planner asks runs in plans too, where its outputs and workspace
    // are arena memory holding the last run's bytes: it writes them whole, so they need no zeroing.
    // Kernels that needed values here run only eagerly and get zeroed memory, as they always have.
    const bool plannable = rp != &fresh;
    for (const OutputInfo& o : r.outputs) {
      outs.push_back(plannable ? Tensor::for_overwrite(o.dtype, o.shape, o.layout)
                               : Tensor::empty(o.dtype, o.shape, o.layout));
      if (o.shape.numel() > 0 && !outs.back().raw())
        return resource_exhausted(node.describe() + ": cannot allocate output " + outs.back().describe());
    }
    auto ws = plannable ? AlignedBuffer::allocate_for_overwrite(r.workspace_bytes)
                        : AlignedBuffer::allocate(r.workspace_bytes);
    if (r.workspace_bytes > 0 && !ws)
      return resource_exhausted(node.describe() + ": cannot allocate " + std::to_string(r.workspace_bytes) +
                                " bytes of workspace");
    RunContext rc;
    rc.inputs = inputs;
    rc.outputs = outs;
    rc.workspace = ws ? ws->data() : nullptr;
    rc.state = r.state.get();
    rc.num_threads = num_threads;
    SL_RETURN_IF_ERROR(kernel.run(rc).with_context(node.describe()));
  }
  if (plain_outputs)
    for (Tensor& t : outs)
      if (t.defined() && t.layout() != Layout::kPlain) {
        SL_ASSIGN_OR_RETURN(t, to_layout(t, Layout::kPlain, num_threads));
      }
  return outs;
}

// Sets the OpenMP thread count for the calling thread and restores it on exit (oneDNN sizes its
// work split from it).
class OmpThreads {
 public:
  explicit OmpThreads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(std::max(1, n)); }
  ~OmpThreads() { omp_set_num_threads(saved_); }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int saved_;
};

// A tensor of this dtype and shape with every element `v` (converted as store_scalar does).
Tensor filled(DType dtype, const Shape& shape, double v) {
  Tensor t = Tensor::empty(dtype, shape);
  if (!t.raw() || v == 0.0) return t;
  const size_t esz = dtype_size(dtype);
  for (int64_t i = 0; i < t.numel(); ++i)
    cpu::store_scalar(dtype, v, static_cast<uint8_t*>(t.raw()) + static_cast<size_t>(i) * esz);
  return t;
}

// "sequence of float32" for messages about a graph value's declared type.
std::string declared_type(const graph::Value& v) {
  return value_type_name(v.kind, v.dtype);
}

// Checks a value given for graph input `val` against its declared kind and element type. A subgraph
// input that declares nothing (a Loop body's, often) takes anything.
Status check_input(const graph::Value& val, const AnyValue& given) {
  if (!given.defined()) return invalid_argument("input '" + val.name + "' is not given");
  const bool declared = val.dtype != DType::kUndefined || val.kind != ValueKind::kTensor;
  if (declared && given.kind() != val.kind)
    return invalid_argument("input '" + val.name + "' must be a " + declared_type(val) + ", got " + given.describe());
  if (val.dtype != DType::kUndefined && given.elem_dtype() != DType::kUndefined && given.elem_dtype() != val.dtype)
    return invalid_argument("input '" + val.name + "' must be a " + declared_type(val) + ", got " + given.describe());
  auto check_tensor = [&](const Tensor& t) -> Status {
    if (t.layout() != Layout::kPlain) return invalid_argument("input '" + val.name + "' must be in plain layout");
    if (!t.raw() && t.numel() > 0) return invalid_argument("input '" + val.name + "' has no data");
    return ok_status();
  };
  if (given.is_tensor()) return check_tensor(given.tensor());
  const AnyValue inner = given.is_optional() ? given.element() : given;
  if (inner.is_tensor()) return check_tensor(inner.tensor());
  for (const Tensor& t : inner.items()) SL_RETURN_IF_ERROR(check_tensor(t));
  return ok_status();
}

// The tensors a tensor kernel takes; Unsupported naming the node, its opset and the input when one
// is a sequence or an optional.
Result<std::vector<Tensor>> as_tensors(const graph::Graph& g, const graph::Node& node, std::span<const AnyValue> ins) {
  std::vector<Tensor> tensors(ins.size());
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i].defined()) continue;
    if (!ins[i].is_tensor())
      return unsupported(node.describe() + " (opset " + std::to_string(node.opset) + "): input " + std::to_string(i) +
                         " ('" + g.value(node.inputs[i]).name + "') is a " +
                         value_type_name(ins[i].kind(), ins[i].elem_dtype()) + "; this operator takes tensors");
    tensors[i] = ins[i].tensor();
  }
  return tensors;
}

// Gives input `i` of the node being run in `layout` (converting it, or reusing a conversion made
// for an earlier reader).
using ConvertInput = std::function<Result<Tensor>(size_t i, Layout layout)>;

// One node: a value kernel gets whole values (tensors plain; it runs its subgraphs in this scope),
// Identity passes any value on, any other kernel is reshaped and run on tensors in the layouts
// choose_input_layouts picks, its outputs left in the layouts it wrote.
Result<std::vector<AnyValue>> run_node(const graph::Graph& g, const graph::Node& node, const Kernel& kernel,
                                       std::vector<AnyValue>& ins,
                                       const std::function<const AnyValue*(const std::string&)>& scope,
                                       const EagerOptions& options, const ConvertInput& convert) {
  std::vector<AnyValue> outs;
  if (const auto* vk = dynamic_cast<const ValueKernel*>(&kernel)) {
    for (size_t i = 0; i < ins.size(); ++i)
      if (ins[i].is_tensor() && ins[i].tensor().layout() != Layout::kPlain) {
        SL_ASSIGN_OR_RETURN(Tensor t, convert(i, Layout::kPlain));
        ins[i] = AnyValue(std::move(t));
      }
    EagerOptions inner;
    inner.num_threads = options.num_threads;
    inner.outer = scope;
    SL_ASSIGN_OR_RETURN(outs, vk->run_values(ins, inner));
    if (outs.size() < node.outputs.size())
      return internal_error(node.describe() + " returned " + std::to_string(outs.size()) + " outputs for " +
                            std::to_string(node.outputs.size()));
    return outs;
  }
  if (node.op_type == "Identity" && node.domain.empty() && !ins.empty() && ins[0].defined() && !ins[0].is_tensor()) {
    // Identity takes any value (sequences and optionals from opset 14 and 16) and passes it on.
    outs.push_back(ins[0]);
    return outs;
  }
  SL_ASSIGN_OR_RETURN(std::vector<Tensor> tensors, as_tensors(g, node, ins));
  // Constants of this graph: the same tensors every run (a graph input with a default is not one).
  std::vector<char> constant(node.inputs.size(), 0);
  std::vector<TensorInfo> infos(tensors.size());
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const graph::ValueId v = node.inputs[i];
    constant[i] = v != graph::kNoValue && g.value(v).constant && !g.is_graph_input(v);
    if (!tensors[i].defined()) continue;
    // With values: a kernel may take a layout only for some of them (Resize for its sizes).
    infos[i] = TensorInfo{tensors[i].dtype(), tensors[i].shape(), tensors[i].layout(), &tensors[i]};
  }
  const std::vector<Layout> want =
      choose_input_layouts(kernel, infos, constant, options.layouts.channels_last, options.layouts.block);
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].defined() && tensors[i].layout() != want[i]) {
      SL_ASSIGN_OR_RETURN(tensors[i], convert(i, want[i]));
    }
  SL_ASSIGN_OR_RETURN(std::vector<Tensor> results, evaluate(node, kernel, tensors, options.num_threads, constant,
                                                            options.reshapes, !options.layouts.channels_last));
  outs.assign(std::make_move_iterator(results.begin()), std::make_move_iterator(results.end()));
  return outs;
}

Result<std::vector<AnyValue>> run_graph(const graph::Graph& g, const KernelFor& kernel_for,
                                        std::span<const AnyValue> inputs, const EagerOptions& options) {
  if (inputs.size() != g.inputs().size())
    return invalid_argument("graph has " + std::to_string(g.inputs().size()) + " inputs, got " +
                            std::to_string(inputs.size()));
  SL_ASSIGN_OR_RETURN(std::vector<graph::NodeId> order, g.topological_order());
  const OmpThreads threads(options.num_threads);
  std::vector<AnyValue> values(g.num_values());
  std::vector<int> reads = count_reads(g, order);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const graph::Value& val = g.value(g.inputs()[i]);
    // A tensor or sequence given for an optional input is an optional holding it (a Loop body whose
    // loop-carried input is an optional sequence gets its own sequence output back).
    const bool wrap = is_optional_kind(val.kind) && inputs[i].defined() && !inputs[i].is_optional() &&
                      element_kind(val.kind) == inputs[i].kind();
    const AnyValue given = wrap ? AnyValue::some(inputs[i]) : inputs[i];
    SL_RETURN_IF_ERROR(check_input(val, given));
    values[static_cast<size_t>(g.inputs()[i])] = given;
  }
  // The value v as a node reads it.
  auto read = [&](graph::ValueId v, const graph::Node& user) -> Result<AnyValue> {
    const AnyValue& t = values[static_cast<size_t>(v)];
    if (t.defined()) return t;
    const graph::Value& val = g.value(v);
    if (val.constant) return AnyValue(*val.constant);
    if (options.outer && is_outer_reference(g, v))
      if (const AnyValue* o = options.outer(val.name)) return *o;
    return internal_error("value '" + val.name + "' used by " + user.describe() + " has not been computed");
  };
  // Constants as values, made on first use, for scoped lookups that hand out pointers.
  std::vector<AnyValue> constant_values(g.num_values());
  // Values of this scope (and the ones around it) by name, for the subgraphs of value kernels.
  const std::function<const AnyValue*(const std::string&)> scope = [&](const std::string& name) -> const AnyValue* {
    const graph::ValueId v = g.find_value(name);
    if (v != graph::kNoValue) {
      if (values[static_cast<size_t>(v)].defined()) return &values[static_cast<size_t>(v)];
      if (g.value(v).constant) {
        AnyValue& c = constant_values[static_cast<size_t>(v)];
        if (!c.defined()) c = AnyValue(*g.value(v).constant);
        return &c;
      }
    }
    return options.outer ? options.outer(name) : nullptr;
  };
  // Per value: a copy in another layout made for a reader, kept for the value's other readers.
  std::vector<Tensor> converted(g.num_values());
  auto release = [&](graph::ValueId v) {
    if (v != graph::kNoValue && --reads[static_cast<size_t>(v)] <= 0) {
      values[static_cast<size_t>(v)] = AnyValue();
      converted[static_cast<size_t>(v)] = Tensor();
    }
  };
  // Values of this scope that subgraphs read by name go to them plain.
  auto plain_in_scope = [&](const std::string& name) -> Status {
    const graph::ValueId v = g.find_value(name);
    if (v == graph::kNoValue) return ok_status();
    AnyValue& t = values[static_cast<size_t>(v)];
    if (t.is_tensor() && t.tensor().layout() != Layout::kPlain) {
      SL_ASSIGN_OR_RETURN(Tensor p, to_layout(t.tensor(), Layout::kPlain, options.num_threads));
      t = AnyValue(std::move(p));
    }
    return ok_status();
  };
  for (graph::NodeId n : order) {
    const graph::Node& node = g.node(n);
    std::vector<AnyValue> ins;
    ins.reserve(node.inputs.size());
    for (graph::ValueId v : node.inputs) {
      if (v == graph::kNoValue) {
        ins.emplace_back();
        continue;
      }
      SL_ASSIGN_OR_RETURN(AnyValue t, read(v, node));
      ins.push_back(std::move(t));
    }
    SL_ASSIGN_OR_RETURN(const Kernel* kernel, kernel_for(n, ins));
    std::unordered_set<std::string> names;
    outer_names(node, names);
    for (const auto& name : names) SL_RETURN_IF_ERROR(plain_in_scope(name));
    const ConvertInput convert = [&](size_t i, Layout layout) -> Result<Tensor> {
      const Tensor& t = ins[i].tensor();
      Tensor& alt = converted[static_cast<size_t>(node.inputs[i])];
      if (alt.defined() && alt.layout() == layout && alt.shape() == t.shape()) return alt;
      SL_ASSIGN_OR_RETURN(alt, to_layout(t, layout, options.num_threads));
      return alt;
    };
    if (options.hooks) options.hooks->on_node_begin(n);
    Result<std::vector<AnyValue>> ran = run_node(g, node, *kernel, ins, scope, options, convert);
    if (options.hooks) options.hooks->on_node_end(n);
    SL_ASSIGN_OR_RETURN(std::vector<AnyValue> outs, std::move(ran));
    ins.clear();
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const graph::ValueId v = node.outputs[i];
      if (v == graph::kNoValue) continue;
      if (reads[static_cast<size_t>(v)] > 0) values[static_cast<size_t>(v)] = std::move(outs[i]);
    }
    for (graph::ValueId v : node.inputs) release(v);
    for (const auto& name : names) release(g.find_value(name));
  }
  // What is left of `reads` now counts each value's places among the graph's outputs.
  std::vector<AnyValue> result;
  for (graph::ValueId v : g.outputs()) {
    const graph::Value& val = g.value(v);
    AnyValue t = values[static_cast<size_t>(v)];
    release(v);  // the last of its places hands the scope's reference over to `t`
    if (!t.defined() && val.constant) t = AnyValue(*val.constant);
    if (!t.defined() && options.outer && is_outer_reference(g, v))
      if (const AnyValue* o = options.outer(val.name)) t = *o;
    if (!t.defined()) return invalid_argument("graph output '" + val.name + "' is never computed");
    if (t.is_tensor() && t.tensor().layout() != Layout::kPlain) {
      SL_ASSIGN_OR_RETURN(Tensor p, to_layout(t.tensor(), Layout::kPlain, options.num_threads));
      t = AnyValue(std::move(p));
    }
    // Deep copies where a value may share memory with anything else: a caller's input or a
    // constant (a known value that is a view, an input passed straight through), an outer value,
    // another output. A tensor that alone holds storage made in this run goes out as it is: a Loop
    // body that grows a tensor by concatenation would otherwise copy all of it every iteration.
    if (t.is_tensor() && t.tensor().sole_owner()) {
      result.push_back(std::move(t));
    } else {
      result.push_back(t.clone());
    }
  }
  return result;
}

}  // namespace

struct ReshapeCache::Impl {
  mutable std::mutex mu;
  // Per kernel, newest first.
  std::unordered_map<const Kernel*, std::vector<std::shared_ptr<const Entry>>> entries;
};

ReshapeCache::ReshapeCache() : impl_(std::make_unique<Impl>()) {}
ReshapeCache::~ReshapeCache() = default;

size_t ReshapeCache::size() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  size_t n = 0;
  for (const auto& [kernel, list] : impl_->entries) n += list.size();
  return n;
}

std::shared_ptr<const ReshapeCache::Entry> ReshapeCache::find(const Kernel* kernel,
                                                              const std::vector<int64_t>& signature) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->entries.find(kernel);
  if (it == impl_->entries.end()) return nullptr;
  for (const auto& e : it->second)
    if (e->signature == signature) return e;
  return nullptr;
}

void ReshapeCache::put(const Kernel* kernel, std::shared_ptr<const Entry> entry) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto& list = impl_->entries[kernel];
  for (auto it = list.begin(); it != list.end(); ++it)
    if ((*it)->signature == entry->signature) {
      list.erase(it);  // another thread put it first: keep one
      break;
    }
  list.insert(list.begin(), std::move(entry));
  if (list.size() > kPerKernel) list.resize(kPerKernel);
}

Result<ReshapeResult> ValueKernel::reshape(std::span<const TensorInfo>) const {
  return unsupported(eager_reason());
}

Status ValueKernel::run(const RunContext&) const {
  return internal_error(desc_ + " cannot run as a plan step");
}

Result<std::vector<AnyValue>> run_eager_values(const graph::Graph& g, KernelTable kernels,
                                               std::span<const AnyValue> inputs, const EagerOptions& options) {
  return run_graph(g, from_table(g, kernels), inputs, options);
}

Result<std::vector<Tensor>> run_eager(const graph::Graph& g, KernelTable kernels, std::span<const Tensor> inputs,
                                      const EagerOptions& options) {
  const std::vector<AnyValue> values(inputs.begin(), inputs.end());
  SL_ASSIGN_OR_RETURN(std::vector<AnyValue> outs, run_graph(g, from_table(g, kernels), values, options));
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].is_tensor())
      return invalid_argument("graph output '" + g.value(g.outputs()[i]).name + "' is a " +
                              value_type_name(outs[i].kind(), outs[i].elem_dtype()) + ", not a tensor");
    tensors.push_back(outs[i].tensor());
  }
  return tensors;
}

// Per node, kernels by the kinds and element types of their inputs.
struct SubgraphRunner::Cache {
  ReshapeCache reshapes;
  std::mutex mu;
  std::vector<std::map<std::vector<std::pair<ValueKind, DType>>, std::unique_ptr<Kernel>>> kernels;
};

SubgraphRunner::SubgraphRunner(std::shared_ptr<const graph::Graph> g, KernelOptions options)
    : graph_(std::move(g)), options_(options), cache_(std::make_unique<Cache>()) {
  cache_->kernels.resize(graph_->num_nodes());
}

SubgraphRunner::~SubgraphRunner() = default;

namespace {

// Appends the nodes of g (and of the subgraphs inside it) that have no CPU kernel.
void find_missing(const graph::Graph& g, const KernelRegistry& reg, std::string& missing) {
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    const graph::Node& node = g.node(static_cast<graph::NodeId>(n));
    if (node.dead) continue;
    if (!reg.has_op(node.op_type, node.domain, node.opset, Device::kCpu)) {
      // The first input's element type, where the subgraph declares it.
      const graph::ValueId first = node.inputs.empty() ? graph::kNoValue : node.inputs[0];
      const DType dt = first == graph::kNoValue ? DType::kUndefined : g.value(first).dtype;
      missing += (missing.empty() ? "" : ", ") + node.describe() + " (opset " + std::to_string(node.opset) + ")" +
                 (dt == DType::kUndefined ? std::string() : std::string(" for ") + dtype_name(dt));
    }
    for (const auto& [key, attr] : node.attrs)
      if (attr.kind == graph::Attribute::Kind::kGraph && attr.g) find_missing(*attr.g, reg, missing);
  }
}

}  // namespace

Status SubgraphRunner::check_supported() const {
  std::string missing;
  find_missing(*graph_, default_cpu_registry(), missing);
  if (!missing.empty())
    return unsupported("subgraph" + (graph_->name.empty() ? std::string() : " '" + graph_->name + "'") +
                       " has unsupported operators: " + missing);
  return ok_status();
}

Result<std::vector<AnyValue>> SubgraphRunner::run(std::span<const AnyValue> inputs, const EagerOptions& options) const {
  const graph::Graph& g = *graph_;
  KernelFor kernel_for = [&](graph::NodeId n, std::span<const AnyValue> ins) -> Result<const Kernel*> {
    std::vector<DType> dtypes;
    std::vector<std::pair<ValueKind, DType>> key;
    for (const AnyValue& t : ins) {
      dtypes.push_back(t.defined() ? t.elem_dtype() : DType::kUndefined);
      key.emplace_back(t.kind(), dtypes.back());
    }
    std::lock_guard<std::mutex> lock(cache_->mu);
    auto& by_dtype = cache_->kernels[static_cast<size_t>(n)];
    auto it = by_dtype.find(key);
    if (it != by_dtype.end()) return it->second.get();
    const graph::Node& node = g.node(n);
    const KernelRegistry& reg = default_cpu_registry();
    SL_ASSIGN_OR_RETURN(const KernelDef* def,
                        reg.find_for_inputs(node.op_type, node.domain, node.opset, Device::kCpu, dtypes));
    std::vector<const Tensor*> constants;
    for (graph::ValueId v : node.inputs)
      constants.push_back(v != graph::kNoValue && g.value(v).constant ? &*g.value(v).constant : nullptr);
    KernelCreateArgs args{g, node, constants, dtypes, options_};
    auto k = def->create(args);
    if (!k.ok()) return k.status().with_context("creating kernel for " + node.describe());
    const Kernel* made = k->get();
    by_dtype.emplace(std::move(key), std::move(k).value());
    return made;
  };
  EagerOptions with_cache = options;
  with_cache.reshapes = &cache_->reshapes;
  with_cache.layouts = EagerLayouts::of(options_);
  return run_graph(g, kernel_for, inputs, with_cache);
}

Result<ShapeProbe> probe_shapes(const graph::Graph& g, KernelTable kernels, std::span<const Shape> shapes) {
  if (shapes.size() != g.inputs().size())
    return invalid_argument("graph has " + std::to_string(g.inputs().size()) + " inputs, got " +
                            std::to_string(shapes.size()) + " shapes");
  SL_ASSIGN_OR_RETURN(std::vector<graph::NodeId> order, g.topological_order());
  // Per value: dtype and shape once computed, and the tensor when its value is known.
  std::vector<std::optional<TensorInfo>> infos(g.num_values());
  std::vector<Tensor> known(g.num_values());
  for (size_t i = 0; i < shapes.size(); ++i) {
    const graph::Value& val = g.value(g.inputs()[i]);
    if (val.kind != ValueKind::kTensor || val.dtype == DType::kString) {
      ShapeProbe p;
      p.value_dependent = true;
      p.reason = "input '" + val.name + "' is a " + declared_type(val) + kEagerTypes;
      return p;
    }
    TensorInfo info;
    info.dtype = g.value(g.inputs()[i]).dtype;
    info.shape = shapes[i];
    infos[static_cast<size_t>(g.inputs()[i])] = info;
  }
  for (graph::NodeId n : order) {
    const graph::Node& node = g.node(n);
    const Kernel* kernel = static_cast<size_t>(n) < kernels.size() ? kernels[static_cast<size_t>(n)].get() : nullptr;
    if (!kernel) return internal_error("no kernel for " + node.describe());
    if (const auto* vk = dynamic_cast<const ValueKernel*>(kernel)) {
      ShapeProbe p;
      p.value_dependent = true;
      p.node = n;
      p.reason = vk->eager_reason();
      return p;
    }
    std::vector<TensorInfo> in(node.inputs.size());
    bool all_known = true;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const graph::ValueId v = node.inputs[i];
      if (v == graph::kNoValue) continue;
      const graph::Value& val = g.value(v);
      if (val.constant && !infos[static_cast<size_t>(v)]) {
        known[static_cast<size_t>(v)] = *val.constant;
        infos[static_cast<size_t>(v)] =
            TensorInfo{val.constant->dtype(), val.constant->shape(), Layout::kPlain, nullptr};
      }
      if (!infos[static_cast<size_t>(v)])
        return internal_error("value '" + val.name + "' used by " + node.describe() + " has not been computed");
      in[i] = *infos[static_cast<size_t>(v)];
      in[i].value = known[static_cast<size_t>(v)].defined() ? &known[static_cast<size_t>(v)] : nullptr;
      if (!in[i].value) all_known = false;
    }
    // String tensors are computed node by node (a plan's arena holds fixed-size elements only);
    // string constants fold.
    const auto string_info = [](const TensorInfo& t) { return t.dtype == DType::kString && !t.value; };
    if (std::any_of(in.begin(), in.end(), string_info)) {
      ShapeProbe p;
      p.value_dependent = true;
      p.node = n;
      p.reason = node.describe() + " reads string tensors" + kEagerTypes;
      return p;
    }
    if (all_known) {
      // Folds, as the planner would.
      std::vector<Tensor> ins(node.inputs.size());
      for (size_t i = 0; i < node.inputs.size(); ++i)
        if (in[i].value) ins[i] = *in[i].value;
      SL_ASSIGN_OR_RETURN(std::vector<Tensor> outs, evaluate(node, *kernel, ins, 1));
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        const graph::ValueId v = node.outputs[i];
        if (v == graph::kNoValue) continue;
        infos[static_cast<size_t>(v)] = TensorInfo{outs[i].dtype(), outs[i].shape(), Layout::kPlain, nullptr};
        known[static_cast<size_t>(v)] = std::move(outs[i]);
      }
      continue;
    }
    auto rr = kernel->reshape(in);
    if (!rr.ok()) {
      if (rr.status().code() != StatusCode::kUnsupported) return rr.status().with_context(node.describe());
      // Unsupported without some values: does it answer when it has them? Stand-in values (all
      // ones, then all zeros) decide; any answer but Unsupported means the values were missing.
      bool answers = false;
      for (double fill : {1.0, 0.0}) {
        std::vector<TensorInfo> with = in;
        std::vector<Tensor> stand_ins(in.size());
        for (size_t i = 0; i < in.size(); ++i) {
          if (!in[i].present() || in[i].value) continue;
          if (in[i].shape.numel() > kMaxStandInElements || !dtype_supported(in[i].dtype)) continue;
          stand_ins[i] = filled(in[i].dtype, in[i].shape, fill);
          with[i].value = &stand_ins[i];
        }
        auto retry = kernel->reshape(with);
        if (retry.ok() || retry.status().code() != StatusCode::kUnsupported) {
          answers = true;
          break;
        }
      }
      if (!answers) return rr.status().with_context(node.describe());
      ShapeProbe p;
      p.value_dependent = true;
      p.node = n;
      // Kernels usually name their node already.
      const std::string said = rr.status().message();
      p.reason = said.rfind(node.describe(), 0) == 0 ? said : node.describe() + ": " + said;
      return p;
    }
    const ReshapeResult& r = *rr;
    if (r.outputs.size() < node.outputs.size())
      return internal_error(node.describe() + ": kernel returned " + std::to_string(r.outputs.size()) +
                            " outputs for " + std::to_string(node.outputs.size()));
    if (std::any_of(r.outputs.begin(), r.outputs.end(),
                    [](const OutputInfo& o) { return o.dtype == DType::kString; })) {
      ShapeProbe p;
      p.value_dependent = true;
      p.node = n;
      p.reason = node.describe() + " gives string tensors" + kEagerTypes;
      return p;
    }
    const bool all_values = !r.known_values.empty() && std::all_of(r.known_values.begin(), r.known_values.end(),
                                                                   [](const auto& t) { return t.has_value(); });
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const graph::ValueId v = node.outputs[i];
      if (v == graph::kNoValue) continue;
      infos[static_cast<size_t>(v)] = TensorInfo{r.outputs[i].dtype, r.outputs[i].shape, Layout::kPlain, nullptr};
      if (all_values) {
        SL_ASSIGN_OR_RETURN(known[static_cast<size_t>(v)], to_layout(*r.known_values[i], Layout::kPlain));
      }
    }
  }
  return ShapeProbe{};
}

}  // namespace streamline::ops
