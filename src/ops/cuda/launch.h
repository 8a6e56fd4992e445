#pragma once
// Launchers of our own CUDA kernels (the .cu files), in plain types so that the kernel classes
// (.cc, host compiler) and nvcc share nothing heavier than this header.
//
//   BroadcastDims d = ...;                    // filled by the Add/Sub/Mul/Div kernel class
//   cudaError_t e = launch_binary(BinaryOp::kAdd, a, b, y, n, d, stream);   // cudaGetLastError()
//
// Every launcher enqueues on `stream` and returns the launch error (not the kernel's outcome,
// which the stream reports later). n == 0 or rows == 0 launches nothing. fp32 only.

#include <cuda_runtime_api.h>

#include <cstdint>

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

cudaError_t launch_unary(UnaryOp op, const float* x, float* y, int64_t n, cudaStream_t stream);
cudaError_t launch_binary(BinaryOp op, const float* a, const float* b, float* y, int64_t n, const BroadcastDims& d,
                          cudaStream_t stream);
cudaError_t launch_strided_copy(const float* x, float* y, int64_t n, const StridedCopyDims& d, cudaStream_t stream);

// Softmax over the `cols` contiguous elements of each of `rows` rows.
cudaError_t launch_softmax(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);
// LayerNormalization over `cols` contiguous elements per row; `bias` may be null; scale and bias
// have `cols` elements.
cudaError_t launch_layer_norm(const float* x, const float* scale, const float* bias, float* y, int64_t rows,
                              int64_t cols, float epsilon, cudaStream_t stream);

}  // namespace streamline::ops::cuda
