// Device code of the elementwise kernels: unary ops, binary ops with numpy broadcasting, and the
// strided gather copy behind Transpose. Grid-stride loops, one element per thread per step.

#include <cuda_runtime.h>

#include "ops/cuda/launch.h"

namespace streamline::ops::cuda {
namespace {

constexpr int kThreads = 256;

// Enough blocks to fill the device several times over; the grid-stride loop covers the rest.
unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

template <UnaryOp Op>
__device__ __forceinline__ float unary(float x) {
  if constexpr (Op == UnaryOp::kRelu) return x > 0.f ? x : 0.f;
  if constexpr (Op == UnaryOp::kSigmoid) return 1.f / (1.f + expf(-x));
  if constexpr (Op == UnaryOp::kTanh) return tanhf(x);
  if constexpr (Op == UnaryOp::kGelu) return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
  if constexpr (Op == UnaryOp::kExp) return expf(x);
  if constexpr (Op == UnaryOp::kLog) return logf(x);
  if constexpr (Op == UnaryOp::kSqrt) return sqrtf(x);
  if constexpr (Op == UnaryOp::kNeg) return -x;
  if constexpr (Op == UnaryOp::kAbs) return fabsf(x);
  if constexpr (Op == UnaryOp::kErf) return erff(x);
  if constexpr (Op == UnaryOp::kReciprocal) return 1.f / x;
  return x;
}

template <UnaryOp Op>
__global__ void unary_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = unary<Op>(x[i]);
}

template <BinaryOp Op>
__device__ __forceinline__ float binary(float a, float b) {
  if constexpr (Op == BinaryOp::kAdd) return a + b;
  if constexpr (Op == BinaryOp::kSub) return a - b;
  if constexpr (Op == BinaryOp::kMul) return a * b;
  return a / b;
}

// Inputs may alias the output (in-place), so no __restrict__ here.
template <BinaryOp Op>
__global__ void binary_kernel(const float* a, const float* b, float* y, int64_t n, BroadcastDims d) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    if (d.same_shape) {
      y[i] = binary<Op>(a[i], b[i]);
      continue;
    }
    int64_t rest = i, ia = 0, ib = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t idx = rest % d.out[k];
      rest /= d.out[k];
      ia += idx * d.a_stride[k];
      ib += idx * d.b_stride[k];
    }
    y[i] = binary<Op>(a[ia], b[ib]);
  }
}

__global__ void strided_copy_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, StridedCopyDims d) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t rest = i, ix = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      ix += (rest % d.out[k]) * d.in_stride[k];
      rest /= d.out[k];
    }
    y[i] = x[ix];
  }
}

template <UnaryOp Op>
void unary_launch(const float* x, float* y, int64_t n, cudaStream_t s) {
  unary_kernel<Op><<<grid_for(n), kThreads, 0, s>>>(x, y, n);
}

template <BinaryOp Op>
void binary_launch(const float* a, const float* b, float* y, int64_t n, const BroadcastDims& d, cudaStream_t s) {
  binary_kernel<Op><<<grid_for(n), kThreads, 0, s>>>(a, b, y, n, d);
}

}  // namespace

cudaError_t launch_unary(UnaryOp op, const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  switch (op) {
    case UnaryOp::kRelu:
      unary_launch<UnaryOp::kRelu>(x, y, n, stream);
      break;
    case UnaryOp::kSigmoid:
      unary_launch<UnaryOp::kSigmoid>(x, y, n, stream);
      break;
    case UnaryOp::kTanh:
      unary_launch<UnaryOp::kTanh>(x, y, n, stream);
      break;
    case UnaryOp::kGelu:
      unary_launch<UnaryOp::kGelu>(x, y, n, stream);
      break;
    case UnaryOp::kExp:
      unary_launch<UnaryOp::kExp>(x, y, n, stream);
      break;
    case UnaryOp::kLog:
      unary_launch<UnaryOp::kLog>(x, y, n, stream);
      break;
    case UnaryOp::kSqrt:
      unary_launch<UnaryOp::kSqrt>(x, y, n, stream);
      break;
    case UnaryOp::kNeg:
      unary_launch<UnaryOp::kNeg>(x, y, n, stream);
      break;
    case UnaryOp::kAbs:
      unary_launch<UnaryOp::kAbs>(x, y, n, stream);
      break;
    case UnaryOp::kErf:
      unary_launch<UnaryOp::kErf>(x, y, n, stream);
      break;
    case UnaryOp::kReciprocal:
      unary_launch<UnaryOp::kReciprocal>(x, y, n, stream);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_binary(BinaryOp op, const float* a, const float* b, float* y, int64_t n, const BroadcastDims& d,
                          cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  switch (op) {
    case BinaryOp::kAdd:
      binary_launch<BinaryOp::kAdd>(a, b, y, n, d, stream);
      break;
    case BinaryOp::kSub:
      binary_launch<BinaryOp::kSub>(a, b, y, n, d, stream);
      break;
    case BinaryOp::kMul:
      binary_launch<BinaryOp::kMul>(a, b, y, n, d, stream);
      break;
    case BinaryOp::kDiv:
      binary_launch<BinaryOp::kDiv>(a, b, y, n, d, stream);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_strided_copy(const float* x, float* y, int64_t n, const StridedCopyDims& d, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  strided_copy_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, n, d);
  return cudaGetLastError();
}

}  // namespace streamline::ops::cuda
