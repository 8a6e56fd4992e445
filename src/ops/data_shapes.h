#pragma once
// The shape rules of the data-movement ops that the CPU and the CUDA kernels share: Transpose,
// Concat, Gather and the view ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout). Each
// kernel reads its attributes with the read_*() function at create() and calls the shape function
// in reshape(), so both devices accept the same graphs with the same messages.
//
//   // Transpose::create(), either device:
//   TransposeAttrs attrs = read_transpose_attrs(node);
//   // reshape():
//   SL_ASSIGN_OR_RETURN(TransposeShapes t, transpose_shape(attrs_, in[0].shape, who_));
//
// Errors name the node through `who` (its describe()), as "<who>: <message>". No function here
// keeps state; all are thread-safe. Axis and constant-input readers are in ops/op_params.h.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "graph/ir.h"
#include "ops/kernel.h"

namespace streamline::ops {

// ---- Dtypes -------------------------------------------------------------------------------------

// Unsupported for strings, InvalidArgument for an unknown dtype: what byte movers cannot move.
Status check_movable(DType t, const std::string& who);
// InvalidArgument unless an index input (`what`: "indices" ...) is int32 or int64.
Status check_index_dtype(DType t, const char* what, const std::string& who);

// ---- Transpose ----------------------------------------------------------------------------------

struct TransposeAttrs {
  bool has_perm = false;  // false: the dims are reversed
  std::vector<int64_t> perm;
};
TransposeAttrs read_transpose_attrs(const graph::Node& node);

struct TransposeShapes {
  std::vector<int64_t> perm;  // output dim k is input dim perm[k]
  Shape y;
};
// InvalidArgument when perm's length is not x's rank or perm is not a permutation of 0 .. rank-1.
Result<TransposeShapes> transpose_shape(const TransposeAttrs& attrs, const Shape& x, const std::string& who);

// ---- Concat -------------------------------------------------------------------------------------

// The 'axis' attribute: required from opset 4 (InvalidArgument without it), 1 before.
Result<int64_t> read_concat_axis(const graph::Node& node);

struct ConcatShapes {
  int64_t axis = 0;  // normalised to [0, rank)
  Shape y;
};
// InvalidArgument for no inputs, a missing one, scalars, an axis out of range, or inputs whose
// dtypes (check_movable() ones) or ranks differ or whose dims differ off the axis. Layouts are the caller's to check.
Result<ConcatShapes> concat_shape(std::span<const TensorInfo> in, int64_t axis, const std::string& who);

// ---- Gather -------------------------------------------------------------------------------------

struct GatherShapes {
  int64_t axis = 0;  // normalised to [0, rank of data)
  Shape y;           // data's dims before the axis, the indices' dims, data's dims after it
};
// in[0] is the data (check_movable()), in[1] the indices. InvalidArgument for a missing input, indices that are not
// int32/int64 or an axis out of range. Index values are checked when the kernel runs.
Result<GatherShapes> gather_shape(std::span<const TensorInfo> in, int64_t axis, const std::string& who);

// ---- View ops: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout --------------------------

// Reshape's target: a 0 copies x's dim (kept as 0 with allowzero), one -1 takes what is left.
// InvalidArgument for more than one -1, a value below -1, a 0 past x's rank, 0 and -1 together with
// allowzero, a -1 that cannot be inferred, or a target whose element count differs from x's.
Result<Shape> reshape_shape(const Shape& x, const std::vector<int64_t>& target, bool allowzero, const std::string& who);
// [product of dims before axis, product of the rest]; axis in [-rank, rank], else InvalidArgument.
Result<Shape> flatten_shape(const Shape& x, int64_t axis, const std::string& who);
// Squeeze: with `has_axes` and a non-empty list, drops those dims (InvalidArgument unless each is
// 1); otherwise drops every dim of size 1. InvalidArgument for an axis out of range or repeated.
Result<Shape> squeeze_shape(const Shape& x, const std::vector<int64_t>& axes, bool has_axes, const std::string& who);
// Unsqueeze: inserts size-1 dims at `axes` of the output (rank + axes.size()); InvalidArgument for
// an axis out of range or repeated.
Result<Shape> unsqueeze_shape(const Shape& x, const std::vector<int64_t>& axes, const std::string& who);

enum class ViewOp { kReshape, kFlatten, kSqueeze, kUnsqueeze, kIdentity, kDropout };

// A view op's attributes, read once at kernel creation.
struct ViewAttrs {
  ViewOp op = ViewOp::kIdentity;
  int opset = 0;
  bool allowzero = false;  // Reshape, from opset 14
  int64_t axis = 1;        // Flatten
  // Reshape's shape and (Un)Squeeze's axes: input 1 from opset 5 (Reshape) and 13 ((Un)Squeeze),
  // the attribute before.
  bool list_from_input = false;
  bool has_list_attr = false;
  std::vector<int64_t> list_attr;
  bool mask = false;  // Dropout with an output 1
};
// InvalidArgument for Reshape before opset 5 without 'shape' and Unsqueeze before 13 without
// 'axes'; Unsupported for an op that is not a view op.
Result<ViewAttrs> read_view_attrs(const graph::Node& node);

// The outputs of a view op for `in`: output 0 has in[0]'s dtype (check_movable()) and the new shape; Dropout's mask,
// when the node has one, has in[0]'s shape and is bool (in[0]'s dtype before opset 10). The shape
// or axes inputs of opset 5 / 13 on must be constants. Dropout runs in inference mode only:
// Unsupported when training_mode is not a constant, or is true with a ratio other than a constant 0.
Result<std::vector<OutputInfo>> view_outputs(const ViewAttrs& attrs, std::span<const TensorInfo> in,
                                             const std::string& who);

}  // namespace streamline::ops
