#include "ops/cpu/gemv.h"

#include <cstring>

namespace streamline::ops::cpu {
namespace {

// 16 floats: one AVX-512 register, two AVX2 ones; the compiler splits it for narrower targets.
typedef float V16 __attribute__((vector_size(64)));

inline V16 load(const float* p) {
  V16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, V16 v) {
  std::memcpy(p, &v, sizeof v);
}
inline V16 splat(float f) {
  return V16{} + f;
}
inline float hsum(V16 v) {
  float s = 0.f;
  for (int i = 0; i < 16; ++i) s += v[i];
  return s;
}

// NK: four weight rows (four outputs) at a time, each read once for all R rows of A.
template <int R>
void gemv_nk(const float* a, int64_t lda, int64_t k, const float* w, int64_t ld, const float* bias, float alpha,
             float* y, int64_t ldy, int64_t n0, int64_t n1) {
  const int64_t kv = k / 16 * 16;
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4) {
    V16 acc[R][4] = {};
    const float* wr[4] = {w + n * ld, w + (n + 1) * ld, w + (n + 2) * ld, w + (n + 3) * ld};
    for (int64_t i = 0; i < kv; i += 16) {
      V16 x[R];
      for (int r = 0; r < R; ++r) x[r] = load(a + r * lda + i);
      for (int j = 0; j < 4; ++j) {
        const V16 wv = load(wr[j] + i);
        for (int r = 0; r < R; ++r) acc[r][j] += x[r] * wv;
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < 4; ++j) {
        float s = hsum(acc[r][j]);
        for (int64_t i = kv; i < k; ++i) s += a[r * lda + i] * wr[j][i];
        y[r * ldy + n + j] = alpha * (s + (bias ? bias[n + j] : 0.f));
      }
    }
  }
  for (; n < n1; ++n) {
    for (int r = 0; r < R; ++r) {
      V16 acc{};
      for (int64_t i = 0; i < kv; i += 16) acc += load(a + r * lda + i) * load(w + n * ld + i);
      float s = hsum(acc);
      for (int64_t i = kv; i < k; ++i) s += a[r * lda + i] * w[n * ld + i];
      y[r * ldy + n] = alpha * (s + (bias ? bias[n] : 0.f));
    }
  }
}

// KN: C columns (C / 16 vectors) at a time, walking down k.
template <int R, int C>
void gemv_kn_block(const float* a, int64_t lda, int64_t k, const float* w, int64_t ld, const float* bias, float alpha,
                   float* y, int64_t ldy, int64_t n) {
  constexpr int kVecs = C / 16;
  V16 acc[R][kVecs] = {};
  for (int64_t i = 0; i < k; ++i) {
    const float* row = w + i * ld + n;
    V16 wv[kVecs];
    for (int j = 0; j < kVecs; ++j) wv[j] = load(row + 16 * j);
    for (int r = 0; r < R; ++r) {
      const V16 x = splat(a[r * lda + i]);
      for (int j = 0; j < kVecs; ++j) acc[r][j] += x * wv[j];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < kVecs; ++j) {
      const V16 b = bias ? load(bias + n + 16 * j) : V16{};
      store(y + r * ldy + n + 16 * j, splat(alpha) * (acc[r][j] + b));
    }
  }
}

template <int R>
void gemv_kn(const float* a, int64_t lda, int64_t k, const float* w, int64_t ld, const float* bias, float alpha,
             float* y, int64_t ldy, int64_t n0, int64_t n1) {
  int64_t n = n0;
  for (; n + 64 <= n1; n += 64) gemv_kn_block<R, 64>(a, lda, k, w, ld, bias, alpha, y, ldy, n);
  for (; n + 16 <= n1; n += 16) gemv_kn_block<R, 16>(a, lda, k, w, ld, bias, alpha, y, ldy, n);
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
