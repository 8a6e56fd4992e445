#pragma once
// Value kinds (tensor, sequence, optional) and element types from each operator's type rule, for the
// values ONNX's type inference leaves open: outputs of operators newer than the ONNX library's
// schemas (the string ops, Optional* from opset 18), values inside SequenceMap/Loop/If bodies, and
// graphs built by hand. Kernels are picked at load by their inputs' element types, and an input
// whose kind is wrong for its operator is refused at load, so both need to be right before then.
//
//   SL_ASSIGN_OR_RETURN(Graph g, import_onnx_file(path));   // runs infer_value_types(g)
//   infer_value_types(g);                                    // after building a graph by hand
//
// Rules: SequenceEmpty/Construct/Insert/Erase, SplitToSequence and SequenceMap give sequences;
// SequenceAt, ConcatFromSequence give tensors of the element type, SequenceLength an int64 tensor;
// Optional an optional of its input (or of its `type`); OptionalGetElement what the optional holds;
// OptionalHasElement a bool tensor; Identity, If and Loop pass kinds through from their inputs or
// branches; StringNormalizer, StringConcat, StringSplit give strings, RegexFullMatch bools and
// ai.onnx.ml LabelEncoder the type of its values. An op's own rule sets the type it specifies (it is
// right where a generic guess was made earlier); pass-through rules only fill what is unknown.

#include "graph/ir.h"

namespace streamline::graph {

// Applies the rules to every node of `g` and of its subgraphs, in topological order; subgraph inputs
// of SequenceMap and Loop bodies and values captured from enclosing graphs take their kinds from
// there. Returns how many values changed. Graphs with a cycle are left as they are (import refuses them).
int infer_value_types(Graph& g);

}  // namespace streamline::graph
