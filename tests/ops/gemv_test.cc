// The matrix-vector loops on their own, against a double-precision product: row counts past one
// group of four, K and N with every tail, both weight layouts, and column ranges that start inside
// the matrix (a thread's share). Buffers are sized exactly, so the sanitiser builds catch overruns.

#include "ops/cpu/gemv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace streamline::ops::cpu {
namespace {

TEST(Gemv, MatchesDoublePrecisionProductOnEveryTail) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  int checked = 0;
  for (int64_t rows = 1; rows <= 6; ++rows) {
    for (int64_t k : {1, 15, 16, 17, 37, 130}) {
      for (int64_t n : {1, 3, 4, 5, 16, 17, 63, 64, 65, 130}) {
        for (bool nk : {false, true}) {
          for (int64_t n0 : {int64_t{0}, n / 2}) {
            std::vector<float> a(static_cast<size_t>(rows * k)), w(static_cast<size_t>(k * n)),
                bias(static_cast<size_t>(n));
            for (float& v : a) v = u(rng);
            for (float& v : w) v = u(rng);
            for (float& v : bias) v = u(rng);
            const float kUnset = 12345.f;
            std::vector<float> y(static_cast<size_t>(rows * n), kUnset);
            gemv(a.data(), k, rows, k, GemvWeights{w.data(), nk ? k : n, nk}, bias.data(), 0.5f, y.data(), n, n0, n);
            SCOPED_TRACE("rows " + std::to_string(rows) + " k " + std::to_string(k) + " n " + std::to_string(n) +
                         (nk ? " NK" : " KN") + " from column " + std::to_string(n0));
            for (int64_t r = 0; r < rows; ++r) {
              for (int64_t j = 0; j < n; ++j) {
                const float got = y[static_cast<size_t>(r * n + j)];
                if (j < n0) {
                  ASSERT_EQ(got, kUnset) << "column " << j << " is outside the range";
                  continue;
                }
                double s = 0.0;
                for (int64_t i = 0; i < k; ++i)
                  s += static_cast<double>(a[static_cast<size_t>(r * k + i)]) *
                       w[static_cast<size_t>(nk ? j * k + i : i * n + j)];
                const double want = 0.5 * (s + bias[static_cast<size_t>(j)]);
                ASSERT_NEAR(got, want, 1e-5 * (1.0 + std::fabs(want)) * static_cast<double>(k)) << r << ", " << j;
              }
            }
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 6 * 6 * 10 * 2 * 2);
}

// Without a bias and with alpha 1 the loops compute the plain product.
TEST(Gemv, NoBias) {
  const std::vector<float> a{1.f, 2.f, 3.f};
  const std::vector<float> w{1.f, 0.f, -1.f, 2.f, 0.5f, 0.f};  // KN: [3, 2]
  std::vector<float> y(2, 0.f);
  gemv(a.data(), 3, 1, 3, GemvWeights{w.data(), 2, false}, nullptr, 1.f, y.data(), 2, 0, 2);
  EXPECT_FLOAT_EQ(y[0], 1.f * 1.f + 2.f * -1.f + 3.f * 0.5f);
  EXPECT_FLOAT_EQ(y[1], 0.f + 2.f * 2.f + 0.f);
}

}  // namespace
}  // namespace streamline::ops::cpu
