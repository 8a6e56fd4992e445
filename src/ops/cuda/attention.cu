// Device code of the fused attention (streamline.Attention), flash-attention style: the scores of
// a query row are never stored beyond the key tile being worked on.
//
// One block per (batch index, tile of BQ query rows); NWARPS warps, each owning kRows query rows.
//   1. The block stages its query tile in shared memory (fp32, pre-multiplied by scale).
//   2. For each tile of kKeys = 32 keys: the block stages K and V (fp32) in shared memory; lane j of
//      a warp computes the score of key j for the warp's rows, adds the mask, and the warp updates
//      each row's running max m and sum l (online softmax: the accumulated output and l are scaled
//      by exp(m_old - m_new) when the max grows); the probabilities go through shared memory and
//      each lane accumulates P @ V for its DMAX / 32 output columns.
//   3. Each row's output is divided by its sum and written once, through the output strides.
// Every tile is staged with the fastest-varying thread index along whichever of the operand's two
// dims has stride 1, so a head-split layout ([B, S, H, D] read as [B, H, S, D]) loads coalesced.
// Math is fp32 for both element types; fp16 is converted on load and store.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>

#include "ops/cuda/launch_attention.h"

namespace streamline::ops::cuda {
namespace {

constexpr int kRows = 4;   // query rows per warp
constexpr int kKeys = 32;  // keys per tile: one per lane when scoring

__device__ __forceinline__ float to_float(float x) {
  return x;
}
__device__ __forceinline__ float to_float(__half x) {
  return __half2float(x);
}
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// dst[r * LDS + c] = mul * src[r * rs + c * cs] for r < rows, c < cols; 0 elsewhere in the
// ROWS x COLS tile (so padded keys and head dims add nothing). Consecutive threads walk the dim
// whose stride is 1.
template <int ROWS, int COLS, int LDS, typename T>
__device__ __forceinline__ void stage_tile(float* dst, const T* src, int64_t rs, int64_t cs, int rows, int64_t cols,
                                           float mul) {
  const bool col_fast = cs == 1 || rs != 1;
  for (int i = threadIdx.x; i < ROWS * COLS; i += blockDim.x) {
    const int r = col_fast ? i / COLS : i % ROWS;
    const int c = col_fast ? i % COLS : i / ROWS;
    float x = 0.f;
    if (r < rows && c < cols) x = to_float(src[r * rs + c * cs]) * mul;
    dst[r * LDS + c] = x;
  }
}

template <int N>
struct Vec;
template <>
struct Vec<1> {
  __device__ static void load(const float* p, float* v) { v[0] = *p; }
};
template <>
struct Vec<2> {
  __device__ static void load(const float* p, float* v) {
    const float2 x = *reinterpret_cast<const float2*>(p);
    v[0] = x.x;
    v[1] = x.y;
  }
};
template <>
struct Vec<4> {
  __device__ static void load(const float* p, float* v) {
    const float4 x = *reinterpret_cast<const float4*>(p);
    v[0] = x.x;
    v[1] = x.y;
    v[2] = x.z;
    v[3] = x.w;
  }
};

// The minimum blocks per SM caps registers at 80 (24 warps resident) for head dims up to 64; the
// 128 bucket keeps 4 blocks (its 43 KiB of shared memory allows no more).
template <typename T, int DMAX, int NWARPS>
__global__ void __launch_bounds__(NWARPS * 32, DMAX > 64 ? 4 : 24 / NWARPS)
    attention_kernel(const AttentionDims p, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                     const T* __restrict__ mask, T* __restrict__ y, int64_t q_tiles) {
  constexpr int BQ = NWARPS * kRows;
  constexpr int LD = DMAX + 4;    // q and k rows: float4-aligned, and conflict-free float4 reads
  constexpr int CPL = DMAX / 32;  // output columns per lane
  __shared__ __align__(16) float qs[BQ * LD];
  __shared__ __align__(16) float ks[kKeys * LD];
  __shared__ __align__(16) float vs[kKeys * DMAX];
  __shared__ __align__(16) float ps[BQ * kKeys];

  const int64_t b = blockIdx.x / q_tiles;
  const int64_t q0 = (blockIdx.x % q_tiles) * BQ;
  int64_t qo = 0, ko = 0, vo = 0, mo = 0, oo = 0;
  int64_t rem = b;
  for (int j = p.batch_rank - 1; j >= 0; --j) {
    const int64_t i = rem % p.batch[j];
    rem /= p.batch[j];
    qo += i * p.q.batch[j];
    ko += i * p.k.batch[j];
    vo += i * p.v.batch[j];
    mo += i * p.mask.batch[j];
    oo += i * p.out.batch[j];
  }
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int row0 = warp * kRows;  // the warp's first row in the tile

  // 1. The query tile, scaled.
  const int rows = static_cast<int>(p.sq - q0 < BQ ? p.sq - q0 : BQ);
  stage_tile<BQ, DMAX, LD>(qs, q + qo + q0 * p.q.rs, p.q.rs, p.q.cs, rows, p.d, p.scale);

  float m[kRows], l[kRows], o[kRows][CPL];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
#pragma unroll
    for (int c = 0; c < CPL; ++c) o[r][c] = 0.f;
  }

  // 2. Key tiles.
  for (int64_t k0 = 0; k0 < p.sk; k0 += kKeys) {
    const int keys = static_cast<int>(p.sk - k0 < kKeys ? p.sk - k0 : kKeys);
    __syncthreads();  // the previous tile's ks, vs and ps are no longer read
    // ks[j][d] = k(d, k0 + j): the key is the tile's row.
    stage_tile<kKeys, DMAX, LD>(ks, k + ko + k0 * p.k.cs, p.k.cs, p.k.rs, keys, p.d, 1.f);
    stage_tile<kKeys, DMAX, DMAX>(vs, v + vo + k0 * p.v.rs, p.v.rs, p.v.cs, keys, p.dv, 1.f);
    __syncthreads();

    // 2a. Scores of key `lane` for the warp's rows.
    float s[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) s[r] = 0.f;
#pragma unroll
    for (int d = 0; d < DMAX; d += 4) {
      const float4 kv = *reinterpret_cast<const float4*>(ks + lane * LD + d);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float4 qv = *reinterpret_cast<const float4*>(qs + (row0 + r) * LD + d);
        s[r] = fmaf(qv.x, kv.x, s[r]);
        s[r] = fmaf(qv.y, kv.y, s[r]);
        s[r] = fmaf(qv.z, kv.z, s[r]);
        s[r] = fmaf(qv.w, kv.w, s[r]);
      }
    }

    // 2b. Mask, then the online softmax update of each row.
    const bool key_ok = lane < keys;
    const int64_t key = k0 + lane;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t row = q0 + row0 + r;
      float sv = key_ok ? s[r] : -INFINITY;
      if (mask != nullptr && key_ok && row < p.sq) sv += to_float(mask[mo + row * p.mask.rs + key * p.mask.cs]);
      const float m_new = fmaxf(m[r], warp_max(sv));
      // A row with no finite score yet keeps everything at zero instead of exp(-inf + inf).
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      const float alpha = expf(m[r] - m_use);
      const float pj = expf(sv - m_use);
      l[r] = l[r] * alpha + pj;  // per-lane partial sums, added up at the end
#pragma unroll
      for (int c = 0; c < CPL; ++c) o[r][c] *= alpha;
      m[r] = m_new;
      ps[(row0 + r) * kKeys + lane] = pj;
    }
    __syncwarp();

    // 2c. o += P @ V for the lane's columns.
#pragma unroll 2
    for (int j = 0; j < kKeys; j += 4) {
      float pr[kRows][4];
#pragma unroll
      for (int r = 0; r < kRows; ++r) Vec<4>::load(ps + (row0 + r) * kKeys + j, pr[r]);
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        float vv[CPL];
        Vec<CPL>::load(vs + (j + jj) * DMAX + lane * CPL, vv);
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int c = 0; c < CPL; ++c) o[r][c] = fmaf(pr[r][jj], vv[c], o[r][c]);
      }
    }
  }

  // 3. Normalise and write each row once.
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float sum = warp_sum(l[r]);
    const int64_t row = q0 + row0 + r;
    if (row >= p.sq) continue;
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
      const int64_t col = lane * CPL + c;
      if (col < p.dv) y[oo + row * p.out.rs + col * p.out.cs] = from_float<T>(o[r][c] * inv);
    }
  }
}

template <typename T, int DMAX, int NWARPS>
cudaError_t launch_tiled(const AttentionDims& d, const void* q, const void* k, const void* v, const void* mask, void* y,
                         cudaStream_t stream) {
  constexpr int64_t BQ = NWARPS * kRows;
  const int64_t q_tiles = (d.sq + BQ - 1) / BQ;
  const int64_t blocks = q_tiles * d.batch_count;
  if (blocks > INT_MAX) return cudaErrorInvalidConfiguration;  // reshape refuses such shapes first
  attention_kernel<T, DMAX, NWARPS><<<static_cast<unsigned>(blocks), NWARPS * 32, 0, stream>>>(
      d, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), static_cast<const T*>(mask),
      static_cast<T*>(y), q_tiles);
  return cudaGetLastError();
}

// Picks the head-dim bucket and the block size: 8 warps (32 query rows, more reuse of each staged
// K/V tile) unless that leaves too few blocks to fill the GPU; head dims above 64 always take 4
// warps (the shared memory of 32 rows would pass the 48 KiB static limit).
template <typename T>
cudaError_t launch_typed(const AttentionDims& d, const void* q, const void* k, const void* v, const void* mask, void* y,
                         cudaStream_t stream) {
  constexpr int64_t kFewBlocks = 256;
  const int64_t dmax = d.d > d.dv ? d.d : d.dv;
  const bool wide = ((d.sq + 31) / 32) * d.batch_count >= kFewBlocks;
  if (dmax <= 32)
    return wide ? launch_tiled<T, 32, 8>(d, q, k, v, mask, y, stream)
                : launch_tiled<T, 32, 4>(d, q, k, v, mask, y, stream);
  if (dmax <= 64)
    return wide ? launch_tiled<T, 64, 8>(d, q, k, v, mask, y, stream)
                : launch_tiled<T, 64, 4>(d, q, k, v, mask, y, stream);
  if (dmax <= kAttentionMaxHeadDim) return launch_tiled<T, 128, 4>(d, q, k, v, mask, y, stream);
  return cudaErrorInvalidValue;  // reshape refuses such head dims first
}

}  // namespace

cudaError_t launch_attention(const AttentionDims& d, AttentionElem elem, const void* q, const void* k, const void* v,
                             const void* mask, void* y, cudaStream_t stream) {
  if (d.batch_count <= 0 || d.sq <= 0 || d.dv <= 0) return cudaSuccess;
  if (elem == AttentionElem::kFloat16) return launch_typed<__half>(d, q, k, v, mask, y, stream);
  return launch_typed<float>(d, q, k, v, mask, y, stream);
}

}  // namespace streamline::ops::cuda
