// Host side of precision and epilogue handling shared by the CUDA kernel classes (see epilogue.h).

#include "ops/cuda/epilogue.h"

#include "ops/op_params.h"

namespace streamline::ops::cuda {

Status expect_dtype(const TensorInfo& t, DType want, const std::string& who) {
  if (t.dtype != want)
    return unsupported(who + ": this CUDA kernel takes " + dtype_name(want) + ", got " + dtype_name(t.dtype));
  if (t.layout != Layout::kPlain) return unsupported(who + ": the CUDA kernel takes plain layouts only");
  return ok_status();
}

Result<Activation> parse_activation(const graph::Node& node, bool allow_gelu) {
  SL_ASSIGN_OR_RETURN(ActivationAttrs a, read_activation(node, allow_gelu));
  return to_backend_activation<Activation>(a);
}

}  // namespace streamline::ops::cuda
