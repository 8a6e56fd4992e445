#include "plan/kernel_set.h"

#include <map>

#include "graph/infer_dtypes.h"

namespace streamline::plan {

Result<KernelSet> create_kernels(const graph::Graph& g, const ops::KernelRegistry& reg,
                                 const ops::KernelOptions& options, ops::Device device) {
  KernelSet ks;
  ks.kernels.resize(g.num_nodes());
  ks.providers.resize(g.num_nodes());
  ks.devices.assign(g.num_nodes(), ops::Device::kCpu);
  // Pass 1: look every node up, collecting all unsupported ones before failing.
  std::map<std::string, std::vector<std::string>> missing;  // "Op (opset N)" -> node names
  std::vector<const ops::KernelDef*> defs(g.num_nodes(), nullptr);
  std::vector<std::vector<DType>> dtypes(g.num_nodes());
  std::vector<DType> value_dtype(g.num_values());
  for (size_t v = 0; v < g.num_values(); ++v) {
    const graph::Value& val = g.value(static_cast<graph::ValueId>(v));
    value_dtype[v] = val.constant ? val.constant->dtype() : val.dtype;
  }
  SL_ASSIGN_OR_RETURN(std::vector<graph::NodeId> order, g.topological_order());
  for (graph::NodeId id : order) {
    const size_t n = static_cast<size_t>(id);
    const graph::Node& node = g.node(id);
    for (graph::ValueId v : node.inputs)
      dtypes[n].push_back(v == graph::kNoValue ? DType::kUndefined : value_dtype[static_cast<size_t>(v)]);
    const std::vector<DType> fallback = graph::fallback_output_dtypes(node, dtypes[n]);
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const graph::ValueId v = node.outputs[o];
      if (v != graph::kNoValue && value_dtype[static_cast<size_t>(v)] == DType::kUndefined)
        value_dtype[static_cast<size_t>(v)] = fallback[o];
    }
    std::string key = node.op_type + " (" + (node.domain.empty() ? "" : "domain " + node.domain + ", ") + "opset " +
                      std::to_string(node.opset) + ")";
    // The def for one device: keyed by the first input's dtype, then by the input the def names.
    auto lookup = [&](ops::Device d) -> Result<const ops::KernelDef*> {
      auto def = reg.find(node.op_type, node.domain, node.opset, d, ops::selector_dtype(dtypes[n], 0));
      if (def.ok())
        def = reg.find(node.op_type, node.domain, node.opset, d, ops::selector_dtype(dtypes[n], (*def)->dtype_input));
      return def;
    };
    if (device != ops::Device::kCpu && reg.has_op(node.op_type, node.domain, node.opset, device)) {
      auto def = lookup(device);
      if (def.ok()) {
        defs[n] = *def;
        ks.devices[n] = device;
        continue;
      }
    }
    // The element type a kernel would be chosen by is named too, where the node has one.
    const DType selector = ops::selector_dtype(dtypes[n], 0);
    const std::string typed = selector == DType::kUndefined ? key : key + " for " + dtype_name(selector);
    if (!reg.has_op(node.op_type, node.domain, node.opset, ops::Device::kCpu)) {
      missing[typed].push_back(node.name);
      continue;
    }
    auto def = lookup(ops::Device::kCpu);
    if (!def.ok()) {
      missing[typed].push_back(node.name);
      continue;
    }
    defs[n] = *def;
  }
  if (!missing.empty()) {
    std::string msg = "unsupported operators: ";
    bool first = true;
    for (const auto& [key, names] : missing) {
      if (!first) msg += "; ";
      first = false;
      msg += key + ": ";
      for (size_t i = 0; i < names.size(); ++i) msg += (i ? ", " : "") + names[i];
    }
    return unsupported(msg);
  }
  // Pass 2: create (prepack) each kernel.
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    if (!defs[n]) continue;
    const graph::Node& node = g.node(static_cast<graph::NodeId>(n));
    std::vector<const Tensor*> constants;
    for (graph::ValueId v : node.inputs)
      constants.push_back(v != graph::kNoValue && g.value(v).constant ? &*g.value(v).constant : nullptr);
    ops::KernelCreateArgs args{g, node, constants, dtypes[n], options};
    auto k = defs[n]->create(args);
    if (!k.ok()) return k.status().with_context("creating kernel for " + node.describe());
    ks.kernels[n] = std::move(k).value();
    ks.providers[n] = defs[n]->provider;
  }
  return ks;
}

}  // namespace streamline::plan
