#pragma once
// CopyPlan: a dense copy out of a strided source, with size-1 dims dropped and dims that walk the
// source like one longer dim merged. Slice, Transpose, Pad ... reduce to one; the CPU runs it with
// run_copy_plan() (ops/cpu/data_common.h), the CUDA Slice hands its dims to a strided gather.
//
//   // reshape(): describe the copy once per input shape
//   CopyPlan plan = make_copy_plan(esz, out_dims, src_strides, src_offset);
//   // a device kernel then checks plan.rank against the rank it takes
//
// Plain data and pure functions; thread-safe.

#include <cstddef>
#include <cstdint>
#include <span>

namespace streamline::ops {

// Largest rank the data kernels handle (inline index arrays, so running a plan never allocates).
inline constexpr int kMaxDataRank = 16;

// dst[i0,...,ik] = src[offset + sum(i_j * strides[j])] over the output `dims`.
struct CopyPlan {
  size_t esz = 0;
  int rank = 0;
  int64_t dims[kMaxDataRank] = {};
  int64_t strides[kMaxDataRank] = {};  // source strides in elements, may be 0 or negative
  int64_t offset = 0;                  // source element offset of the first output element
  int64_t numel = 0;
};

// The plan for `dims` (rank <= kMaxDataRank) read at `strides` from `offset`, for elements of
// `esz` bytes. Dims are coalesced and size-1 dims dropped here, so plan.rank may be below dims.size().
CopyPlan make_copy_plan(size_t esz, std::span<const int64_t> dims, std::span<const int64_t> strides, int64_t offset);

}  // namespace streamline::ops
