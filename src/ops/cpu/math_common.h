#pragma once
// Helpers shared by the CPU math families (elementwise, softmax, reduce, normalization, cast):
// threading, axis handling, dtype dispatch and a small base class for attribute errors.
//
//   parallel_chunks(n, kCheapGrain, ctx.num_threads, [&](int64_t b, int64_t e) {
//     for (int64_t i = b; i < e; ++i) y[i] = x[i] * 2.f;           // inner loop vectorises
//   });

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/kernel.h"
#include "ops/op_params.h"
#include "ops/registry.h"

namespace streamline::ops::cpu::math {

// Minimum elements per thread before a parallel region pays for itself.
inline constexpr int64_t kCheapGrain = 32768;     // add, mul, relu, copies
inline constexpr int64_t kExpensiveGrain = 4096;  // exp, tanh, erf, division-heavy work

// Splits [0, n) into at most `num_threads` contiguous chunks of at least `grain` elements and calls
// f(begin, end) for each, in parallel when there is more than one chunk.
template <typename F>
inline void parallel_chunks(int64_t n, int64_t grain, int num_threads, F&& f) {
  if (n <= 0) return;
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  const int chunks = static_cast<int>(std::min<int64_t>(std::max(num_threads, 1), max_chunks));
#pragma omp parallel for num_threads(chunks) if (chunks > 1) schedule(static)
  for (int c = 0; c < chunks; ++c) {
    const int64_t begin = n * c / chunks;
    const int64_t end = n * (c + 1) / chunks;
    f(begin, end);
  }
}

// Sorted, de-duplicated axes in [0, rank); InvalidArgument naming the node and the first axis out
// of range (one axis is normalised by normalize_axis() in ops/op_params.h).
Result<std::vector<int64_t>> normalize_axes(const graph::Node& node, const std::vector<int64_t>& axes, int64_t rank);

// "Add 'n1': " prefix for messages.
std::string node_prefix(const graph::Node& node);

// Unsupported unless `dtype` is one of `allowed` (the kernel lacks that type; the model may be fine).
Status check_dtype(const graph::Node& node, DType dtype, std::initializer_list<DType> allowed,
                   const char* what = "input");

// Calls f(T{}) with T the C++ type of `dtype` for float32, int32 and int64; false for other dtypes.
template <typename F>
inline bool dispatch_numeric(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32:
      f(float{});
      return true;
    case DType::kInt32:
      f(int32_t{});
      return true;
    case DType::kInt64:
      f(int64_t{});
      return true;
    default:
      return false;
  }
}

// Registers `def` for every op name in `ops` with the same factory and opset range.
Status register_ops(KernelRegistry& reg, std::initializer_list<const char*> ops, int since, int end,
                    const KernelFactory& factory, const char* provider = "cpu");

// Family pieces that live in their own files but register through register_elementwise().
Status register_unary(KernelRegistry& reg);   // math_unary.cc
Status register_binary(KernelRegistry& reg);  // elementwise.cc

}  // namespace streamline::ops::cpu::math
