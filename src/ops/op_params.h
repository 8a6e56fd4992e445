#pragma once
// Host-side parameter logic that the CPU and the CUDA kernels share: axis and constant-input
// readers, and the attribute readers and shape arithmetic of Slice, the pools, convolutions, the
// fused activations, the reductions, broadcasting, MatMul and Attention (the data-movement ops are
// in ops/data_shapes.h). Each function gives the same answer and the same error message on both
// devices, so a graph that one device accepts the other accepts too.
//
//   // Slice::reshape(), either device:
//   SL_ASSIGN_OR_RETURN(SliceGeometry g, slice_geometry(attrs_, opset_, in, who_));
//   CopyPlan plan = make_copy_plan(esz, g.out.dims(), g.strides, g.offset);
//
//   // MaxPool::create() and reshape():
//   SL_ASSIGN_OR_RETURN(PoolAttrs a, read_pool_attrs(node, /*global=*/false, who));
//   SL_ASSIGN_OR_RETURN(std::vector<PoolAxis> axes, pool_axes(a, x_shape, /*global=*/false, who));
//
// Errors name the node through `who` (its describe()), as "<who>: <message>". No function here
// keeps state; all are thread-safe.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "graph/ir.h"
#include "ops/kernel.h"

namespace streamline::ops {

// ---- Axes and constant inputs -------------------------------------------------------------------

// `axis` in [-rank, rank) mapped to [0, rank); false when out of range. For callers that test an
// axis without reporting it (accepts(), run() after reshape() checked it); the others use the form
// below.
bool normalize_axis(int64_t axis, int64_t rank, int64_t* out);
// The same, with InvalidArgument "<who>: axis A is out of range for rank R" when out of range.
Result<int64_t> normalize_axis(int64_t axis, int64_t rank, const std::string& who);

// The integer values of a shape-like input (starts, axes, shape ...; int32 or int64, any rank).
// Unsupported naming `what` when the value is not a constant known at reshape; InvalidArgument for
// another dtype.
Result<std::vector<int64_t>> constant_ints(const TensorInfo& info, std::string_view what, const std::string& who);

// ---- Slice --------------------------------------------------------------------------------------

// Slice's attributes (opset 1-9); from opset 10 the same values come as constant inputs 1 to 4.
struct SliceAttrs {
  std::vector<int64_t> starts, ends, axes;
  bool has_axes = false;  // false: the axes are 0 .. starts.size() - 1
};

// Reads starts / ends / axes when the node's opset keeps them as attributes (empty otherwise).
// Does not check that starts and ends are present; slice_geometry() checks their lengths.
SliceAttrs read_slice_attrs(const graph::Node& node);

// What Slice does to one input shape, per input dim: the first element taken, the step, and the
// output length; plus the dense source strides (times the step) and the element offset a strided
// copy of the input needs.
struct SliceGeometry {
  Shape out;
  std::vector<int64_t> begin;    // first source index per dim (0 where the output is empty)
  std::vector<int64_t> step;     // 1 on dims Slice does not touch
  std::vector<int64_t> strides;  // source element stride per output dim
  int64_t offset = 0;            // source element offset of the first output element
};

// Slice's geometry for `in` (data, then at opset 10+ starts, ends, axes, steps as constants):
// negative starts/ends count from the end and are clamped, negative steps walk backwards.
// InvalidArgument for missing inputs, lengths that differ, an axis out of range or repeated, a
// zero step; Unsupported when starts/ends/axes/steps are not constants.
Result<SliceGeometry> slice_geometry(const SliceAttrs& attrs, int opset, std::span<const TensorInfo> in,
                                     const std::string& who);

// ---- MaxPool, AveragePool, GlobalMaxPool, GlobalAveragePool -------------------------------------

// The pooling attributes, checked (the global pools have none and keep the defaults).
struct PoolAttrs {
  std::string auto_pad = "NOTSET";  // NOTSET, SAME_UPPER, SAME_LOWER or VALID ("" reads as NOTSET)
  bool ceil_mode = false;
  bool count_include_pad = false;
  std::vector<int64_t> kernel_shape, strides, dilations, pads;  // empty = the default
};

// Reads and checks the node's pooling attributes: one input, a known auto_pad, kernel_shape present
// unless `global`, kernel_shape / strides / dilations >= 1, pads >= 0. InvalidArgument otherwise.
Result<PoolAttrs> read_pool_attrs(const graph::Node& node, bool global, const std::string& who);

// The window of one spatial axis. The defaults describe a size-1 axis with a size-1 window.
struct PoolAxis {
  int64_t in = 1;         // input size
  int64_t k = 1;          // kernel size
  int64_t s = 1;          // stride
  int64_t d = 1;          // dilation
  int64_t pad_begin = 0;  // start padding (from pads, or split from SAME_*)
  int64_t pad_end = 0;    // end padding, as declared (pads or SAME_*), before ceil_mode
  // The end padding that yields exactly `out` windows: pad_end, except with ceil_mode and explicit
  // or VALID padding, where it is widened (or narrowed) to cover the last window.
  int64_t pad_end_fit = 0;
  int64_t out = 1;  // output size
};

// Per spatial axis of `x` (rank >= 3, [N, C, spatial...]): the window and the output size, as the
// ONNX specs say, including ceil_mode (a window that would start in the end padding is dropped).
// A `global` pool's window is the whole axis. InvalidArgument when an attribute has the wrong
// length, the kernel does not fit the padded input, or an output size is not positive. The caller
// checks the rank it supports.
Result<std::vector<PoolAxis>> pool_axes(const PoolAttrs& attrs, const Shape& x, bool global, const std::string& who);

// ---- Fused activations --------------------------------------------------------------------------

// The activations fused ops (FusedConv, FusedGemm, FusedMatMul ...) apply to their output.
enum class ActivationKind { kNone, kRelu, kLeakyRelu, kClip, kSigmoid, kHardSigmoid, kTanh, kGelu };
struct ActivationAttrs {
  ActivationKind kind = ActivationKind::kNone;
  float alpha = 0.f;  // LeakyRelu alpha, Clip min, HardSigmoid alpha
  float beta = 0.f;   // Clip max, HardSigmoid beta
};

// The node's `activation` ("" / "None" / "Identity", Relu, LeakyRelu [alpha=0.01], Clip
// [min=-FLT_MAX, max=FLT_MAX], Sigmoid, HardSigmoid [alpha=0.2, beta=0.5], Tanh, and with
// allow_gelu the erf-form Gelu) with `activation_params`. InvalidArgument for an unknown name or
// Clip min > max.
Result<ActivationAttrs> read_activation(const graph::Node& node, bool allow_gelu);

// `a` as a backend's activation struct {kind, alpha, beta} whose enum names the same kinds (kNone
// ... kTanh, and kGelu where the backend has it), matched by name. A backend without kGelu reads
// activations with allow_gelu false, so never gets one.
template <typename Act>
Act to_backend_activation(const ActivationAttrs& a) {
  using K = decltype(Act{}.kind);
  Act out;
  out.alpha = a.alpha;
  out.beta = a.beta;
  switch (a.kind) {
    case ActivationKind::kNone:
      out.kind = K::kNone;
      break;
    case ActivationKind::kRelu:
      out.kind = K::kRelu;
      break;
    case ActivationKind::kLeakyRelu:
      out.kind = K::kLeakyRelu;
      break;
    case ActivationKind::kClip:
      out.kind = K::kClip;
      break;
    case ActivationKind::kSigmoid:
      out.kind = K::kSigmoid;
      break;
    case ActivationKind::kHardSigmoid:
      out.kind = K::kHardSigmoid;
      break;
    case ActivationKind::kTanh:
      out.kind = K::kTanh;
      break;
    case ActivationKind::kGelu:
      if constexpr (requires { K::kGelu; }) out.kind = K::kGelu;
      break;
  }
  return out;
}

// ---- Reductions ---------------------------------------------------------------------------------

// The output shape of a reduction of `s` over the dims marked in `reduced`: those dims dropped, or
// kept as 1 with keepdims.
Shape reduced_shape(const Shape& s, const std::vector<bool>& reduced, bool keepdims);

// The attributes of ReduceSum, ReduceMean, ReduceMax ... The axes are an attribute before opset 18
// (ReduceSum: 13) and the optional input 1 from then on.
struct ReduceAttrs {
  std::vector<int64_t> axes;  // the 'axes' attribute; not read when axes_from_input
  bool axes_from_input = false;
  bool keepdims = true;
  bool noop_with_empty_axes = false;
};
ReduceAttrs read_reduce_attrs(const graph::Node& node);

// Which dims of in[0] a reduction reduces, and its output shape.
struct ReduceAxes {
  std::vector<bool> reduced;  // per input dim; an axis may be listed twice
  bool identity = false;      // no axes and noop_with_empty_axes: the output is the input
  Shape y;
};
// No axes reduce every dim, unless noop_with_empty_axes. Unsupported when the axes input is not a
// constant; InvalidArgument for an axes input that is not int32/int64 or an axis out of range.
Result<ReduceAxes> reduce_axes(const ReduceAttrs& attrs, std::span<const TensorInfo> in, const std::string& who);

// ---- Convolution ---------------------------------------------------------------------------------

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };
// "NOTSET" (or empty), "SAME_UPPER", "SAME_LOWER", "VALID"; InvalidArgument naming any other.
Result<AutoPad> parse_auto_pad(const std::string& text, const std::string& who);

// One spatial axis of a (forward) convolution: the pads in force and the output size.
struct ConvAxis {
  int64_t pad_begin = 0, pad_end = 0, out = 0;
};
// From the input size, kernel size, stride and dilation (>= 1) and the explicit pads, which
// auto_pad replaces (VALID: none; SAME_*: the total that keeps ceil(in / stride) outputs, the odd
// one at the end for SAME_UPPER). InvalidArgument when the dilated kernel is larger than the
// padded input.
Result<ConvAxis> conv_axis(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                           int64_t pad_end, AutoPad auto_pad, const std::string& who);

// A Conv or ConvTranspose node's attributes, read once at kernel creation: auto_pad parsed, group,
// strides and dilations at least 1, pads at least 0 (InvalidArgument naming the node otherwise).
// Sizes are checked against the input's rank by conv_geometry.
struct ConvAttrs {
  bool transposed = false;
  AutoPad auto_pad = AutoPad::kNotSet;
  int64_t group = 1;
  std::vector<int64_t> kernel_shape, strides, dilations, pads, output_padding, output_shape;
};
[[nodiscard]] Result<ConvAttrs> read_conv_attrs(const graph::Node& node, bool transposed);

// The geometry of one convolution for concrete input and weight shapes: channels, per spatial axis
// the input, kernel and output sizes, strides, dilations and the pads in force, and the output shape.
struct ConvGeom {
  int64_t n = 0, c = 0, m = 0, group = 1;
  std::vector<int64_t> in, k, out, strides, dil, pad_l, pad_r;
  Shape y_shape;
};
// Per the ONNX Conv / ConvTranspose rules (auto_pad, output_padding, output_shape), the one shape
// function every Conv kernel (float and int8, CPU and CUDA) uses. Unsupported for a rank outside
// 3..5; InvalidArgument, prefixed by `who`, for weights that do not match the input or the groups,
// attribute sizes that do not match the rank, or an output size below 1.
[[nodiscard]] Result<ConvGeom> conv_geometry(const std::string& who, const ConvAttrs& a, const Shape& x,
                                             const Shape& w);

// ---- Elementwise and MatMul ---------------------------------------------------------------------

// The NumPy broadcast of two shapes; InvalidArgument "<who>: shapes A and B do not broadcast".
Result<Shape> broadcast_shape(const Shape& a, const Shape& b, const std::string& who);

// MatMul's shapes with NumPy semantics: the dims before the last two are batch dims and broadcast;
// a 1-D A reads as [1, K] and a 1-D B as [K, 1], and that unit axis is dropped from `y`.
struct MatMulShapes {
  Shape a_batch, b_batch;  // each operand's batch dims as given (not padded to `batch`'s rank)
  Shape batch;             // the broadcast batch dims
  Shape y;                 // the output: batch, then M unless A is 1-D, then N unless B is 1-D
  int64_t m = 1, k = 0, n = 1;
};
// InvalidArgument when a rank is 0, the inner dims differ or the batch dims do not broadcast. K = 0
// is allowed here (each kernel says whether it runs that).
Result<MatMulShapes> matmul_shapes(const Shape& a, const Shape& b, const std::string& who);

// Gemm's M, K and N: A is [M, K] ([K, M] with transA), B is [K, N] ([N, K] with transB); the output
// is [M, N]. InvalidArgument unless both are 2-D with equal inner dims.
struct GemmShapes {
  int64_t m = 0, k = 0, n = 0;
};
Result<GemmShapes> gemm_shapes(const Shape& a, const Shape& b, bool trans_a, bool trans_b, const std::string& who);
// InvalidArgument unless Gemm's C (rank <= 2) broadcasts to the output [M, N].
Status check_gemm_c(const Shape& c, const GemmShapes& g, const std::string& who);

// ---- Attention ----------------------------------------------------------------------------------

// The logical dims of an Attention operand of shape `s` seen through `perm` (empty = identity), and
// the dense element stride of each. `what` names the operand ("Q", "K", "V") in errors:
// InvalidArgument when perm's length is not the rank, Unsupported below rank 2.
Status attention_operand_dims(const Shape& s, const std::vector<int64_t>& perm, const char* what,
                              const std::string& who, std::vector<int64_t>* dims, std::vector<int64_t>* strides);

}  // namespace streamline::ops
