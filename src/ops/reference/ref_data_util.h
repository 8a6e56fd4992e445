#pragma once
// Index helpers shared by the reference data kernels (ref_data.cc, ref_resize.cc).

#include <vector>

#include "ops/reference/reference.h"

namespace streamline::ops::reference {

// Row-major N-d index of flat element `flat` of shape `s`, and back.
std::vector<int64_t> unravel(int64_t flat, const Shape& s);
int64_t ravel(const std::vector<int64_t>& idx, const Shape& s);
// dst[di] = src[si], one element of src's dtype.
void copy_element(const Tensor& src, int64_t si, Tensor& dst, int64_t di);
// Values of a constant integer input; Unsupported when not constant.
Result<std::vector<int64_t>> ref_ints(const TensorInfo& info, const char* what);
// Resize and Upsample reference kernels (ref_resize.cc).
Status register_resize(KernelRegistry& reg);

}  // namespace streamline::ops::reference
