// Device code of the row-wise kernels: Softmax and LayerNormalization over contiguous rows. One
// block per row (grid-stride over rows), block-wide reductions through warp shuffles.

#include <cuda_runtime.h>

#include <cfloat>

#include "ops/cuda/launch.h"

namespace streamline::ops::cuda {
namespace {

constexpr int kThreads = 256;  // a multiple of 32

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// Reduces `v` over the block; every thread gets the result. `smem` holds 32 floats.
template <typename Op>
__device__ float block_reduce(float v, Op op, float identity, float* smem) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  if (warp == 0) {
    v = lane < warps ? smem[lane] : identity;
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) smem[0] = v;
  }
  __syncthreads();
  const float r = smem[0];
  __syncthreads();  // smem is reused by the next reduction
  return r;
}

__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
  __shared__ float smem[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float m = -FLT_MAX;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = block_reduce(m, MaxOp{}, -FLT_MAX, smem);
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - m);
    s = block_reduce(s, SumOp{}, 0.f, smem);
    const float inv = 1.f / s;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
  }
}

__global__ void layer_norm_kernel(const float* __restrict__ x, const float* __restrict__ scale,
                                  const float* __restrict__ bias, float* __restrict__ y, int64_t rows, int64_t cols,
                                  float epsilon) {
  __shared__ float smem[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    // Two passes (mean, then squared deviations) for accuracy close to the double reference.
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
    const float mean = block_reduce(s, SumOp{}, 0.f, smem) / static_cast<float>(cols);
    float v = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float d = xr[c] - mean;
      v += d * d;
    }
    const float var = block_reduce(v, SumOp{}, 0.f, smem) / static_cast<float>(cols);
    const float inv = 1.f / sqrtf(var + epsilon);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float t = (xr[c] - mean) * inv * scale[c];
      yr[c] = bias != nullptr ? t + bias[c] : t;
    }
  }
}

unsigned grid_for_rows(int64_t rows) {
  return static_cast<unsigned>(rows < 65535 * 16 ? rows : 65535 * 16);
}

}  // namespace

cudaError_t launch_softmax(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  softmax_kernel<<<grid_for_rows(rows), kThreads, 0, stream>>>(x, y, rows, cols);
  return cudaGetLastError();
}

cudaError_t launch_layer_norm(const float* x, const float* scale, const float* bias, float* y, int64_t rows,
                              int64_t cols, float epsilon, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  layer_norm_kernel<<<grid_for_rows(rows), kThreads, 0, stream>>>(x, scale, bias, y, rows, cols, epsilon);
  return cudaGetLastError();
}

}  // namespace streamline::ops::cuda
