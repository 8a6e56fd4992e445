#pragma once
// KernelSet: one kernel per live node of a graph, made once when a model loads.
//
//   SL_ASSIGN_OR_RETURN(plan::KernelSet ks, plan::create_kernels(graph, ops::default_cpu_registry(), {}));
//
// When some ops have no kernel, the error lists every unsupported op type at once with its node
// names and opset, e.g. "unsupported operators: NonZero (opset 13): nz1, nz2; Foo (domain x, opset 1): f".

#include <memory>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "ops/registry.h"

namespace streamline::plan {

struct KernelSet {
  std::vector<std::unique_ptr<ops::Kernel>> kernels;  // indexed by NodeId; null for dead nodes
  std::vector<std::string> providers;                 // indexed by NodeId
};

Result<KernelSet> create_kernels(const graph::Graph& g, const ops::KernelRegistry& reg,
                                 const ops::KernelOptions& options);

}  // namespace streamline::plan
