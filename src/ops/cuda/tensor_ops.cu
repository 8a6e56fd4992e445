// Device code of Cast, Clip and the data-movement kernels (Slice's strided gather, Concat's row
// copies, Gather). Grid-stride loops, one element (or one 2- to 16-byte unit) per thread per step.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "ops/cast_rules.h"
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/launch_tensor.h"

namespace streamline::ops::cuda {
namespace {

constexpr int kThreads = 256;


#define SL_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

// ---- Cast ---------------------------------------------------------------------------------------

struct Bool {
  uint8_t v;
};

// Any element as the widest type that holds it exactly: float for the float types, the integer
// itself, 0/1 for bool.
template <typename S>
__device__ __forceinline__ auto load(S s) {
  if constexpr (std::is_same_v<S, __half>)
    return __half2float(s);
  else if constexpr (std::is_same_v<S, Bool>)
    return static_cast<int32_t>(s.v != 0);
  else
    return s;
}

template <typename D, typename V>
__device__ __forceinline__ D store(V v) {
  if constexpr (std::is_same_v<D, __half>)
    return __float2half_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<D, Bool>)
    return Bool{static_cast<uint8_t>(v != V{0})};
  else
    return cast_number<D>(v);
}

template <typename S, typename D>
__global__ void cast_kernel(const S* __restrict__ x, D* __restrict__ y, int64_t n) {
  SL_GRID_STRIDE(i, n) y[i] = store<D>(load(x[i]));
}

template <typename S, typename D>
void cast_launch(const void* x, void* y, int64_t n, cudaStream_t s) {
  cast_kernel<S, D><<<grid_for(n, kThreads), kThreads, 0, s>>>(static_cast<const S*>(x), static_cast<D*>(y), n);
}

// Calls f(T{}) with T the storage type of `t`; false for an unknown type.
template <typename F>
bool dispatch(ElemType t, F&& f) {
  switch (t) {
    case ElemType::kF32:
      f(float{});
      return true;
    case ElemType::kF16:
      f(__half{});
      return true;
    case ElemType::kI32:
      f(int32_t{});
      return true;
    case ElemType::kI64:
      f(int64_t{});
      return true;
    case ElemType::kBool:
      f(Bool{});
      return true;
  }
  return false;
}

// ---- Clip ---------------------------------------------------------------------------------------

__device__ __forceinline__ float to_float(float v) {
  return v;
}
__device__ __forceinline__ float to_float(__half v) {
  return __half2float(v);
}

// Inputs may alias the output (in place), so no __restrict__ here.
template <typename T>
__global__ void clip_kernel(const T* x, T* y, int64_t n, float lo, float hi, const T* lo_dev, const T* hi_dev) {
  if (lo_dev != nullptr) lo = to_float(*lo_dev);
  if (hi_dev != nullptr) hi = to_float(*hi_dev);
  SL_GRID_STRIDE(i, n) {
    float v = to_float(x[i]);
    v = v < lo ? lo : v;  // as numpy.clip: lo > hi gives hi; NaN passes through
    v = v > hi ? hi : v;
    y[i] = store<T>(v);
  }
}

// ---- data movement ------------------------------------------------------------------------------

// Units of 1 to 16 bytes moved as one load and one store.
template <int kBytes>
struct Unit;
template <>
struct Unit<1> {
  using type = uint8_t;
};
template <>
struct Unit<2> {
  using type = uint16_t;
};
template <>
struct Unit<4> {
  using type = uint32_t;
};
template <>
struct Unit<8> {
  using type = uint2;
};
template <>
struct Unit<16> {
  using type = uint4;
};

template <typename U>
__global__ void strided_gather_kernel(const U* __restrict__ x, U* __restrict__ y, int64_t n, StridedDims d) {
  SL_GRID_STRIDE(i, n) {
    int64_t rest = i, ix = d.offset;
    for (int k = d.rank - 1; k >= 0; --k) {
      ix += (rest % d.out[k]) * d.in_stride[k];
      rest /= d.out[k];
    }
    y[i] = x[ix];
  }
}

template <typename U>
__global__ void copy_rows_kernel(const U* __restrict__ x, int64_t x_pitch, U* __restrict__ y, int64_t y_pitch,
                                 int64_t row_units, int64_t n) {
  SL_GRID_STRIDE(i, n) {
    const int64_t row = i / row_units, col = i % row_units;
    y[row * y_pitch + col] = x[row * x_pitch + col];
  }
}

template <typename U, typename I>
__global__ void gather_kernel(const U* __restrict__ data, const I* __restrict__ idx, U* __restrict__ y,
                              int64_t axis_dim, int64_t num_indices, int64_t inner, int64_t n) {
  SL_GRID_STRIDE(i, n) {
    const int64_t b = i % inner;
    const int64_t w = i / inner;
    const int64_t j = w % num_indices, o = w / num_indices;
    int64_t v = static_cast<int64_t>(idx[j]);
    if (v < 0) v += axis_dim;
    if (v < 0 || v >= axis_dim) {
      y[i] = U{};
      continue;
    }
    y[i] = data[(o * axis_dim + v) * inner + b];
  }
}

// The widest unit (16 down to 1 bytes) dividing every value in `sizes` and every address.
int unit_bytes(std::initializer_list<int64_t> sizes, std::initializer_list<const void*> ptrs) {
  for (int u = 16; u > 1; u /= 2) {
    bool ok = true;
    for (int64_t s : sizes) ok = ok && s % u == 0;
    for (const void* p : ptrs) ok = ok && reinterpret_cast<uintptr_t>(p) % u == 0;
    if (ok) return u;
  }
  return 1;
}

template <int kBytes>
void copy_rows_launch(const void* x, int64_t x_pitch, void* y, int64_t y_pitch, int64_t row_bytes, int64_t rows,
                      cudaStream_t s) {
  using U = typename Unit<kBytes>::type;
  const int64_t row_units = row_bytes / kBytes, n = row_units * rows;
  copy_rows_kernel<U><<<grid_for(n, kThreads), kThreads, 0, s>>>(static_cast<const U*>(x), x_pitch / kBytes, static_cast<U*>(y),
                                                       y_pitch / kBytes, row_units, n);
}

template <int kBytes>
void gather_launch(const void* data, const void* idx, bool idx64, void* y, int64_t outer, int64_t axis_dim,
                   int64_t num_indices, int64_t inner_bytes, cudaStream_t s) {
  using U = typename Unit<kBytes>::type;
  const int64_t inner = inner_bytes / kBytes, n = outer * num_indices * inner;
  const U* d = static_cast<const U*>(data);
  U* out = static_cast<U*>(y);
  if (idx64)
    gather_kernel<U, int64_t>
        <<<grid_for(n, kThreads), kThreads, 0, s>>>(d, static_cast<const int64_t*>(idx), out, axis_dim, num_indices, inner, n);
  else
    gather_kernel<U, int32_t>
        <<<grid_for(n, kThreads), kThreads, 0, s>>>(d, static_cast<const int32_t*>(idx), out, axis_dim, num_indices, inner, n);
}

}  // namespace

cudaError_t launch_cast(ElemType from, ElemType to, const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  bool ok = false;
  dispatch(from,
           [&](auto s) { ok = dispatch(to, [&](auto d) { cast_launch<decltype(s), decltype(d)>(x, y, n, stream); }); });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t launch_clip(ElemType t, const void* x, void* y, int64_t n, float lo, float hi, const void* lo_dev,
                        const void* hi_dev, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (t == ElemType::kF32) {
    clip_kernel<float><<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const float*>(x), static_cast<float*>(y), n,
                                                             lo, hi, static_cast<const float*>(lo_dev),
                                                             static_cast<const float*>(hi_dev));
  } else if (t == ElemType::kF16) {
    clip_kernel<__half><<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const __half*>(x), static_cast<__half*>(y), n,
                                                              lo, hi, static_cast<const __half*>(lo_dev),
                                                              static_cast<const __half*>(hi_dev));
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_strided_gather(const void* x, void* y, int64_t n, int32_t elem_bytes, const StridedDims& d,
                                  cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1:
      strided_gather_kernel<uint8_t>
          <<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y), n, d);
      break;
    case 2:
      strided_gather_kernel<uint16_t>
          <<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(y), n, d);
      break;
    case 4:
      strided_gather_kernel<uint32_t>
          <<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const uint32_t*>(x), static_cast<uint32_t*>(y), n, d);
      break;
    case 8:
      strided_gather_kernel<uint64_t>
          <<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const uint64_t*>(x), static_cast<uint64_t*>(y), n, d);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_copy_rows(const void* x, int64_t x_pitch, void* y, int64_t y_pitch, int64_t row_bytes, int64_t rows,
                             cudaStream_t stream) {
  if (rows <= 0 || row_bytes <= 0) return cudaSuccess;
  switch (unit_bytes({x_pitch, y_pitch, row_bytes}, {x, y})) {
    case 16:
      copy_rows_launch<16>(x, x_pitch, y, y_pitch, row_bytes, rows, stream);
      break;
    case 8:
      copy_rows_launch<8>(x, x_pitch, y, y_pitch, row_bytes, rows, stream);
      break;
    case 4:
      copy_rows_launch<4>(x, x_pitch, y, y_pitch, row_bytes, rows, stream);
      break;
    case 2:
      copy_rows_launch<2>(x, x_pitch, y, y_pitch, row_bytes, rows, stream);
      break;
    default:
      copy_rows_launch<1>(x, x_pitch, y, y_pitch, row_bytes, rows, stream);
      break;
  }
  return cudaGetLastError();
}

cudaError_t launch_gather(const void* data, const void* indices, bool indices_int64, void* y, int64_t outer,
                          int64_t axis_dim, int64_t num_indices, int64_t inner_bytes, cudaStream_t stream) {
  if (outer * num_indices * inner_bytes <= 0) return cudaSuccess;
  switch (unit_bytes({inner_bytes}, {data, y})) {
    case 16:
      gather_launch<16>(data, indices, indices_int64, y, outer, axis_dim, num_indices, inner_bytes, stream);
      break;
    case 8:
      gather_launch<8>(data, indices, indices_int64, y, outer, axis_dim, num_indices, inner_bytes, stream);
      break;
    case 4:
      gather_launch<4>(data, indices, indices_int64, y, outer, axis_dim, num_indices, inner_bytes, stream);
      break;
    case 2:
      gather_launch<2>(data, indices, indices_int64, y, outer, axis_dim, num_indices, inner_bytes, stream);
      break;
    default:
      gather_launch<1>(data, indices, indices_int64, y, outer, axis_dim, num_indices, inner_bytes, stream);
      break;
  }
  return cudaGetLastError();
}

}  // namespace streamline::ops::cuda
