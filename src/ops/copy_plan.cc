#include "ops/copy_plan.h"

namespace streamline::ops {

CopyPlan make_copy_plan(size_t esz, std::span<const int64_t> dims, std::span<const int64_t> strides, int64_t offset) {
  CopyPlan p;
  p.esz = esz;
  p.offset = offset;
  p.numel = 1;
  for (int64_t d : dims) p.numel *= d;
  if (p.numel == 0) return p;
  // 1. Drop size-1 dims (their index is always 0).
  int r = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    p.dims[r] = dims[i];
    p.strides[r] = strides[i];
    ++r;
  }
  // 2. Merge a dim into the next one when the pair walks the source like one longer dim.
  int w = 0;
  for (int i = 0; i < r; ++i) {
    if (w > 0 && p.strides[w - 1] == p.strides[i] * p.dims[i]) {
      p.dims[w - 1] *= p.dims[i];
      p.strides[w - 1] = p.strides[i];
      continue;
    }
    p.dims[w] = p.dims[i];
    p.strides[w] = p.strides[i];
    ++w;
  }
  p.rank = w;
  return p;
}

}  // namespace streamline::ops
