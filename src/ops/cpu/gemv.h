#pragma once
// Products of a few rows of A with a constant weight matrix: Y = alpha * (A W + bias).
//
// At batch 1 a fully connected layer is a matrix-vector product: every weight is read once and
// used once, so its speed is memory bandwidth. oneDNN's matmul runs it through its GEMM blocking
// at a third of that; these loops stream the weights once for all (at most kGemvMaxRows) rows of A.
// Weights are either "NK" (W[k, n] at w[n * ld + k]: Gemm's transB, the layout of a PyTorch
// Linear, read along contiguous rows) or "KN" (at w[k * ld + n]: MatMul's B, read 64 columns at a
// time). NK streams at about 1.5x the rate of KN on this kind of machine.

#include <cstdint>

namespace streamline::ops::cpu {

inline constexpr int64_t kGemvMaxRows = 4;

struct GemvWeights {
  const float* w = nullptr;
  int64_t ld = 0;   // distance between rows of the stored matrix, in floats
  bool nk = false;  // true: W[k, n] = w[n * ld + k]; false: W[k, n] = w[k * ld + n]
};

// Y[r, n] = alpha * (sum_k A[r, k] * W[k, n] + bias[n]) for r < rows and n0 <= n < n1.
// A[r, k] = a[r * lda + k], Y[r, n] = y[r * ldy + n]; bias may be null. rows <= kGemvMaxRows.
void gemv(const float* a, int64_t lda, int64_t rows, int64_t k, const GemvWeights& w, const float* bias, float alpha,
          float* y, int64_t ldy, int64_t n0, int64_t n1);

}  // namespace streamline::ops::cpu
