#pragma once
// Element access helpers shared by the reference math kernels (ref_math.cc, ref_math_nn.cc). Slow on
// purpose: every element goes through a dtype switch, and floating values through double.

#include <string>

#include "ops/registry.h"

namespace streamline::ops::reference {

// Softmax, reductions and normalisations (ref_math_nn.cc); called by register_math().
Status register_math_nn(KernelRegistry& reg);

namespace math_util {

inline std::string prefix(const graph::Node& node) {
  return node.describe() + ": ";
}

bool is_float_type(DType t);
double read_f(const Tensor& t, int64_t i);
int64_t read_i(const Tensor& t, int64_t i);
// Stores v rounded to t's floating type (or truncated toward zero for an integer type).
void write_f(Tensor& t, int64_t i, double v);
// Stores v converted (modulo 2^bits) to t's integer type, or exactly to a floating type.
void write_i(Tensor& t, int64_t i, int64_t v);
// Float to integer dtype `to`: NaN gives 0, values truncate toward zero and saturate at the range.
int64_t saturate_to_int(double v, DType to);

// Offset in a plain tensor of shape `in` of the element that broadcasts to flat index `out_index`
// of a tensor of shape `out` (NumPy rules, `in` right-aligned).
int64_t input_offset(const Shape& out, int64_t out_index, const Shape& in);

// Registers a reference kernel for every dtype, from opset `since` on.
Status add_ref(KernelRegistry& reg, const char* op, int since, KernelFactory f);

}  // namespace math_util
}  // namespace streamline::ops::reference
