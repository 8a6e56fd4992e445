#pragma once
// Shared pieces of the int8 CPU kernels: where each quantised op keeps its inputs, constant
// quantisation parameters, the requantising epilogue of the plain loops, and the factories of the
// plain-loop kernels (quant_linear.cc) that the oneDNN kernels (qconv.cc, qmatmul.cc) fall back to.
//
//   const QSlots s = conv_slots(QOpKind::kFused);          // input positions of streamline.QConv
//   SL_ASSIGN_OR_RETURN(QEpilogue e, QEpilogue::from_inputs(s, infos, m, who));
//   out[i] = e.apply_q8(acc, channel, z_value);            // plain loops
//
// The ops and their formulas (x, w quantised inputs; acc the int32 sum of (x - x_zp)(w - w_zp)):
//   QLinearConv / QLinearMatMul  y = sat(round(x_scale * w_scale[m] * (acc + B[m]) / y_scale) + y_zp)
//   ConvInteger / MatMulInteger  y = acc (int32)
//   streamline.QConv, QMatMul    r = x_scale * w_scale[m] * (acc + B[m]) + z_scale * (Z - z_zp);
//                                y = sat(round(act(r) / y_scale) + y_zp), or y = act(r) in float32
//                                when y_scale and y_zero_point are absent; QConv's optional
//                                pre_residual_clip [lo, hi] clamps the first term before Z is added
//   streamline.MatMulIntegerToFloat  y = act(a_scale * b_scale[n] * acc + bias[n]) in float32
// Thread-safety: everything here is immutable after construction.

#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ops/kernel.h"
#include "ops/op_params.h"

namespace streamline::ops::cpu {

// Which op of a family a kernel serves; it decides the input positions (QSlots).
enum class QOpKind {
  kQLinear,  // QLinearConv, QLinearMatMul
  kInteger,  // ConvInteger, MatMulInteger
  kFused,    // streamline.QConv, streamline.QMatMul
  kToFloat,  // streamline.MatMulIntegerToFloat
};

// Input positions of one op; -1 where the op has no such input.
struct QSlots {
  int x = 0, x_scale = -1, x_zp = -1, w = -1, w_scale = -1, w_zp = -1;
  int y_scale = -1, y_zp = -1, bias = -1, z = -1, z_scale = -1, z_zp = -1;
};
QSlots conv_slots(QOpKind kind);
QSlots matmul_slots(QOpKind kind);

inline bool is_q8(DType t) {
  return t == DType::kUInt8 || t == DType::kInt8;
}
inline int32_t q8_min(DType t) {
  return t == DType::kInt8 ? -128 : 0;
}
inline int32_t q8_max(DType t) {
  return t == DType::kInt8 ? 127 : 255;
}

// Value k (0 for a one-element tensor) of a float, int32 or 8-bit tensor as double.
double param_value(const Tensor& t, int64_t k);
// The present input at `slot` of `inputs` (kernel run arguments), or nullptr.
const Tensor* slot_tensor(std::span<const Tensor> inputs, int slot);
// The constant value of input `slot` in reshape/create infos, or nullptr when absent or not constant.
const Tensor* slot_constant(std::span<const TensorInfo> infos, int slot);
// True when input `slot` is present in `infos`.
bool slot_present(std::span<const TensorInfo> infos, int slot);

// An activation on real values (the ops' `activation` attribute, Gelu included).
float apply_activation(const ActivationAttrs& a, float v);
// True when act(c * v) == c * act(v) for every c > 0 (none, Relu, LeakyRelu) or when the
// activation maps onto scaled bounds (Clip): it can then run in the output's quantised units.
bool activation_scales(const ActivationAttrs& a);

// The requantising end of the plain loops: activation, then the output's quantisation.
struct QEpilogue {
  DType out = DType::kInt32;  // kInt32 (the accumulator as is), kUInt8/kInt8 or kFloat32
  double y_scale = 1.0;
  int32_t y_zp = 0;
  double z_scale = 0.0;  // residual Z (streamline.QConv): its scale and zero point
  int32_t z_zp = 0;
  // Bounds on the product (plus bias) before Z is added (QConv's pre_residual_clip).
  double clip_lo = -INFINITY, clip_hi = INFINITY;
  ActivationAttrs act;

  // act(r), the value a float32 output holds.
  double activated(double r) const {
    return act.kind == ActivationKind::kNone ? r : apply_activation(act, static_cast<float>(r));
  }
  // The quantised output for real value r.
  int32_t quantize(double r) const {
    const double q = std::nearbyint(activated(r) / y_scale) + y_zp;
    return static_cast<int32_t>(std::min<double>(q8_max(out), std::max<double>(q8_min(out), q)));
  }
};

// Reads the epilogue of an op from its run arguments (scales and zero points of the output and
// the residual; the output dtype from y_zero_point, float32 when the op has y inputs but they are
// absent, int32 for the Integer ops).
QEpilogue read_epilogue(QOpKind kind, const QSlots& slots, std::span<const Tensor> inputs, const ActivationAttrs& act);

// The plain-loop kernels of quant_linear.cc: any dtype combination, constant or run-time inputs,
// plain or channels-last activations (convolutions). Used where the oneDNN kernels do not apply.
Result<std::unique_ptr<Kernel>> make_plain_qconv(const KernelCreateArgs& args, QOpKind kind);
Result<std::unique_ptr<Kernel>> make_plain_qmatmul(const KernelCreateArgs& args, QOpKind kind);

}  // namespace streamline::ops::cpu
