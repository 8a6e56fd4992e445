#include "plan/kernel_set.h"

#include <map>
#include <set>

namespace streamline::plan {

Result<KernelSet> create_kernels(const graph::Graph& g, const ops::KernelRegistry& reg,
                                 const ops::KernelOptions& options) {
  KernelSet ks;
  ks.kernels.resize(g.num_nodes());
  ks.providers.resize(g.num_nodes());
  // Pass 1: look every node up, collecting all unsupported ones before failing.
  std::map<std::string, std::vector<std::string>> missing;  // "Op (opset N)" -> node names
  std::vector<const ops::KernelDef*> defs(g.num_nodes(), nullptr);
  std::vector<std::vector<DType>> dtypes(g.num_nodes());
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    const graph::Node& node = g.node(static_cast<graph::NodeId>(n));
    if (node.dead) continue;
    for (graph::ValueId v : node.inputs) dtypes[n].push_back(v == graph::kNoValue ? DType::kUndefined : g.value(v).dtype);
    std::string key = node.op_type + " (" + (node.domain.empty() ? "" : "domain " + node.domain + ", ") + "opset " +
                      std::to_string(node.opset) + ")";
    if (!reg.has_op(node.op_type, node.domain, node.opset, ops::Device::kCpu)) {
      missing[key].push_back(node.name);
      continue;
    }
    auto def = reg.find(node.op_type, node.domain, node.opset, ops::Device::kCpu, ops::selector_dtype(dtypes[n], 0));
    if (def.ok()) def = reg.find(node.op_type, node.domain, node.opset, ops::Device::kCpu,
                                 ops::selector_dtype(dtypes[n], (*def)->dtype_input));
    if (!def.ok()) {
      missing[key + " for " + dtype_name(ops::selector_dtype(dtypes[n], 0))].push_back(node.name);
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
