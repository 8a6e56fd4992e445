#include "plan/planner.h"

#include <omp.h>

#include <algorithm>
#include <map>

#include "core/layout_convert.h"
#include "ops/layout_choice.h"
#include "plan/cost_model.h"
#include "plan/memory_planner.h"
#include "plan/schedule.h"
#include "plan/verifier.h"

namespace streamline::plan {
namespace {

// What the planner knows about one slot while walking the graph.
struct SlotBuilder {
  ExecutionPlan& plan;

  int add_slot(TensorSlot s) {
    plan.slots.push_back(std::move(s));
    return static_cast<int>(plan.slots.size() - 1);
  }
  int add_constant_slot(const std::string& name, const Tensor& t) {
    plan.constants.push_back(t);
    TensorSlot s;
    s.name = name;
    s.dtype = t.dtype();
    s.shape = t.shape();
    s.layout = t.layout();
    s.kind = SlotKind::kConstant;
    s.bytes = t.nbytes();
    s.constant = static_cast<int>(plan.constants.size() - 1);
    return add_slot(std::move(s));
  }
  const Tensor* constant_of(int slot) const {
    const TensorSlot& s = plan.slots[static_cast<size_t>(slot)];
    return s.kind == SlotKind::kConstant ? &plan.constants[static_cast<size_t>(s.constant)] : nullptr;
  }
};

class Planner {
 public:
  Planner(const graph::Graph& g, const KernelSet& ks, const PlannerOptions& o)
      : g_(g),
        ks_(ks),
        opts_(o),
        plan_(std::make_shared<ExecutionPlan>()),
        sb_{*plan_},
        reg_(o.registry ? *o.registry : ops::default_cpu_registry()) {}

  Result<std::shared_ptr<const ExecutionPlan>> run(const InputShapes& inputs) {
    // Kernels that size their work split from the OpenMP thread count (oneDNN) see the run's count.
    const int saved_threads = omp_get_max_threads();
    omp_set_num_threads(std::max(1, opts_.num_threads));
    auto r = run_passes(inputs);
    omp_set_num_threads(saved_threads);
    return r;
  }

 private:
  Result<std::shared_ptr<const ExecutionPlan>> run_passes(const InputShapes& inputs) {
    plan_->device = opts_.device;
    if (opts_.device != ops::Device::kCpu) {
      opts_.channels_last = false;
      opts_.blocked_layout = false;
    }
    value_slot_.assign(g_.num_values(), -1);
    SL_RETURN_IF_ERROR(bind_inputs(inputs));
    SL_ASSIGN_OR_RETURN(std::vector<graph::NodeId> order, g_.topological_order());
    for (graph::NodeId n : order) SL_RETURN_IF_ERROR(plan_node(n));
    SL_RETURN_IF_ERROR(check_device());
    SL_RETURN_IF_ERROR(bind_outputs());
    SL_RETURN_IF_ERROR(schedule());
    const HappensBefore hb(*plan_);
    plan_->guard_bytes = opts_.guard_bytes;
    SL_RETURN_IF_ERROR(plan_memory(*plan_, hb, opts_.reuse_memory, opts_.inplace, inplace_hints_));
    if (opts_.verify) {
      SL_RETURN_IF_ERROR(verify_plan(*plan_).with_context("planning"));
      plan_->verified = true;
    }
    return std::shared_ptr<const ExecutionPlan>(plan_);
  }

  // Pass 4: streams and events. Steps get reordered, so in-place hints move with them.
  Status schedule() {
    std::vector<std::vector<int>> hints = std::move(inplace_hints_);
    std::vector<int> original;  // pre-scheduling index of each step
    SL_RETURN_IF_ERROR(assign_streams(*plan_, opts_, &original));
    SL_RETURN_IF_ERROR(insert_events(*plan_));
    inplace_hints_.assign(plan_->steps.size(), {});
    for (size_t i = 0; i < plan_->steps.size(); ++i) {
      const int orig = original[i];
      if (orig >= 0 && static_cast<size_t>(orig) < hints.size()) inplace_hints_[i] = hints[static_cast<size_t>(orig)];
    }
    return ok_status();
  }

  // Pass 1: graph inputs take the caller's shapes; symbols bind consistently across inputs.
  Status bind_inputs(const InputShapes& given) {
    std::map<std::string, int64_t> symbols;
    for (graph::ValueId v : g_.inputs()) {
      const graph::Value& val = g_.value(v);
      auto it = std::find_if(given.begin(), given.end(), [&](const auto& p) { return p.first == val.name; });
      if (it == given.end()) return invalid_argument("no shape given for model input '" + val.name + "'");
      const Shape& shape = it->second;
      if (val.dims) {
        const graph::DimList& d = *val.dims;
        if (d.size() != shape.rank())
          return invalid_argument("input '" + val.name + "' expects rank " + std::to_string(d.size()) + " " +
                                  graph::dims_to_string(d) + ", got " + shape.to_string());
        for (size_t i = 0; i < d.size(); ++i) {
          if (d[i].fixed() && d[i].value != shape[i])
            return invalid_argument("input '" + val.name + "' expects " + graph::dims_to_string(d) + ", got " +
                                    shape.to_string());
          if (!d[i].fixed() && !d[i].symbol.empty()) {
            auto [sit, fresh] = symbols.emplace(d[i].symbol, shape[i]);
            if (!fresh && sit->second != shape[i])
              return invalid_argument("dimension '" + d[i].symbol + "' is " + std::to_string(sit->second) +
                                      " in one input and " + std::to_string(shape[i]) + " in input '" + val.name + "'");
          }
        }
      }
      for (int64_t dim : shape)
        if (dim < 0) return invalid_argument("input '" + val.name + "' has a negative dimension " + shape.to_string());
      if (!dtype_supported(val.dtype))
        return unsupported("input '" + val.name + "' has unsupported dtype " + dtype_name(val.dtype));
      TensorSlot s;
      s.name = val.name;
      s.dtype = val.dtype;
      s.shape = shape;
      s.kind = SlotKind::kInput;
      s.bytes = static_cast<size_t>(shape.numel()) * dtype_size(val.dtype);
      s.input_index = static_cast<int>(plan_->input_names.size());
      const int slot = sb_.add_slot(std::move(s));
      value_slot_[static_cast<size_t>(v)] = slot;
      plan_->input_names.push_back(val.name);
      plan_->input_shapes.push_back(shape);
      plan_->input_slots.push_back(slot);
    }
    for (const auto& [name, shape] : given)
      if (std::none_of(g_.inputs().begin(), g_.inputs().end(),
                       [&, &name = name](graph::ValueId v) { return g_.value(v).name == name; }))
        return invalid_argument("model has no input named '" + name + "'");
    return ok_status();
  }

  // The slot holding value v, creating constant slots lazily.
  Result<int> slot_of(graph::ValueId v, const graph::Node& user) {
    int& s = value_slot_[static_cast<size_t>(v)];
    if (s >= 0) return s;
    const graph::Value& val = g_.value(v);
    if (val.constant) {
      s = sb_.add_constant_slot(val.name, *val.constant);
      return s;
    }
    return internal_error("value '" + val.name + "' used by " + user.describe() + " has not been computed");
  }

  // The slot holding `slot`'s tensor in `layout`, inserting one LayoutConvert step per (slot, layout).
  Result<int> in_layout(int slot, Layout layout) {
    const TensorSlot& s = plan_->slots[static_cast<size_t>(slot)];
    if (s.layout == layout) return slot;
    auto key = std::make_pair(slot, layout);
    auto it = converted_.find(key);
    if (it != converted_.end()) return it->second;
    if (s.shape.rank() != 4)
      return internal_error("layout change of a rank-" + std::to_string(s.shape.rank()) + " tensor");
    if (s.kind == SlotKind::kConstant) {  // convert constants now
      SL_ASSIGN_OR_RETURN(Tensor t, to_layout(*sb_.constant_of(slot), layout));
      const int c = sb_.add_constant_slot(s.name + "/" + layout_name(layout), t);
      converted_[key] = c;
      return c;
    }
    SL_ASSIGN_OR_RETURN(const ops::Kernel* k, layout_kernel(layout));
    // add_slot() may grow plan_->slots and leave `s` dangling: copy what is needed after it.
    const size_t in_bytes = s.bytes;
    TensorSlot out = s;
    out.name = s.name + "/" + layout_name(layout);
    out.layout = layout;
    out.kind = SlotKind::kArena;
    out.input_index = -1;
    out.constant = -1;
    const int o = sb_.add_slot(std::move(out));
    Step st;
    st.name = plan_->slots[static_cast<size_t>(o)].name;
    st.op = "LayoutConvert";
    st.provider = "cpu";
    st.kernel = k;
    st.inputs = {slot};
    st.outputs = {o};
    st.cost = static_cast<double>(in_bytes) * 2 * kBytesWeight;
    plan_->steps.push_back(std::move(st));
    inplace_hints_.push_back({});
    converted_[key] = o;
    return o;
  }

  Result<const ops::Kernel*> layout_kernel(Layout layout) {
    auto& slot = layout_kernels_[static_cast<int>(layout)];
    if (slot) return slot;
    static const graph::Graph dummy = [] {
      graph::Graph g;
      g.add_value("x", DType::kFloat32);
      g.add_value("y", DType::kFloat32);
      return g;
    }();
    graph::Node node;
    node.inputs = {0};
    node.outputs = {1};
    node.op_type = "LayoutConvert";
    node.domain = "streamline";
    node.opset = 1;
    node.name = std::string("to_") + layout_name(layout);
    graph::Attribute a;
    a.kind = graph::Attribute::Kind::kString;
    a.s = layout_name(layout);
    node.attrs["to"] = a;
    SL_ASSIGN_OR_RETURN(const ops::KernelDef* def,
                        reg_.find("LayoutConvert", "streamline", 1, ops::Device::kCpu, DType::kFloat32));
    ops::KernelCreateArgs args{dummy, node, {nullptr}, {DType::kFloat32}, {}};
    SL_ASSIGN_OR_RETURN(std::unique_ptr<ops::Kernel> k, def->create(args));
    slot = k.get();
    plan_->owned_kernels.push_back(std::move(k));
    return slot;
  }

  ops::TensorInfo info_of(int slot) const {
    ops::TensorInfo info;
    if (slot < 0) return info;
    const TensorSlot& s = plan_->slots[static_cast<size_t>(slot)];
    info.dtype = s.dtype;
    info.shape = s.shape;
    info.layout = s.layout;
    info.value = sb_.constant_of(slot);
    return info;
  }

  // Pass 2 for one node: layouts, reshape, fold or emit a step.
  Status plan_node(graph::NodeId n) {
    const graph::Node& node = g_.node(n);
    const ops::Kernel* kernel = ks_.kernels[static_cast<size_t>(n)].get();
    if (!kernel) return internal_error("no kernel for " + node.describe());
    std::vector<int> in_slots;
    for (graph::ValueId v : node.inputs) {
      if (v == graph::kNoValue) {
        in_slots.push_back(-1);
        continue;
      }
      SL_ASSIGN_OR_RETURN(int s, slot_of(v, node));
      in_slots.push_back(s);
    }
    SL_RETURN_IF_ERROR(choose_layouts(kernel, in_slots).with_context(node.describe()));
    std::vector<ops::TensorInfo> infos;
    bool all_const = true;
    for (int s : in_slots) {
      infos.push_back(info_of(s));
      if (s >= 0 && !infos.back().value) all_const = false;
    }
    auto rr = kernel->reshape(infos);
    // Name the opset too: an op's accepted inputs and types change with it.
    if (!rr.ok()) return rr.status().with_context(node.describe() + " (opset " + std::to_string(node.opset) + ")");
    ops::ReshapeResult& r = *rr;
    if (r.outputs.size() < node.outputs.size())
      return internal_error(node.describe() + ": kernel returned " + std::to_string(r.outputs.size()) +
                            " outputs for " + std::to_string(node.outputs.size()));
    const bool known = !r.known_values.empty() && std::all_of(r.known_values.begin(), r.known_values.end(),
                                                              [](const auto& t) { return t.has_value(); });
    if (all_const || known) {
      if (known || node_device(n) == ops::Device::kCpu) return fold(node, kernel, in_slots, r, known);
      // A device kernel cannot run on host data: fold with the node's CPU kernel.
      SL_ASSIGN_OR_RETURN(const ops::Kernel* host, host_kernel(n, infos));
      auto hr = host->reshape(infos);
      if (!hr.ok()) return hr.status().with_context(node.describe());
      return fold(node, host, in_slots, *hr, false);
    }
    if (node_device(n) != opts_.device)
      host_only_[node.op_type + " (opset " + std::to_string(node.opset) + ")"].push_back(node.name);

    Step st;
    st.name = node.name;
    st.op = node.op_type;
    st.provider = ks_.providers[static_cast<size_t>(n)];
    st.node = n;
    st.kernel = kernel;
    st.state = r.state;
    st.inputs = in_slots;
    st.workspace_bytes = r.workspace_bytes;
    std::vector<Shape> in_shapes, out_shapes;
    size_t bytes = 0;
    for (const auto& i : infos)
      if (i.present()) {
        in_shapes.push_back(i.shape);
        bytes += static_cast<size_t>(i.shape.numel()) * dtype_size(i.dtype);
      }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const graph::ValueId v = node.outputs[i];
      if (v == graph::kNoValue) {
        st.outputs.push_back(-1);
        continue;
      }
      // Arena slots hold fixed-size elements; string tensors run node by node (ops/eager.h).
      if (r.outputs[i].dtype == DType::kString)
        return unsupported(node.describe() + " gives string tensors, which run node by node");
      TensorSlot s;
      s.name = g_.value(v).name;
      s.dtype = r.outputs[i].dtype;
      s.shape = r.outputs[i].shape;
      s.layout = r.outputs[i].layout;
      s.kind = SlotKind::kArena;
      s.bytes = static_cast<size_t>(s.shape.numel()) * dtype_size(s.dtype);
      bytes += s.bytes;
      out_shapes.push_back(s.shape);
      const int slot = sb_.add_slot(std::move(s));
      value_slot_[static_cast<size_t>(v)] = slot;
      st.outputs.push_back(slot);
    }
    st.cost = estimate_cost({node.op_type, in_shapes, out_shapes, node.attr_int("group", 1), bytes});
    if (opts_.device == ops::Device::kCpu && opts_.num_threads > 1 && bytes < opts_.serial_bytes &&
        st.cost < opts_.serial_cost)
      st.threads = 1;
    plan_->steps.push_back(std::move(st));
    inplace_hints_.push_back(r.inplace);
    return ok_status();
  }

  ops::Device node_device(graph::NodeId n) const {
    const size_t i = static_cast<size_t>(n);
    return i < ks_.devices.size() ? ks_.devices[i] : ops::Device::kCpu;
  }

  // The CPU kernel of a device node, made on first need and owned by the plan (folding only).
  Result<const ops::Kernel*> host_kernel(graph::NodeId n, const std::vector<ops::TensorInfo>& infos) {
    const graph::Node& node = g_.node(n);
    std::vector<DType> dtypes;
    std::vector<const Tensor*> constants;
    for (const auto& i : infos) {
      dtypes.push_back(i.dtype);
      constants.push_back(i.value);
    }
    auto def = reg_.find(node.op_type, node.domain, node.opset, ops::Device::kCpu, ops::selector_dtype(dtypes, 0));
    if (!def.ok()) return def.status().with_context("folding " + node.describe() + " on the host");
    ops::KernelOptions ko;
    ko.channels_last = false;
    ops::KernelCreateArgs args{g_, node, constants, dtypes, ko};
    SL_ASSIGN_OR_RETURN(std::unique_ptr<ops::Kernel> k, (*def)->create(args));
    const ops::Kernel* raw = k.get();
    plan_->owned_kernels.push_back(std::move(k));
    return raw;
  }

  // After pass 2: a device plan may not contain steps that only have a CPU kernel.
  Status check_device() const {
    if (host_only_.empty()) return ok_status();
    std::string msg = std::string("no ") + ops::device_name(opts_.device) +
                      " kernel for operators whose inputs are computed during the run: ";
    bool first = true;
    for (const auto& [key, names] : host_only_) {
      msg += (first ? "" : "; ") + key + ": ";
      first = false;
      for (size_t i = 0; i < names.size(); ++i) msg += (i ? ", " : "") + names[i];
    }
    return unsupported(msg + " (run the model on the CPU device)");
  }

  // Layouts by ops::choose_input_layouts (the eager interpreter's rule too): rank-4 activations in
  // the layout the kernel prefers or takes, one-pixel tensors mostly as they are, the rest plain;
  // a LayoutConvert step for each input whose layout changes.
  Status choose_layouts(const ops::Kernel* kernel, std::vector<int>& in_slots) {
    std::vector<ops::TensorInfo> infos;
    std::vector<char> constant;
    for (int s : in_slots) {
      infos.push_back(info_of(s));
      constant.push_back(s >= 0 && plan_->slots[static_cast<size_t>(s)].kind == SlotKind::kConstant);
    }
    const int block = opts_.blocked_layout ? (opts_.blocked_channels ? opts_.blocked_channels : 8) : 0;
    const std::vector<Layout> want = ops::choose_input_layouts(*kernel, infos, constant, opts_.channels_last, block);
    for (size_t i = 0; i < in_slots.size(); ++i)
      if (in_slots[i] >= 0 && plan_->slots[static_cast<size_t>(in_slots[i])].layout != want[i]) {
        SL_ASSIGN_OR_RETURN(in_slots[i], in_layout(in_slots[i], want[i]));
      }
    return ok_status();
  }

  // Evaluates a node whose outputs are computable now; its outputs become constants.
  Status fold(const graph::Node& node, const ops::Kernel* kernel, const std::vector<int>& in_slots,
              const ops::ReshapeResult& r, bool known) {
    std::vector<Tensor> outs;
    if (known) {
      for (const auto& t : r.known_values) outs.push_back(*t);
    } else {
      std::vector<Tensor> ins;
      for (int s : in_slots) ins.push_back(s >= 0 ? *sb_.constant_of(s) : Tensor());
      for (const auto& o : r.outputs) {
        outs.push_back(Tensor::empty(o.dtype, o.shape, o.layout));
        if (o.shape.numel() > 0 && !outs.back().raw()) return resource_exhausted("folding " + node.describe());
      }
      auto ws = AlignedBuffer::allocate(r.workspace_bytes);
      ops::RunContext rc;
      rc.inputs = ins;
      rc.outputs = outs;
      rc.workspace = ws ? ws->data() : nullptr;
      rc.state = r.state.get();
      rc.num_threads = 1;
      SL_RETURN_IF_ERROR(kernel->run(rc).with_context("folding " + node.describe()));
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const graph::ValueId v = node.outputs[i];
      if (v == graph::kNoValue || i >= outs.size()) continue;
      SL_ASSIGN_OR_RETURN(Tensor t, to_layout(outs[i], Layout::kPlain));
      value_slot_[static_cast<size_t>(v)] = sb_.add_constant_slot(g_.value(v).name, t);
    }
    ++plan_->folded_nodes;
    return ok_status();
  }

  // Pass 3: graph outputs in plain layout.
  Status bind_outputs() {
    for (graph::ValueId v : g_.outputs()) {
      const graph::Value& val = g_.value(v);
      int s = value_slot_[static_cast<size_t>(v)];
      if (s < 0 && val.constant) s = sb_.add_constant_slot(val.name, *val.constant);
      if (s < 0) return invalid_argument("model output '" + val.name + "' is never computed");
      SL_ASSIGN_OR_RETURN(s, in_layout(s, Layout::kPlain));
      plan_->output_names.push_back(val.name);
      plan_->output_slots.push_back(s);
    }
    return ok_status();
  }

  const graph::Graph& g_;
  const KernelSet& ks_;
  PlannerOptions opts_;
  std::shared_ptr<ExecutionPlan> plan_;
  SlotBuilder sb_;
  const ops::KernelRegistry& reg_;
  std::vector<int> value_slot_;
  std::map<std::pair<int, Layout>, int> converted_;
  std::map<int, const ops::Kernel*> layout_kernels_;
  std::vector<std::vector<int>> inplace_hints_;                // per step
  std::map<std::string, std::vector<std::string>> host_only_;  // device plans: "Op (opset N)" -> CPU-only nodes
};

}  // namespace

Result<std::shared_ptr<const ExecutionPlan>> make_plan(const graph::Graph& g, const KernelSet& kernels,
                                                       const InputShapes& inputs, const PlannerOptions& options) {
  Planner p(g, kernels, options);
  return p.run(inputs);
}

}  // namespace streamline::plan
