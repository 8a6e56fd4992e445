#pragma once
// Geometry of a reduction over a set of axes, shared by the Reduce* kernels and
// MeanVarianceNormalization: the input's dims are collapsed into alternating groups of kept and
// reduced dims (size-1 dims dropped, neighbours of the same kind merged).
//
//   ReducePlan p = make_reduce_plan(Shape{2, 3, 4, 5}, {false, true, false, true});
//   // groups: [2 kept][3 reduced][4 kept][5 reduced], out_numel 8, reduce_count 15

#include <cstdint>
#include <vector>

#include "core/shape.h"

namespace streamline::ops::cpu::math {

struct AxisGroup {
  int64_t size = 1;
  int64_t stride = 1;  // elements, in the plain input
  bool reduced = false;
};

struct ReducePlan {
  std::vector<AxisGroup> groups;  // outermost first; never empty
  int64_t out_numel = 1;          // product of kept sizes
  int64_t reduce_count = 1;       // product of reduced sizes (elements per output)
  bool inner_reduced() const { return groups.back().reduced; }
  int64_t inner() const { return groups.back().size; }
};

inline ReducePlan make_reduce_plan(const Shape& shape, const std::vector<bool>& reduced) {
  ReducePlan p;
  for (size_t d = 0; d < shape.rank(); ++d) {
    const int64_t n = shape[d];
    if (reduced[d])
      p.reduce_count *= n;
    else
      p.out_numel *= n;
    if (n == 1) continue;
    if (!p.groups.empty() && p.groups.back().reduced == reduced[d])
      p.groups.back().size *= n;
    else
      p.groups.push_back(AxisGroup{n, 1, reduced[d]});
  }
  if (p.groups.empty()) p.groups.push_back(AxisGroup{1, 1, false});
  int64_t stride = 1;
  for (size_t g = p.groups.size(); g-- > 0;) {
    p.groups[g].stride = stride;
    stride *= p.groups[g].size;
  }
  return p;
}

// Offset of kept element `index` (row-major over kept groups, excluding the innermost group when
// `skip_inner`), in the input.
inline int64_t kept_offset(const ReducePlan& p, int64_t index, bool skip_inner) {
  int64_t off = 0;
  const size_t end = p.groups.size() - (skip_inner ? 1 : 0);
  for (size_t g = end; g-- > 0;) {
    if (p.groups[g].reduced) continue;
    off += (index % p.groups[g].size) * p.groups[g].stride;
    index /= p.groups[g].size;
  }
  return off;
}

// Calls f(offset) for every combination of the reduced groups (excluding the innermost group when
// `skip_inner`), offset relative to the kept element's base.
template <typename F>
inline void for_each_reduced(const ReducePlan& p, bool skip_inner, F&& f) {
  int64_t sizes[32], strides[32];
  int n = 0;
  const size_t end = p.groups.size() - (skip_inner ? 1 : 0);
  for (size_t g = 0; g < end && n < 32; ++g) {
    if (!p.groups[g].reduced) continue;
    sizes[n] = p.groups[g].size;
    strides[n] = p.groups[g].stride;
    ++n;
  }
  for (int k = 0; k < n; ++k)
    if (sizes[k] == 0) return;
  int64_t idx[32] = {};
  int64_t off = 0;
  while (true) {
    f(off);
    int k = n - 1;
    for (; k >= 0; --k) {
      off += strides[k];
      if (++idx[k] < sizes[k]) break;
      off -= strides[k] * sizes[k];
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

}  // namespace streamline::ops::cpu::math
