#pragma once
// Element types of values that neither the model nor ONNX's type inference gives: outputs of
// nodes from opsets newer than the ONNX library's schemas, of nodes hidden from inference, and of
// subgraphs (If/Loop/Scan bodies) whose inference stopped. Kernels are picked by their inputs'
// dtypes, so every value a node reads needs one.
//
//   SL_ASSIGN_OR_RETURN(Graph g, import_onnx_file(path));   // runs fill_missing_dtypes(g)
//   std::vector<DType> outs = fallback_output_dtypes(node, input_dtypes);
//
// The rules follow each operator's output type in the ONNX specification (Cast's `to`, CastLike's
// second input, QuantizeLinear's zero point, a branch's outputs, bool for comparisons, int64 for
// indices), and onnxruntime's quantised com.microsoft ops (QLinearAdd, QLinearConcat, QGemm, ...)
// write their output zero point's type; every other op gives its first present input's dtype. What stays unknown is
// kUndefined; reshape computes the real dtypes once shapes are bound.

#include <vector>

#include "graph/ir.h"

namespace streamline::graph {

// One dtype per output of `node` given its inputs' dtypes (kUndefined for unknown or absent).
std::vector<DType> fallback_output_dtypes(const Node& node, const std::vector<DType>& input_dtypes);

// Fills the dtype of every value of `g` (and of its subgraphs) that is still kUndefined, walking
// nodes in topological order; values captured by a subgraph take the enclosing graph's dtype.
// Never overrides a known dtype. Returns how many values it filled.
int fill_missing_dtypes(Graph& g);

}  // namespace streamline::graph
