#include "plan/cost_model.h"

namespace streamline::plan {

double estimate_cost(const CostInput& in) {
  const double bytes = static_cast<double>(in.bytes_moved) * kBytesWeight;
  if (in.outputs.empty()) return bytes;
  const Shape& y = in.outputs[0];
  const double out_n = static_cast<double>(y.numel());
  if ((in.op == "Conv" || in.op == "FusedConv" || in.op == "ConvTranspose") && in.inputs.size() >= 2) {
    const Shape& w = in.inputs[1];
    double per_out = 1;
    for (size_t i = 1; i < w.rank(); ++i) per_out *= static_cast<double>(w[i]);  // Cin/g * kernel
    if (in.op == "ConvTranspose") {
      const Shape& x = in.inputs[0];
      double k = 1;
      for (size_t i = 2; i < w.rank(); ++i) k *= static_cast<double>(w[i]);
      return 2.0 * static_cast<double>(x.numel()) * static_cast<double>(w[1]) * k + bytes;
    }
    return 2.0 * out_n * per_out + bytes;
  }
  if ((in.op == "MatMul" || in.op == "FusedMatMul" || in.op == "Gemm" || in.op == "FusedGemm") &&
      in.inputs.size() >= 2) {
    const Shape& a = in.inputs[0];
    const double k = a.rank() ? static_cast<double>(in.op.find("Gemm") != std::string::npos && a.rank() == 2
                                                        ? (a[0] * a[1]) / (y.rank() ? y[0] : 1)
                                                        : a.back())
                              : 1.0;
    return 2.0 * out_n * k + bytes;
  }
  return out_n + bytes;
}

}  // namespace streamline::plan
