#pragma once
// Device-side helpers shared by the .cu files: fp32/fp16 element access and the grid size of a
// grid-stride loop. Included by nvcc only.
//
//   template <typename T> __global__ void k(const T* x, T* y, int64_t n) {
//     for (int64_t i = first_index(); i < n; i += grid_step()) store(y, i, load(x, i) * 2.f);
//   }

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/launch.h"

namespace streamline::ops::cuda {

// Loads element i as fp32; stores fp32 rounded to nearest into T.
__device__ __forceinline__ float load(const float* p, int64_t i) {
  return p[i];
}
__device__ __forceinline__ float load(const __half* p, int64_t i) {
  return __half2float(p[i]);
}
__device__ __forceinline__ void store(float* p, int64_t i, float v) {
  p[i] = v;
}
__device__ __forceinline__ void store(__half* p, int64_t i, float v) {
  p[i] = __float2half_rn(v);
}

__device__ __forceinline__ int64_t first_index() {
  return blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_step() {
  return int64_t{gridDim.x} * blockDim.x;
}

// Enough blocks of `threads` to cover n elements, capped; the grid-stride loop covers the rest.
inline unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

// The float element types these kernels take (fp32 or fp16).
inline bool is_float(ElemType t) {
  return t == ElemType::kF32 || t == ElemType::kF16;
}

}  // namespace streamline::ops::cuda
