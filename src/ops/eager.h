#pragma once
// Eager execution: running a graph node by node, for input shapes a plan cannot be made for because
// some output shape depends on values computed during the run (Reshape to a computed shape, TopK
// with a computed k, NonMaxSuppression on run-time boxes), and for graphs that carry sequences,
// optionals or string tensors, which plans do not hold.
//
//   // Once per input-shape set: is the planning failure of that kind?
//   SL_ASSIGN_OR_RETURN(ops::ShapeProbe probe, ops::probe_shapes(graph, kernels, shapes));
//   if (probe.value_dependent) ...                      // run eagerly from now on
//
//   // Every run:
//   ops::ReshapeCache reshapes;                         // kept beside the graph, across runs
//   ops::EagerOptions eo;
//   eo.num_threads = 4;
//   eo.reshapes = &reshapes;
//   eo.layouts = ops::EagerLayouts::of(kernel_options); // the options the kernels were made with
//   SL_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ops::run_eager(graph, kernels, inputs, eo));
//   SL_ASSIGN_OR_RETURN(std::vector<AnyValue> vals, ops::run_eager_values(graph, kernels, values, eo));
//
// The interpreter carries AnyValues (core/value.h). Tensor kernels get tensors; a sequence or
// optional reaching one is refused naming the node, except by Identity, which passes any value on.
// ValueKernels (sequence and optional ops, and the ops that run subgraphs) get whole values.
// Each node's kernel gets reshape() with every input's value known (TensorInfo::value non-null),
// so value-dependent kernels can answer; when reshape returns known values those are the outputs,
// otherwise the outputs (in the layout reshape asked for) and the workspace are allocated and run()
// is called. With a ReshapeCache (EagerOptions::reshapes) a kernel is first asked as a planner asks
// (values for constants only); that answer, when it gives one, serves every later run with the same
// input shapes and layouts. With EagerLayouts on, rank-4 activations stay in the layout their
// producer wrote (a convolution's nChw16c, say) and are converted only for a reader that takes
// another (ops::choose_input_layouts); off, every value is handed over and stored plain. Graph outputs
// are plain either way. A value is released after its last reader.
//
// This is slower than a plan (allocation per node, no in-place reuse, value-dependent kernels
// reshaped every run); the runtime uses it only for shape sets that cannot be planned.
// Thread-safety: both functions only read the graph and the kernels (and use the cache, which is
// thread-safe); concurrent calls are fine.

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/value.h"
#include "graph/ir.h"
#include "ops/kernel.h"

namespace streamline::ops {

// One kernel per node, indexed by NodeId; null for dead nodes.
using KernelTable = std::span<const std::unique_ptr<Kernel>>;

// Called by run_eager before and after each node of the graph it runs (not the nodes of
// subgraphs), on the calling thread: how observers (traces, metrics) see eager runs.
class NodeHooks {
 public:
  virtual ~NodeHooks() = default;
  virtual void on_node_begin(graph::NodeId node) = 0;
  virtual void on_node_end(graph::NodeId node) = 0;
};

// Reshape results kept between eager runs. A kernel whose reshape answers with values only for
// the graph's constants (as a planner calls it) gives a result that holds for any inputs of the
// same dtypes, shapes and layouts, so later runs with those skip reshape: a convolution's weight
// reorder and primitive, a matrix product's packed weights. Up to kPerKernel input signatures per
// kernel, the newest kept. Thread-safe; the kernels must outlive the cache.
class ReshapeCache {
 public:
  static constexpr size_t kPerKernel = 4;
  ReshapeCache();
  ~ReshapeCache();
  ReshapeCache(const ReshapeCache&) = delete;
  ReshapeCache& operator=(const ReshapeCache&) = delete;

  // Reshape results held (entries that found the kernel needs run-time values included).
  size_t size() const;

  struct Entry;
  // The entry for `kernel` with this input signature, or null. A held entry with no result means
  // the kernel needs run-time values for these inputs.
  std::shared_ptr<const Entry> find(const Kernel* kernel, const std::vector<int64_t>& signature) const;
  void put(const Kernel* kernel, std::shared_ptr<const Entry> entry);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct ReshapeCache::Entry {
  std::vector<int64_t> signature;
  std::optional<ReshapeResult> result;  // empty: reshape needs run-time values
};

// Where the interpreter keeps rank-4 activations between nodes. Off, every value is plain; on,
// each kernel gets its inputs in the layouts ops::choose_input_layouts picks (the planner's rule:
// conv-like kernels the layout they prefer, kernels that take any layout the one their inputs
// share), and values stay in the layout their producer wrote until a reader needs another. Graph outputs, the inputs of
// value kernels and values read by subgraphs are plain.
struct EagerLayouts {
  bool channels_last = false;
  int block = 0;  // channels per block kernels may choose (8: nChw8c, 16: nChw16c); 0: no blocked layout
  // The model's choices as its kernels were made with them.
  static EagerLayouts of(const KernelOptions& o) {
    return EagerLayouts{o.channels_last, o.channels_last && o.blocked() ? o.block() : 0};
  }
};

struct EagerOptions {
  // Intra-op threads kernels may use (RunContext::num_threads and the OpenMP thread count).
  int num_threads = 1;
  // Where this graph's reshape results are kept between runs (not its subgraphs', which their
  // runners keep); not owned. Null: every node is reshaped on every run.
  ReshapeCache* reshapes = nullptr;
  // Layouts between this graph's nodes; subgraphs take their runner's.
  EagerLayouts layouts;
  // Values of enclosing scopes, by name, for graphs that are subgraphs (If/Loop/Scan/SequenceMap
  // bodies): a value with no producer that is neither a graph input nor a constant is looked up
  // here. Null: no enclosing scope. The returned value must outlive the call.
  std::function<const AnyValue*(const std::string& name)> outer;
  // Per-node hooks for this graph's nodes (not its subgraphs'); not owned. Null: none.
  NodeHooks* hooks = nullptr;
};

// A kernel the interpreter runs on whole values: the ops that take or give sequences and optionals,
// and those that run subgraphs (If, Loop, Scan, SequenceMap), whose subgraphs read values of the
// enclosing scope by name. A plan step can hand it neither, and its output shapes are known only by
// running it: reshape() answers Unsupported (so such graphs run eagerly) and the interpreter calls
// run_values() instead of reshape() and run().
class ValueKernel : public Kernel {
 public:
  explicit ValueKernel(const graph::Node& node) : desc_(node.describe()) {}
  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const final;
  Status run(const RunContext& ctx) const final;
  // `inputs`: the node's inputs, tensors plain (undefined for omitted optional ones). `scope.outer`
  // finds values of the scope the node is in (and the scopes around it) by name. Returns owned
  // outputs, one per node output.
  virtual Result<std::vector<AnyValue>> run_values(std::span<const AnyValue> inputs,
                                                   const EagerOptions& scope) const = 0;
  // Why a graph holding this node runs eagerly ("If 'if0' runs subgraphs: ...").
  virtual std::string eager_reason() const {
    return desc_ + " runs subgraphs: its outputs are known only by running it";
  }

 protected:
  std::string desc_;  // "If 'if0'"
};

// A subgraph (an If branch, a Loop or Scan body) and its kernels, made on first use for the input
// dtypes they are run with (subgraph values often have no declared type). Thread-safe; `g` must
// outlive the runner.
//
//   SubgraphRunner body(*node.attrs.at("body").g, args.options);
//   SL_RETURN_IF_ERROR(body.check_supported());                      // at kernel create
//   SL_ASSIGN_OR_RETURN(std::vector<AnyValue> outs, body.run(ins, scope));
class SubgraphRunner {
 public:
  SubgraphRunner(std::shared_ptr<const graph::Graph> g, KernelOptions options);
  ~SubgraphRunner();
  SubgraphRunner(const SubgraphRunner&) = delete;
  SubgraphRunner& operator=(const SubgraphRunner&) = delete;

  const graph::Graph& graph() const { return *graph_; }
  // Unsupported listing every op of the subgraph without a CPU kernel.
  Status check_supported() const;
  // run_eager_values on the subgraph; `options.outer` resolves its references to enclosing scopes.
  Result<std::vector<AnyValue>> run(std::span<const AnyValue> inputs, const EagerOptions& options) const;

 private:
  struct Cache;
  std::shared_ptr<const graph::Graph> graph_;
  KernelOptions options_;
  std::unique_ptr<Cache> cache_;
};

// Runs the live nodes of `g` in topological order. `inputs` are in graph-input order, tensors in
// plain layout, with the kinds and element types the graph declares. Returns owned outputs (tensors
// plain) in graph-output order. Errors name the node ("Reshape 'r1': ...").
Result<std::vector<AnyValue>> run_eager_values(const graph::Graph& g, KernelTable kernels,
                                               std::span<const AnyValue> inputs, const EagerOptions& options = {});
// The same for graphs whose inputs and outputs are tensors (an output that is not is an error).
Result<std::vector<Tensor>> run_eager(const graph::Graph& g, KernelTable kernels, std::span<const Tensor> inputs,
                                      const EagerOptions& options = {});

// What a shape-only walk of the graph found (see probe_shapes).
struct ShapeProbe {
  // True when some node's output shapes cannot be known without run-time values.
  bool value_dependent = false;
  // Then: the first such node, and the kernel's answer without the values.
  graph::NodeId node = graph::kNoNode;
  std::string reason;
};

// Walks the graph with input shapes only, as a planner does (values known only for constants and
// what folds from them), and finds whether planning fails because a shape depends on run-time
// values: the first node whose reshape answers Unsupported while some of its inputs have no value,
// and that no longer answers Unsupported when given stand-in values (all ones, or all zeros) for
// them; or the first node with a ValueKernel, or that reads or gives string tensors; or a graph
// input that is not a tensor or is a string tensor. Any other failure is returned as an error.
// `shapes` are in graph-input order (any shape for an input that is not a tensor).
Result<ShapeProbe> probe_shapes(const graph::Graph& g, KernelTable kernels, std::span<const Shape> shapes);

}  // namespace streamline::ops
