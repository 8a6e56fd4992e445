#pragma once
// Running ONNX's C++ shape inference on untrusted models without letting it crash the process.
//
//   onnx::ModelProto copy = ...;                       // a private copy; inference writes into it
//   std::string why;
//   if (!infer_onnx_shapes(copy, opsets, &why)) log(why);
//   // copy.graph().value_info() (and subgraphs') now hold the types ONNX could infer
//
// ONNX 1.12's inference functions trust their node: a Scan without a body, a Conv whose weight
// rank differs from its input's, a zero stride or an out-of-range axis are read past the end or
// divided by. Three safeguards keep inference on the safe side of that:
//   1. every node is checked against its schema first (ONNX's own checker rules for inputs,
//      outputs and attributes); a node that fails is moved to a domain no schema knows;
//   2. inference looks operators up in guarded_schema_registry(), which wraps the inference
//      functions of the operators known to misbehave in checks of their actual input types and
//      attributes, and leaves out those it cannot make safe (and every non-default domain);
//   3. model-local functions are dropped (a function calling itself would recurse forever).
// The guards were chosen by stress-testing every default-domain schema of opsets 1..17 with
// random schema-valid nodes; see fuzz/infer_stress.cc. Models of opsets 18 and later are inferred
// with the newest schema ONNX 1.12 has for each op: nodes using inputs or attributes added since
// fail step 1, new operators have no schema, and the few ops whose later versions changed what the
// same signature means (DFT and GridSample from opset 20) are left out.
//
// Thread-safe: concurrent calls on different models are fine.

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <map>
#include <string>

namespace streamline::graph {

// Runs inference on `model` in place. Returns false (with the reason in `error`) when ONNX gave
// up; whatever it inferred before that is still in `model`. `opsets` maps normalized domains
// ("" for ai.onnx) to the model's opset versions.
bool infer_onnx_shapes(onnx::ModelProto& model, const std::map<std::string, int>& opsets, std::string* error);

// ONNX's schemas as inference may use them (see above). Lives for the whole process.
const onnx::ISchemaRegistry& guarded_schema_registry();

// Step 1 above, applied to `graph` and its subgraphs. Returns how many nodes were moved.
int hide_unverified_nodes(onnx::GraphProto* graph, const std::map<std::string, int>& opsets);

}  // namespace streamline::graph
