#pragma once
// Upgrading models of default-domain opsets 1 to 6 to the semantics of opset 7, the oldest the
// kernels implement. The importer calls it after ONNX shape inference, so that the ranks the
// rewrites need are known.
//
//   if (model_opset < graph::kLegacyOpsetLimit)
//     SL_RETURN_IF_ERROR(graph::upgrade_legacy_nodes(g, model_opset));
//   // every default-domain node, subgraphs included, now has opset 7 and opset-7 inputs/attributes
//
// What changes, per the ONNX operator changelog:
//   - attributes that opset 7 no longer has are dropped: consumed_inputs (opset 1), is_test
//     (BatchNormalization, Dropout), broadcast (Gemm), output_sequence (RNN, GRU, LSTM);
//   - legacy broadcasting of Add, Sub, Mul, Div, Pow, And, Or, Xor, Equal, Greater and Less
//     (broadcast=1, axis=k: B's dims line up with A's from dim k) becomes numpy broadcasting: B gets
//     trailing 1s up to A's rank (a constant B a reshaped copy, any other B an inserted Unsqueeze);
//     without `axis` B lines up with A's last dims, which numpy broadcasting does already;
//   - PRelu's 1-d slope is per channel (dim 1 of X) before opset 7; it gets trailing 1s the same way;
//   - forms of opsets 1 to 5: Reshape's `shape` attribute becomes a constant input, Concat's default
//     axis (1) is written out, Pad's `paddings` is renamed `pads`, Split's sizes input becomes the
//     `split` attribute, Tile's tiles/axis inputs become a repeats input, Cast's type name becomes a
//     type number, LpPool's float `p` an integer, Upsample's height_scale/width_scale become `scales`.
// A node that cannot be rewritten (A's rank unknown, an axis that does not fit, a sizes input that is
// not constant...) is an error naming the node and the model's opset. Ops without a kernel are left
// for kernel lookup to report.
//
// Not synchronised: the caller owns `g`.

#include "core/status.h"
#include "graph/ir.h"

namespace streamline::graph {

// The oldest default-domain opset the kernels implement; models below it are upgraded.
inline constexpr int kLegacyOpsetLimit = 7;

// Rewrites the default-domain nodes of `g` and of its subgraphs from `model_opset` (1..6) to opset 7
// and sets their opset, and g.opsets[""], to 7; nodes it inserts get opset 7 too. Does nothing when
// model_opset >= kLegacyOpsetLimit. Producer/consumer edges are up to date afterwards. On error `g`
// may be partly rewritten and should be dropped.
[[nodiscard]] Status upgrade_legacy_nodes(Graph& g, int model_opset);

}  // namespace streamline::graph
