// Device code of the elementwise kernels: unary ops, binary ops with numpy broadcasting, and the
// strided gather copy behind Transpose, for fp32 and fp16 tensors (fp32 arithmetic). Grid-stride
// loops, one element per thread per step. Each launcher picks its instantiation from a table
// indexed by the op enum.

#include <cuda_runtime.h>

#include "ops/cuda/device_util.cuh"
#include "ops/cuda/launch.h"

namespace streamline::ops::cuda {
namespace {

constexpr int kThreads = 256;

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

// In place allowed (x == y): each thread reads and writes the same element.
template <UnaryOp Op, typename T>
__global__ void unary_kernel(const T* x, T* y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_step()) store(y, i, unary<Op>(load(x, i)));
}

template <BinaryOp Op>
__device__ __forceinline__ float binary(float a, float b) {
  if constexpr (Op == BinaryOp::kAdd) return a + b;
  if constexpr (Op == BinaryOp::kSub) return a - b;
  if constexpr (Op == BinaryOp::kMul) return a * b;
  return a / b;
}

// Inputs may alias the output (in-place), so no __restrict__ here.
template <BinaryOp Op, typename T>
__global__ void binary_kernel(const T* a, const T* b, T* y, int64_t n, BroadcastDims d) {
  for (int64_t i = first_index(); i < n; i += grid_step()) {
    if (d.same_shape) {
      store(y, i, binary<Op>(load(a, i), load(b, i)));
      continue;
    }
    int64_t rest = i, ia = 0, ib = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t idx = rest % d.out[k];
      rest /= d.out[k];
      ia += idx * d.a_stride[k];
      ib += idx * d.b_stride[k];
    }
    store(y, i, binary<Op>(load(a, ia), load(b, ib)));
  }
}

// A copy moves bits: U is an unsigned integer of the element's size.
template <typename U>
__global__ void strided_copy_kernel(const U* __restrict__ x, U* __restrict__ y, int64_t n, StridedCopyDims d) {
  for (int64_t i = first_index(); i < n; i += grid_step()) {
    int64_t rest = i, ix = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      ix += (rest % d.out[k]) * d.in_stride[k];
      rest /= d.out[k];
    }
    y[i] = x[ix];
  }
}

using UnaryFn = void (*)(const void*, void*, int64_t, cudaStream_t);
using BinaryFn = void (*)(const void*, const void*, void*, int64_t, const BroadcastDims&, cudaStream_t);

template <UnaryOp Op, typename T>
void unary_launch(const void* x, void* y, int64_t n, cudaStream_t s) {
  unary_kernel<Op, T><<<grid_for(n, kThreads), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), n);
}

template <BinaryOp Op, typename T>
void binary_launch(const void* a, const void* b, void* y, int64_t n, const BroadcastDims& d, cudaStream_t s) {
  binary_kernel<Op, T><<<grid_for(n, kThreads), kThreads, 0, s>>>(static_cast<const T*>(a), static_cast<const T*>(b),
                                                                  static_cast<T*>(y), n, d);
}

// Indexed by UnaryOp / BinaryOp (same order as the enums).
template <typename T>
constexpr UnaryFn kUnary[] = {
    unary_launch<UnaryOp::kRelu, T>, unary_launch<UnaryOp::kSigmoid, T>,   unary_launch<UnaryOp::kTanh, T>,
    unary_launch<UnaryOp::kGelu, T>, unary_launch<UnaryOp::kExp, T>,       unary_launch<UnaryOp::kLog, T>,
    unary_launch<UnaryOp::kSqrt, T>, unary_launch<UnaryOp::kNeg, T>,       unary_launch<UnaryOp::kAbs, T>,
    unary_launch<UnaryOp::kErf, T>,  unary_launch<UnaryOp::kReciprocal, T>};
template <typename T>
constexpr BinaryFn kBinary[] = {binary_launch<BinaryOp::kAdd, T>, binary_launch<BinaryOp::kSub, T>,
                                binary_launch<BinaryOp::kMul, T>, binary_launch<BinaryOp::kDiv, T>};
constexpr int kUnaryOps = static_cast<int>(UnaryOp::kReciprocal) + 1;
constexpr int kBinaryOps = static_cast<int>(BinaryOp::kDiv) + 1;
static_assert(sizeof(kUnary<float>) / sizeof(UnaryFn) == kUnaryOps, "one launcher per UnaryOp");
static_assert(sizeof(kBinary<float>) / sizeof(BinaryFn) == kBinaryOps, "one launcher per BinaryOp");

}  // namespace

cudaError_t launch_unary(UnaryOp op, ElemType t, const void* x, void* y, int64_t n, cudaStream_t stream) {
  const int k = static_cast<int>(op);
  if (k < 0 || k >= kUnaryOps || !is_float(t)) return cudaErrorInvalidValue;
  if (n <= 0) return cudaSuccess;
  (t == ElemType::kF16 ? kUnary<__half> : kUnary<float>)[k](x, y, n, stream);
  return cudaGetLastError();
}

cudaError_t launch_binary(BinaryOp op, ElemType t, const void* a, const void* b, void* y, int64_t n,
                          const BroadcastDims& d, cudaStream_t stream) {
  const int k = static_cast<int>(op);
  if (k < 0 || k >= kBinaryOps || !is_float(t)) return cudaErrorInvalidValue;
  if (n <= 0) return cudaSuccess;
  (t == ElemType::kF16 ? kBinary<__half> : kBinary<float>)[k](a, b, y, n, d, stream);
  return cudaGetLastError();
}

cudaError_t launch_strided_copy(ElemType t, const void* x, void* y, int64_t n, const StridedCopyDims& d,
                                cudaStream_t stream) {
  if (!is_float(t)) return cudaErrorInvalidValue;
  if (n <= 0) return cudaSuccess;
  if (t == ElemType::kF16)
    strided_copy_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const uint16_t*>(x),
                                                                        static_cast<uint16_t*>(y), n, d);
  else
    strided_copy_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const uint32_t*>(x),
                                                                        static_cast<uint32_t*>(y), n, d);
  return cudaGetLastError();
}

}  // namespace streamline::ops::cuda
