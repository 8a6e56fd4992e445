#pragma once
// Cast's value rules, shared by the CPU kernel (ops/cpu/cast.cc) and the CUDA device code
// (ops/cuda/tensor_ops.cu), which nvcc compiles as C++17: float -> integer truncates toward zero,
// saturates at the target's range and maps NaN to 0; any other pair of arithmetic types converts
// as static_cast does (integer -> narrower integer wraps modulo 2^bits).
//
//   template <typename D, typename V> D store(V v) {
//     if constexpr (std::is_same_v<D, Half>) return Half{float_to_half(v)};  // the caller's own types
//     else return cast_number<D>(v);
//   }
//
// Header-only, no CUDA headers: under nvcc the functions are also device functions.

#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define SL_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SL_HOST_DEVICE inline
#endif

namespace streamline::ops {

// The largest and the lowest value of integer type D (std::numeric_limits is host-only in device
// code without relaxed constexpr).
template <typename D>
SL_HOST_DEVICE constexpr D int_max() {
  using U = std::make_unsigned_t<D>;
  if constexpr (std::is_signed_v<D>)
    return static_cast<D>(static_cast<U>(~U{0}) >> 1);
  else
    return static_cast<D>(~U{0});
}
template <typename D>
SL_HOST_DEVICE constexpr D int_lowest() {
  if constexpr (std::is_signed_v<D>)
    return static_cast<D>(-int_max<D>() - 1);
  else
    return D{0};
}

// Float v as integer type D: truncated toward zero, saturated, NaN as 0. The comparisons are in
// the source type F: D's maximum rounds up to a power of two there, so ">=" is exact.
template <typename D, typename F>
SL_HOST_DEVICE D float_to_int(F v) {
  if (!(v == v)) return D{0};
  if (v <= static_cast<F>(int_lowest<D>())) return int_lowest<D>();
  if (v >= static_cast<F>(int_max<D>())) return int_max<D>();
  return static_cast<D>(v);
}

// Arithmetic v as arithmetic type D under Cast's rules (float_to_int for float -> integer).
template <typename D, typename V>
SL_HOST_DEVICE D cast_number(V v) {
  if constexpr (std::is_integral_v<D> && std::is_floating_point_v<V>)
    return float_to_int<D>(v);
  else
    return static_cast<D>(v);
}

}  // namespace streamline::ops
