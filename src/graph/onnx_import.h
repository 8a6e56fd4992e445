#pragma once
// Importing ONNX models into the graph IR.
//
//   graph::ImportOptions opts;
//   SL_ASSIGN_OR_RETURN(graph::Graph g, graph::import_onnx_file("model.onnx", opts));
//
// Every failure is a Status naming the file and, where there is one, the node, value or tensor:
// truncated or corrupt protobuf, a missing initializer or external-data file, a dangling input,
// a cycle, an opset outside 1..26 of the default domain, an unsupported element type, a node of
// opset 1..6 that cannot be upgraded to opset 7 (graph/legacy_opset.h).

#include <string>
#include <string_view>

#include "core/status.h"
#include "graph/ir.h"

namespace streamline::graph {

struct ImportOptions {
  // Lowest and highest opset of the default domain accepted. Outside: Unsupported. Nodes of models
  // below opset 7 are upgraded to opset-7 semantics at import (graph/legacy_opset.h).
  int min_opset = 1;
  int max_opset = 26;
  // Upper bound on the bytes of one external-data file read (guards against corrupt lengths).
  int64_t max_external_bytes = int64_t{64} << 30;
};

// Reads and converts `path`; external data is looked up relative to the file's folder.
Result<Graph> import_onnx_file(const std::string& path, const ImportOptions& options = {});
// Converts serialized ModelProto bytes; `base_dir` resolves external-data locations ("" = none allowed).
Result<Graph> import_onnx_bytes(std::string_view bytes, const std::string& base_dir, const ImportOptions& options = {},
                                const std::string& what = "model");

}  // namespace streamline::graph
