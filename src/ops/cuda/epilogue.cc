// Host side of precision and epilogue handling shared by the CUDA kernel classes (see epilogue.h).

#include "ops/cuda/epilogue.h"

#include <cfloat>

namespace streamline::ops::cuda {

Status expect_dtype(const TensorInfo& t, DType want, const std::string& who) {
  if (t.dtype != want)
    return unsupported(who + ": this CUDA kernel takes " + dtype_name(want) + ", got " + dtype_name(t.dtype));
  if (t.layout != Layout::kPlain) return unsupported(who + ": the CUDA kernel takes plain layouts only");
  return ok_status();
}

Result<Activation> parse_activation(const graph::Node& node, bool allow_gelu) {
  const std::string name = node.attr_string("activation", "");
  const std::vector<float> p = node.attr_floats("activation_params");
  Activation a;
  if (name.empty() || name == "None" || name == "Identity") {
    a.kind = ActKind::kNone;
  } else if (name == "Relu") {
    a.kind = ActKind::kRelu;
  } else if (name == "LeakyRelu") {
    a.kind = ActKind::kLeakyRelu;
    a.alpha = p.empty() ? 0.01f : p[0];
  } else if (name == "Clip") {
    a.kind = ActKind::kClip;
    a.alpha = p.size() > 0 ? p[0] : -FLT_MAX;
    a.beta = p.size() > 1 ? p[1] : FLT_MAX;
    if (a.alpha > a.beta) return invalid_argument(node.describe() + ": Clip activation with min > max");
  } else if (name == "Sigmoid") {
    a.kind = ActKind::kSigmoid;
  } else if (name == "HardSigmoid") {
    a.kind = ActKind::kHardSigmoid;
    a.alpha = p.size() > 0 ? p[0] : 0.2f;
    a.beta = p.size() > 1 ? p[1] : 0.5f;
  } else if (name == "Tanh") {
    a.kind = ActKind::kTanh;
  } else if (name == "Gelu" && allow_gelu) {
    a.kind = ActKind::kGelu;
  } else {
    return invalid_argument(node.describe() + ": unknown activation '" + name + "'");
  }
  return a;
}

}  // namespace streamline::ops::cuda
