#pragma once
// Host side of the CUDA kernels' precision and epilogue handling: the element type of a def's
// dtype, input checks, and the fused ops' activation attributes.
//
//   SL_ASSIGN_OR_RETURN(Activation act, parse_activation(node, /*allow_gelu=*/true));
//   SL_RETURN_IF_ERROR(expect_dtype(info, DType::kFloat16, who));
//   EpilogueArgs e;  e.act = act;  e.bias = b.raw();  e.bias_count = n;
//   SL_CUDA_RETURN_IF_ERROR(launch_epilogue(elem_type_of(dtype), y.raw(), y.numel(), e, stream), who);

#include <string>

#include "ops/cuda/launch.h"
#include "ops/kernel.h"

namespace streamline::ops::cuda {

// kFloat16 -> kF16, anything else kF32 (the defs are registered for these two dtypes only).
inline ElemType elem_type_of(DType t) {
  return t == DType::kFloat16 ? ElemType::kF16 : ElemType::kF32;
}

// Unsupported unless `t` is a plain tensor of dtype `want` (the dtype of the def).
Status expect_dtype(const TensorInfo& t, DType want, const std::string& who);

// The fused ops' `activation` ("" / "None" / "Identity", Relu, LeakyRelu [alpha=0.01], Clip
// [min=-FLT_MAX, max=FLT_MAX], Sigmoid, HardSigmoid [alpha=0.2, beta=0.5], Tanh, and with
// allow_gelu the erf-form Gelu) with `activation_params`, as the CPU kernels read them.
// InvalidArgument for an unknown name or Clip min > max.
Result<Activation> parse_activation(const graph::Node& node, bool allow_gelu);

// True when the epilogue pass would change nothing (no bias, no residual, no activation).
inline bool epilogue_is_identity(const EpilogueArgs& e) {
  return e.bias == nullptr && e.residual == nullptr && e.act.kind == ActKind::kNone;
}

}  // namespace streamline::ops::cuda
