#pragma once
// Launchers of our own CUDA kernels (the .cu files), in plain types so that the kernel classes
// (.cc, host compiler) and nvcc share nothing heavier than this header.
//
//   BroadcastDims d = ...;                    // filled by the Add/Sub/Mul/Div kernel class
//   cudaError_t e = launch_binary(BinaryOp::kAdd, ElemType::kF16, a, b, y, n, d, stream);
//
// Every launcher enqueues on `stream` and returns the launch error (not the kernel's outcome,
// which the stream reports later). n == 0 or rows == 0 launches nothing. Tensors are fp32 or fp16
// (ElemType); the arithmetic is fp32 for both (fp16 elements are widened on load and rounded to
// nearest on store; reductions accumulate in fp32).

#include <cuda_runtime_api.h>

#include <cstdint>

// ElemType (shared with the tensor kernels); these launchers take kF32 and kF16 only and return
// cudaErrorInvalidValue for the others.
#include "ops/cuda/launch_tensor.h"

namespace streamline::ops::cuda {

inline constexpr int kMaxRank = 8;

enum class UnaryOp : int32_t { kRelu, kSigmoid, kTanh, kGelu, kExp, kLog, kSqrt, kNeg, kAbs, kErf, kReciprocal };
enum class BinaryOp : int32_t { kAdd, kSub, kMul, kDiv };

// Output dims and, per output dim, each input's element stride (0 where it broadcasts).
struct BroadcastDims {
  int32_t rank = 0;
  int64_t out[kMaxRank] = {};
  int64_t a_stride[kMaxRank] = {};
  int64_t b_stride[kMaxRank] = {};
  bool same_shape = false;  // both inputs dense with the output's shape: no index arithmetic
};

// A gather copy: y[i] = x[sum_d idx_d(i) * in_stride[d]] over the output dims (Transpose, and
// broadcasting a Gemm C into the output).
struct StridedCopyDims {
  int32_t rank = 0;
  int64_t out[kMaxRank] = {};
  int64_t in_stride[kMaxRank] = {};
};

// The activation of a fused op's epilogue (streamline's `activation` / `activation_params`).
enum class ActKind : int32_t { kNone, kRelu, kLeakyRelu, kClip, kSigmoid, kHardSigmoid, kTanh, kGelu };
struct Activation {
  ActKind kind = ActKind::kNone;
  float alpha = 0.f;  // LeakyRelu slope, Clip min, HardSigmoid alpha
  float beta = 0.f;   // Clip max, HardSigmoid beta
};

// What the epilogue adds before the activation. Per element i of y (n elements):
//   y[i] = act(y[i] + bias_scale * bias[(i / bias_inner) % bias_count] + residual_scale * residual[i])
// bias and residual may be null (not added); they have y's element type. Conv: bias_inner = H*W,
// bias_count = channels. Gemm: a row bias [N] is bias_inner 1, bias_count N; a column C [M,1] is
// bias_inner N, bias_count M; a scalar C is bias_count 1. residual may alias y.
struct EpilogueArgs {
  Activation act;
  const void* bias = nullptr;
  int64_t bias_inner = 1;
  int64_t bias_count = 1;
  float bias_scale = 1.f;
  const void* residual = nullptr;
  float residual_scale = 1.f;
};

cudaError_t launch_unary(UnaryOp op, ElemType t, const void* x, void* y, int64_t n, cudaStream_t stream);
cudaError_t launch_binary(BinaryOp op, ElemType t, const void* a, const void* b, void* y, int64_t n,
                          const BroadcastDims& d, cudaStream_t stream);
cudaError_t launch_strided_copy(ElemType t, const void* x, void* y, int64_t n, const StridedCopyDims& d,
                                cudaStream_t stream);

// Softmax over the `cols` contiguous elements of each of `rows` rows.
cudaError_t launch_softmax(ElemType t, const void* x, void* y, int64_t rows, int64_t cols, cudaStream_t stream);
// LayerNormalization over `cols` contiguous elements per row; `bias` may be null; scale and bias
// have `cols` elements of type `t`.
cudaError_t launch_layer_norm(ElemType t, const void* x, const void* scale, const void* bias, void* y, int64_t rows,
                              int64_t cols, float epsilon, cudaStream_t stream);

// The fused ops' epilogue, in place on y (one pass; see EpilogueArgs).
cudaError_t launch_epilogue(ElemType t, void* y, int64_t n, const EpilogueArgs& e, cudaStream_t stream);

// fp32 forms, for callers that only handle float32.
inline cudaError_t launch_unary(UnaryOp op, const float* x, float* y, int64_t n, cudaStream_t stream) {
  return launch_unary(op, ElemType::kF32, x, y, n, stream);
}
inline cudaError_t launch_binary(BinaryOp op, const float* a, const float* b, float* y, int64_t n,
                                 const BroadcastDims& d, cudaStream_t stream) {
  return launch_binary(op, ElemType::kF32, a, b, y, n, d, stream);
}
inline cudaError_t launch_strided_copy(const float* x, float* y, int64_t n, const StridedCopyDims& d,
                                       cudaStream_t stream) {
  return launch_strided_copy(ElemType::kF32, x, y, n, d, stream);
}
inline cudaError_t launch_softmax(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  return launch_softmax(ElemType::kF32, x, y, rows, cols, stream);
}
inline cudaError_t launch_layer_norm(const float* x, const float* scale, const float* bias, float* y, int64_t rows,
                                     int64_t cols, float epsilon, cudaStream_t stream) {
  return launch_layer_norm(ElemType::kF32, x, scale, bias, y, rows, cols, epsilon, stream);
}

}  // namespace streamline::ops::cuda
