#pragma once
// Direct-loop pools (pool_direct.cc) for what oneDNN's pooling primitive lacks.
//
//   if (node asks for MaxPool's Indices) return make_direct_pool(args);

#include "ops/registry.h"

namespace streamline::ops::cpu {

// A direct kernel for args.node (MaxPool, AveragePool, LpPool or GlobalLpPool), any floating dtype,
// with MaxPool's optional Indices output.
Result<std::unique_ptr<Kernel>> make_direct_pool(const KernelCreateArgs& args);

}  // namespace streamline::ops::cpu
