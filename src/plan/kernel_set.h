#pragma once
// KernelSet: one kernel per live node of a graph, made once when a model loads.
//
//   SL_ASSIGN_OR_RETURN(plan::KernelSet ks, plan::create_kernels(graph, ops::default_cpu_registry(), {}));
//
// For Device::kCuda the registry must hold both CUDA and CPU kernels: each node takes its CUDA kernel
// when there is one for its op and dtype and its CPU kernel otherwise (devices[n] says which). The
// planner folds CPU nodes whose inputs are known when a plan is made (shape arithmetic) and refuses
// a CUDA plan that would have to run one.
//
// When some ops have no kernel, the error lists every unsupported op type at once with its node
// names, opset and the element type the kernel would be chosen by, e.g. "unsupported operators:
// NonZero (opset 13) for float32: nz1, nz2; Foo (domain x, opset 1) for int64: f".

#include <memory>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "ops/registry.h"

namespace streamline::plan {

struct KernelSet {
  std::vector<std::unique_ptr<ops::Kernel>> kernels;  // indexed by NodeId; null for dead nodes
  std::vector<std::string> providers;                 // indexed by NodeId
  std::vector<ops::Device> devices;                   // indexed by NodeId: where the kernel runs
};

Result<KernelSet> create_kernels(const graph::Graph& g, const ops::KernelRegistry& reg,
                                 const ops::KernelOptions& options, ops::Device device = ops::Device::kCpu);

}  // namespace streamline::plan
