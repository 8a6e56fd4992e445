#include "ops/cpu/gemv.h"

#include <cstring>

namespace streamline::ops::cpu {
namespace {

// One vector register of floats: 16 with AVX-512, 8 with AVX2 (and SSE, where the compiler splits
// it in two). The type must match the target's registers: a wider one is split by the compiler
// into halves it keeps on the stack, which runs several times slower than the plain loop.
#if defined(__AVX512F__)
constexpr int kLanes = 16;
#else
constexpr int kLanes = 8;
#endif
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));

inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, Vec v) {
  std::memcpy(p, &v, sizeof v);
}
inline Vec splat(float f) {
  return Vec{} + f;
}
inline float hsum(Vec v) {
  float s = 0.f;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
}

// Accumulators kept in registers at once: 16 vector registers on AVX2 (32 on AVX-512), some of
// which hold the loaded operands.
constexpr int kMaxAccumulators = kLanes == 16 ? 24 : 12;

// NK: J weight rows (J outputs) at a time, each read once for all R rows of A, U vectors of k per
// step (U independent accumulator chains per output, which hides the latency of the FMA).
template <int R>
constexpr int nk_rows() {
  return R * 4 <= kMaxAccumulators ? 4 : 2;
}
template <int R>
constexpr int nk_unroll() {
  return R * nk_rows<R>() * 2 <= kMaxAccumulators ? 2 : 1;
}

template <int R, int J, int U>
void gemv_nk_block(const float* a, int64_t lda, int64_t k, const float* w, int64_t ld, const float* bias, float alpha,
                   float* y, int64_t ldy, int64_t n) {
  constexpr int64_t kStep = int64_t{kLanes} * U;
  const int64_t kv = k / kStep * kStep;
  const float* wn = w + n * ld;
  Vec acc[R][J][U] = {};
  for (int64_t i = 0; i < kv; i += kStep) {
    for (int u = 0; u < U; ++u) {
      Vec x[R];
      for (int r = 0; r < R; ++r) x[r] = load(a + r * lda + i + u * kLanes);
      for (int j = 0; j < J; ++j) {
        const Vec wv = load(wn + j * ld + i + u * kLanes);
        for (int r = 0; r < R; ++r) acc[r][j][u] += x[r] * wv;
      }
    }
  }
  // What is left of k in whole vectors, then in scalars.
  int64_t i = kv;
  for (; i + kLanes <= k; i += kLanes) {
    for (int j = 0; j < J; ++j) {
      const Vec wv = load(wn + j * ld + i);
      for (int r = 0; r < R; ++r) acc[r][j][0] += load(a + r * lda + i) * wv;
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < J; ++j) {
      Vec v = acc[r][j][0];
      for (int u = 1; u < U; ++u) v += acc[r][j][u];
      float s = hsum(v);
      for (int64_t t = i; t < k; ++t) s += a[r * lda + t] * wn[j * ld + t];
      y[r * ldy + n + j] = alpha * (s + (bias ? bias[n + j] : 0.f));
    }
  }
}

template <int R>
void gemv_nk(const float* a, int64_t lda, int64_t k, const float* w, int64_t ld, const float* bias, float alpha,
             float* y, int64_t ldy, int64_t n0, int64_t n1) {
  constexpr int J = nk_rows<R>();
  constexpr int U = nk_unroll<R>();
  int64_t n = n0;
  for (; n + J <= n1; n += J) gemv_nk_block<R, J, U>(a, lda, k, w, ld, bias, alpha, y, ldy, n);
  for (; n < n1; ++n) gemv_nk_block<R, 1, 1>(a, lda, k, w, ld, bias, alpha, y, ldy, n);
}

// KN: C vectors of columns at a time, walking down k; R * C accumulators.
template <int R>
constexpr int kn_vectors() {
  return R * 4 <= kMaxAccumulators ? 4 : 2;
}

template <int R, int C>
void gemv_kn_block(const float* a, int64_t lda, int64_t k, const float* w, int64_t ld, const float* bias, float alpha,
                   float* y, int64_t ldy, int64_t n) {
  Vec acc[R][C] = {};
  for (int64_t i = 0; i < k; ++i) {
    const float* row = w + i * ld + n;
    Vec wv[C];
    for (int j = 0; j < C; ++j) wv[j] = load(row + kLanes * j);
    for (int r = 0; r < R; ++r) {
      const Vec x = splat(a[r * lda + i]);
      for (int j = 0; j < C; ++j) acc[r][j] += x * wv[j];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < C; ++j) {
      const Vec b = bias ? load(bias + n + kLanes * j) : Vec{};
      store(y + r * ldy + n + kLanes * j, splat(alpha) * (acc[r][j] + b));
    }
  }
}

template <int R>
void gemv_kn(const float* a, int64_t lda, int64_t k, const float* w, int64_t ld, const float* bias, float alpha,
             float* y, int64_t ldy, int64_t n0, int64_t n1) {
  constexpr int C = kn_vectors<R>();
  int64_t n = n0;
  for (; n + C * kLanes <= n1; n += C * kLanes) gemv_kn_block<R, C>(a, lda, k, w, ld, bias, alpha, y, ldy, n);
  for (; n + kLanes <= n1; n += kLanes) gemv_kn_block<R, 1>(a, lda, k, w, ld, bias, alpha, y, ldy, n);
  for (; n < n1; ++n) {
    for (int r = 0; r < R; ++r) {
      float s = 0.f;
      for (int64_t i = 0; i < k; ++i) s += a[r * lda + i] * w[i * ld + n];
      y[r * ldy + n] = alpha * (s + (bias ? bias[n] : 0.f));
    }
  }
}

template <int R>
void gemv_rows(const float* a, int64_t lda, int64_t k, const GemvWeights& w, const float* bias, float alpha, float* y,
               int64_t ldy, int64_t n0, int64_t n1) {
  if (w.nk) {
    gemv_nk<R>(a, lda, k, w.w, w.ld, bias, alpha, y, ldy, n0, n1);
  } else {
    gemv_kn<R>(a, lda, k, w.w, w.ld, bias, alpha, y, ldy, n0, n1);
  }
}

}  // namespace

void gemv(const float* a, int64_t lda, int64_t rows, int64_t k, const GemvWeights& w, const float* bias, float alpha,
          float* y, int64_t ldy, int64_t n0, int64_t n1) {
  // Rows beyond four run again in groups: the weights stream once per group.
  for (int64_t r0 = 0; r0 < rows; r0 += kGemvMaxRows) {
    const float* ar = a + r0 * lda;
    float* yr = y + r0 * ldy;
    switch (rows - r0 < kGemvMaxRows ? rows - r0 : kGemvMaxRows) {
      case 1:
        gemv_rows<1>(ar, lda, k, w, bias, alpha, yr, ldy, n0, n1);
        break;
      case 2:
        gemv_rows<2>(ar, lda, k, w, bias, alpha, yr, ldy, n0, n1);
        break;
      case 3:
        gemv_rows<3>(ar, lda, k, w, bias, alpha, yr, ldy, n0, n1);
        break;
      default:
        gemv_rows<4>(ar, lda, k, w, bias, alpha, yr, ldy, n0, n1);
        break;
    }
  }
}

}  // namespace streamline::ops::cpu
