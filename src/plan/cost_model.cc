#include "plan/cost_model.h"

namespace streamline::plan {
namespace {

// The weight input of a convolution-like op, or 0 when `op` is none: 1 for the float ones and
// ConvInteger, 3 (after the input's scale and zero point) for QLinearConv and the fused
// streamline.QConv. An int8 multiply-add counts as a float one: VNNI does four per lane, but the
// requantising epilogue and the smaller layers' overheads take most of that back.
int conv_weight_slot(const std::string& op) {
  if (op == "Conv" || op == "FusedConv" || op == "ConvTranspose" || op == "ConvInteger") return 1;
  if (op == "QLinearConv" || op == "QConv") return 3;
  return 0;
}

// The int8 matrix products; their first input is A, as for MatMul.
bool is_int8_matmul(const std::string& op) {
  return op == "MatMulInteger" || op == "QLinearMatMul" || op == "QMatMul";
}

}  // namespace

double estimate_cost(const CostInput& in) {
  const double bytes = static_cast<double>(in.bytes_moved) * kBytesWeight;
  if (in.outputs.empty()) return bytes;
  const Shape& y = in.outputs[0];
  const double out_n = static_cast<double>(y.numel());
  if (const int ws = conv_weight_slot(in.op); ws > 0 && in.inputs.size() > static_cast<size_t>(ws)) {
    const Shape& w = in.inputs[static_cast<size_t>(ws)];
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
  if ((in.op == "MatMul" || in.op == "FusedMatMul" || in.op == "Gemm" || in.op == "FusedGemm" ||
       is_int8_matmul(in.op)) &&
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
