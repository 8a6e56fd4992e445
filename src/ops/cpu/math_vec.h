#pragma once
// Branch-free float32 math that the compiler can vectorise: call these from a plain loop and GCC/Clang
// emit SIMD code (no -ffast-math needed). Accuracy against the correctly rounded result, measured by
// tests/ops/elementwise_test.cc: exp, log, sigmoid, tanh and erf within 3 ulp; expm1, softplus and
// mish within 5 ulp.
//
//   for (int64_t i = 0; i < n; ++i) y[i] = vec::sigmoid(x[i]);   // vectorised
//   float m = vec::reduce_max(x, n);                               // lane-parallel reductions
//
// Special values follow the C library: NaN in gives NaN out, exp(-inf) = 0, log(0) = -inf, and so on.

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/dtype.h"

#if defined(__AVX__) || defined(__F16C__)
#include <immintrin.h>
#endif

namespace streamline::ops::cpu::vec {

// a * b + c, fused when the target has FMA (never a library call).
inline float fmadd(float a, float b, float c) {
#if defined(__FMA__)
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

inline int32_t as_int(float f) {
  return std::bit_cast<int32_t>(f);
}
inline float as_float(int32_t i) {
  return std::bit_cast<float>(i);
}
// |x| with the sign bit of `sign`.
inline float with_sign_of(float x, float sign) {
  return as_float((as_int(x) & 0x7fffffff) | (as_int(sign) & static_cast<int32_t>(0x80000000u)));
}

// c ? a : b with both operands already computed. Written as a bit blend because with the default
// -ftrapping-math GCC sinks arithmetic into a plain ?: and then refuses to vectorise the branch.
inline float select(bool c, float a, float b) {
  const int32_t m = -static_cast<int32_t>(c);
  return as_float((as_int(a) & m) | (as_int(b) & ~m));
}

inline constexpr float kLn2Hi = 0.693359375f;     // high bits of ln 2, exact in float
inline constexpr float kLn2Lo = -2.12194440e-4f;  // ln 2 - kLn2Hi
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kRoundMagic = 12582912.f;  // 1.5 * 2^23: adding it rounds to an integer

// exp(r) for |r| <= ln2/2 + a little: Taylor series to degree 7 (truncation error < 1e-8).
inline float exp_reduced(float r) {
  float p = 1.f / 5040.f;
  p = fmadd(p, r, 1.f / 720.f);
  p = fmadd(p, r, 1.f / 120.f);
  p = fmadd(p, r, 1.f / 24.f);
  p = fmadd(p, r, 1.f / 6.f);
  p = fmadd(p, r, 0.5f);
  p = fmadd(p, r, 1.f);
  return fmadd(p, r, 1.f);
}

// e^x. Overflows to +inf above ~88.72 and gives correctly scaled subnormals below ~-87.3.
inline float exp(float x) {
  x = x > 88.8f ? 88.8f : x;  // comparisons are false for NaN, which passes through
  x = x < -104.f ? -104.f : x;
  const float t = fmadd(x, kLog2e, kRoundMagic);
  const float n = t - kRoundMagic;  // round(x / ln2)
  const int32_t ni = as_int(t) - as_int(kRoundMagic);
  float r = fmadd(n, -kLn2Hi, x);
  r = fmadd(n, -kLn2Lo, r);
  const float p = exp_reduced(r);
  // 2^n as two factors so that n down to -150 (subnormal results) and up to 128 (inf) both work.
  const int32_t n1 = ni >> 1;
  const int32_t n2 = ni - n1;
  return p * as_float((n1 + 127) << 23) * as_float((n2 + 127) << 23);
}

// e^x where that is a normal float, 0 below (x < kExpNormalMin). Subnormal results cost a
// microcode assist per vector on x86 without flush-to-zero (a softmax over causal scores of
// spread-out magnitudes ran several times slower with them); terms below 1.2e-38 change no sum
// that also holds e^0 = 1.
inline constexpr float kExpNormalMin = -87.f;
inline float exp_or_zero(float x) {
  const bool tiny = x < kExpNormalMin;
  return select(tiny, 0.f, exp(tiny ? kExpNormalMin : x));
}

// e^x - 1, accurate near 0 (Taylor series for |x| < ln2/2, exp(x) - 1 elsewhere).
inline float expm1(float x) {
  float p = 1.f / 362880.f;
  p = fmadd(p, x, 1.f / 40320.f);
  p = fmadd(p, x, 1.f / 5040.f);
  p = fmadd(p, x, 1.f / 720.f);
  p = fmadd(p, x, 1.f / 120.f);
  p = fmadd(p, x, 1.f / 24.f);
  p = fmadd(p, x, 1.f / 6.f);
  p = fmadd(p, x, 0.5f);
  p = fmadd(p, x, 1.f);
  const float small = p * x;
  const float large = exp(x) - 1.f;
  return select(std::fabs(x) < 0.34657359f, small, large);
}

// Natural logarithm. log(0) = -inf, log(x < 0) = NaN, log(inf) = inf; subnormal inputs are exact.
inline float log(float x) {
  const bool tiny = x < 1.17549435e-38f;
  const float xs = select(tiny, x * 8388608.f, x);  // 2^23 brings subnormals into the normal range
  const int32_t bits = as_int(xs);
  int32_t e = ((bits >> 23) & 0xff) - 127 - (tiny ? 23 : 0);
  float m = as_float((bits & 0x007fffff) | 0x3f800000);  // [1, 2)
  const bool big = m > 1.41421356f;
  m = select(big, m * 0.5f, m);
  e += big ? 1 : 0;
  // log(m) = 2 atanh(s) with s = (m - 1) / (m + 1), |s| <= 0.1716.
  const float f = m - 1.f;
  const float s = f / (2.f + f);
  const float z = s * s;
  float p = 2.f / 13.f;
  p = fmadd(p, z, 2.f / 11.f);
  p = fmadd(p, z, 2.f / 9.f);
  p = fmadd(p, z, 2.f / 7.f);
  p = fmadd(p, z, 2.f / 5.f);
  p = fmadd(p, z, 2.f / 3.f);
  const float log_m = fmadd(s * z, p, 2.f * s);
  const float ef = static_cast<float>(e);
  float r = fmadd(ef, kLn2Hi, fmadd(ef, kLn2Lo, log_m));
  r = select(x < 0.f, std::numeric_limits<float>::quiet_NaN(), r);
  r = select(x == 0.f, -std::numeric_limits<float>::infinity(), r);
  r = select(x == std::numeric_limits<float>::infinity(), x, r);
  return select(x != x, x, r);
}

// log(1 + t) for t >= 0 (used by softplus), accurate for tiny t.
inline float log1p_nonneg(float t) {
  const float u = 1.f + t;
  // log(u) plus the rounding error of 1 + t, to first order.
  return log(u) - ((u - 1.f) - t) / u;
}

// 1 / (1 + e^-x), written with e^-|x| so that large negative x gives subnormals rather than 0.
inline float sigmoid(float x) {
  const float e = exp(-std::fabs(x));
  const float r = 1.f / (1.f + e);
  return select(x < 0.f, e * r, r);
}

// tanh: odd polynomial below 0.625 (fitted on [0, 0.625]), 1 - 2 / (e^{2|x|} + 1) above.
inline float tanh(float x) {
  const float ax = std::fabs(x);
  const float z = x * x;
  float p = 0.002142236102372408f;
  p = fmadd(p, z, -0.008176164701581001f);
  p = fmadd(p, z, 0.021699897944927216f);
  p = fmadd(p, z, -0.05394650623202324f);
  p = fmadd(p, z, 0.1333320140838623f);
  p = fmadd(p, z, -0.3333333134651184f);
  const float small = fmadd(p * z, x, x);
  const float large = 1.f - 2.f / (exp(2.f * ax) + 1.f);
  return select(ax < 0.625f, small, with_sign_of(large, x));
}

// erf: odd polynomial below 1 (fitted on [0, 1]); above, 1 - exp(-x^2) * Q(1 / (1 + x/2)) with Q
// fitted to erfc(x) e^{x^2} on [1, 4]. erf rounds to 1 from 3.92 on.
inline float erf(float x) {
  float ax = std::fabs(x);
  const float z = x * x;
  float p = 7.898209878476337e-05f;
  p = fmadd(p, z, -0.0008024353883229196f);
  p = fmadd(p, z, 0.00519005348905921f);
  p = fmadd(p, z, -0.026854809373617172f);
  p = fmadd(p, z, 0.11283612251281738f);
  p = fmadd(p, z, -0.3761262893676758f);
  p = fmadd(p, z, 1.128379225730896f);
  const float small = p * x;

  // Clamped (erf(4) rounds to 1) through select: a plain ?: here defeats GCC's vectoriser.
  ax = select(ax > 4.f, 4.f, ax);
  const float t = 1.f / fmadd(0.5f, ax, 1.f);
  float q = 0.020174872130155563f;
  q = fmadd(q, t, -0.18597330152988434f);
  q = fmadd(q, t, 0.6214430332183838f);
  q = fmadd(q, t, -0.989054799079895f);
  q = fmadd(q, t, 0.7452899813652039f);
  q = fmadd(q, t, -0.31168830394744873f);
  q = fmadd(q, t, 0.31848227977752686f);
  q = fmadd(q, t, 0.21206799149513245f);
  q = fmadd(q, t, 0.2876529097557068f);
  q = fmadd(q, t, 0.28156915307044983f);
  q = fmadd(q, t, 2.23471324716229e-05f);
  // exp(-x^2) with x^2 = hi + lo split so its rounding error does not reach the result.
  const float hi = ax * ax;
  const float lo = fmadd(ax, ax, -hi);
  float e = exp(-hi);
  e = fmadd(-e, lo, e);
  const float large = fmadd(-e, q, 1.f);
  return select(std::fabs(x) < 1.f, small, with_sign_of(large, x));
}

// log(1 + e^x) without overflow.
inline float softplus(float x) {
  const float pos = x > 0.f ? x : 0.f;  // plain ?: is fine when no arm computes
  return pos + log1p_nonneg(exp(-std::fabs(x)));
}

// x * tanh(softplus(x)) = x * n / (n + 2) with n = e^x (e^x + 2).
inline float mish(float x) {
  const float e = exp(x > 9.f ? 9.f : x);
  const float n = e * (e + 2.f);
  return x * (n / (n + 2.f));
}

// Lane-parallel reductions: 16 independent accumulators so the loop vectorises without reassociation
// flags. The summation order differs from a serial loop (it is more accurate, not less).
inline constexpr int kLanes = 16;

inline float reduce_max(const float* x, int64_t n) {
  float acc[kLanes];
  for (int j = 0; j < kLanes; ++j) acc[j] = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  float m = -std::numeric_limits<float>::infinity();
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (int j = 0; j < kLanes; ++j) m = acc[j] > m ? acc[j] : m;
  return m;
}

inline float reduce_min(const float* x, int64_t n) {
  float acc[kLanes];
  for (int j = 0; j < kLanes; ++j) acc[j] = std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] = x[i + j] < acc[j] ? x[i + j] : acc[j];
  float m = std::numeric_limits<float>::infinity();
  for (; i < n; ++i) m = x[i] < m ? x[i] : m;
  for (int j = 0; j < kLanes; ++j) m = acc[j] < m ? acc[j] : m;
  return m;
}

// Sum of f(x[i]) over i, with f applied lane-wise (identity, square, abs, ...).
template <typename F>
inline float reduce_sum_map(const float* x, int64_t n, F f) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += f(x[i + j]);
  float tail = 0.f;
  for (; i < n; ++i) tail += f(x[i]);
  // Pairwise combination of the lanes.
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0] + tail;
}

inline float reduce_sum(const float* x, int64_t n) {
  return reduce_sum_map(x, n, [](float v) { return v; });
}

// y[i] = exp(x[i] - shift); returns the sum of y.
inline float exp_shifted_sum(const float* x, float* y, int64_t n, float shift) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const float e = exp_or_zero(x[i + j] - shift);
      y[i + j] = e;
      acc[j] += e;
    }
  float tail = 0.f;
  for (; i < n; ++i) {
    const float e = exp_or_zero(x[i] - shift);
    y[i] = e;
    tail += e;
  }
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0] + tail;
}

// y[i] = sqrt(x[i]). std::sqrt does not vectorise while errno semantics are on, so use the
// instruction directly where the target has it.
inline void sqrt_array(const float* x, float* y, int64_t n) {
  int64_t i = 0;
#if defined(__AVX__)
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
#endif
  for (; i < n; ++i) y[i] = std::sqrt(x[i]);
}

// float16 <-> float32 for whole arrays, 8 at a time with F16C where the target has it. Round to nearest
// even, overflow to infinity, NaN stays NaN: the same results as half_to_float / float_to_half.
inline void half_to_float_array(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
#endif
  for (; i < n; ++i) y[i] = half_to_float(x[i]);
}

inline void float_to_half_array(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; ++i) y[i] = float_to_half(x[i]);
}

}  // namespace streamline::ops::cpu::vec
