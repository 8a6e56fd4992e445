// Device code of the pooling kernels and the reductions behind the global pools and Reduce*:
// a thread per pooled output; a warp or a thread per reduced output. float32 or __half storage,
// float32 arithmetic.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>

#include "ops/cuda/device_util.cuh"
#include "ops/cuda/launch_tensor.h"

namespace streamline::ops::cuda {
namespace {

constexpr int kThreads = 256;  // a multiple of 32

template <PoolOp Op, typename T>
__global__ void pool2d_kernel(const T* __restrict__ x, T* __restrict__ y, PoolDims d) {
  const int64_t n = d.planes * d.out_h * d.out_w;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t ow = i % d.out_w;
    const int64_t oh = (i / d.out_w) % d.out_h;
    const int64_t plane = i / (d.out_w * d.out_h);
    const T* xp = x + plane * d.in_h * d.in_w;
    const int64_t h0 = oh * d.s_h - d.pad_top, w0 = ow * d.s_w - d.pad_left;
    float acc = Op == PoolOp::kMax ? -INFINITY : 0.f;
    int64_t inside = 0, counted_h = 0, counted_w = 0;
    for (int64_t a = 0; a < d.k_h; ++a) {
      const int64_t h = h0 + a * d.d_h;
      if (h < d.limit_h) ++counted_h;
      if (h < 0 || h >= d.in_h) continue;
      for (int64_t b = 0; b < d.k_w; ++b) {
        const int64_t w = w0 + b * d.d_w;
        if (w < 0 || w >= d.in_w) continue;
        const float v = load(xp, h * d.in_w + w);
        if constexpr (Op == PoolOp::kMax) {
          acc = fmaxf(acc, v);
        } else {
          acc += v;
          ++inside;
        }
      }
    }
    if constexpr (Op == PoolOp::kAvg) {
      for (int64_t b = 0; b < d.k_w; ++b)
        if (w0 + b * d.d_w < d.limit_w) ++counted_w;
      const int64_t count = d.count_include_pad ? counted_h * counted_w : inside;
      acc = count > 0 ? acc / static_cast<float>(count) : 0.f;
    }
    store(y, i, acc);
  }
}

template <ReduceOp Op>
__device__ __forceinline__ float combine(float a, float b) {
  if constexpr (Op == ReduceOp::kMax) return fmaxf(a, b);
  return a + b;
}

template <ReduceOp Op>
__device__ __forceinline__ float finish(float acc, int64_t count) {
  if constexpr (Op == ReduceOp::kMean) return acc / static_cast<float>(count);
  return acc;
}

// Offset of element `i` of a row-major index space over dims[0..rank) with the given strides.
__device__ __forceinline__ int64_t offset_of(int64_t i, int32_t rank, const int64_t* dims, const int64_t* strides) {
  int64_t off = 0;
  for (int k = rank - 1; k >= 0; --k) {
    off += (i % dims[k]) * strides[k];
    i /= dims[k];
  }
  return off;
}

// A warp per output: lanes stride over the reduced elements, then combine through shuffles.
template <ReduceOp Op, typename T>
__global__ void reduce_warp_kernel(const T* __restrict__ x, T* __restrict__ y, ReduceDims d) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x >> 5);
  const float init = Op == ReduceOp::kMax ? -INFINITY : 0.f;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x >> 5} + (threadIdx.x >> 5); o < d.out_numel; o += warps) {
    const T* base = x + offset_of(o, d.kept_rank, d.kept, d.kept_stride);
    float acc = init;
    if (d.red_rank == 1) {
      for (int64_t r = lane; r < d.red_numel; r += 32) acc = combine<Op>(acc, load(base, r));
    } else {
      for (int64_t r = lane; r < d.red_numel; r += 32)
        acc = combine<Op>(acc, load(base, offset_of(r, d.red_rank, d.red, d.red_stride)));
    }
    for (int s = 16; s > 0; s >>= 1) acc = combine<Op>(acc, __shfl_xor_sync(0xffffffffu, acc, s));
    if (lane == 0) store(y, o, finish<Op>(acc, d.red_numel));
  }
}

// A thread per output: used when the innermost dim is kept, so neighbouring outputs read
// neighbouring elements at every step.
template <ReduceOp Op, typename T>
__global__ void reduce_thread_kernel(const T* __restrict__ x, T* __restrict__ y, ReduceDims d) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < d.out_numel;
       o += int64_t{gridDim.x} * blockDim.x) {
    const T* base = x + offset_of(o, d.kept_rank, d.kept, d.kept_stride);
    float acc = Op == ReduceOp::kMax ? -INFINITY : 0.f;
    for (int64_t r = 0; r < d.red_numel; ++r)
      acc = combine<Op>(acc, load(base, offset_of(r, d.red_rank, d.red, d.red_stride)));
    store(y, o, finish<Op>(acc, d.red_numel));
  }
}

template <typename T>
cudaError_t pool_typed(PoolOp op, const void* x, void* y, const PoolDims& d, cudaStream_t s) {
  const int64_t n = d.planes * d.out_h * d.out_w;
  const T* xt = static_cast<const T*>(x);
  T* yt = static_cast<T*>(y);
  if (op == PoolOp::kMax)
    pool2d_kernel<PoolOp::kMax, T><<<grid_for(n, kThreads), kThreads, 0, s>>>(xt, yt, d);
  else
    pool2d_kernel<PoolOp::kAvg, T><<<grid_for(n, kThreads), kThreads, 0, s>>>(xt, yt, d);
  return cudaGetLastError();
}

template <ReduceOp Op, typename T>
void reduce_launch(const void* x, void* y, const ReduceDims& d, cudaStream_t s) {
  const T* xt = static_cast<const T*>(x);
  T* yt = static_cast<T*>(y);
  if (d.inner_reduced) {
    constexpr int64_t kWarpsPerBlock = kThreads / 32;
    const int64_t blocks = (d.out_numel + kWarpsPerBlock - 1) / kWarpsPerBlock;
    const unsigned grid = static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
    reduce_warp_kernel<Op, T><<<grid, kThreads, 0, s>>>(xt, yt, d);
  } else {
    reduce_thread_kernel<Op, T><<<grid_for(d.out_numel, kThreads), kThreads, 0, s>>>(xt, yt, d);
  }
}

template <typename T>
cudaError_t reduce_typed(ReduceOp op, const void* x, void* y, const ReduceDims& d, cudaStream_t s) {
  switch (op) {
    case ReduceOp::kSum:
      reduce_launch<ReduceOp::kSum, T>(x, y, d, s);
      break;
    case ReduceOp::kMean:
      reduce_launch<ReduceOp::kMean, T>(x, y, d, s);
      break;
    case ReduceOp::kMax:
      reduce_launch<ReduceOp::kMax, T>(x, y, d, s);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_pool2d(PoolOp op, ElemType t, const void* x, void* y, const PoolDims& d, cudaStream_t stream) {
  if (d.planes * d.out_h * d.out_w <= 0) return cudaSuccess;
  if (t == ElemType::kF32) return pool_typed<float>(op, x, y, d, stream);
  if (t == ElemType::kF16) return pool_typed<__half>(op, x, y, d, stream);
  return cudaErrorInvalidValue;
}

cudaError_t launch_reduce(ReduceOp op, ElemType t, const void* x, void* y, const ReduceDims& d, cudaStream_t stream) {
  if (d.out_numel <= 0) return cudaSuccess;
  if (t == ElemType::kF32) return reduce_typed<float>(op, x, y, d, stream);
  if (t == ElemType::kF16) return reduce_typed<__half>(op, x, y, d, stream);
  return cudaErrorInvalidValue;
}

}  // namespace streamline::ops::cuda
