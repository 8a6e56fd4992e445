#pragma once
// NumPy broadcasting for the elementwise kernels: a plan, built once per shape in reshape(), that
// walks the output in memory order and gives each input's offset. Dimensions are permuted into the
// output's physical order (so channels-last tensors are walked as NHWC), size-1 dimensions dropped
// and contiguous runs merged, so the common cases become one inner loop:
//
//   same shape              dims [n]        strides a:[1]  b:[1]
//   scalar operand          dims [n]        strides a:[1]  b:[0]
//   [N,C,H,W] + [1,C,1,1]   dims [N,C,HW]   strides a:[C*HW,HW,1]  b:[0,1,0]
//   the same, nChw16c       dims [N,C/16,HW,16]  a:[C*HW,16HW,16,1]  b:[0,16,0,1]
//
// A blocked output (nChw8c, nChw16c) is walked in its memory order [N, C/b, H, W, b], so blocked
// inputs of its shape, plain or channels-last inputs and broadcast per-channel tensors all map
// onto it without a layout change.
//
//   StridedPlan p = make_strided_plan(out_shape, Layout::kPlain, operands);
//   apply_binary(p, a, b, out, [](float x, float y) { return x + y; }, threads, kCheapGrain);

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/cpu/math_common.h"

namespace streamline::ops::cpu::math {

// Ranks above this are rejected by the elementwise kernels (the walk keeps its index on the stack).
inline constexpr int kMaxBroadcastRank = 16;

struct Operand {
  Shape shape;
  Layout layout = Layout::kPlain;
};

struct StridedPlan {
  static constexpr int kMaxOperands = 3;
  int num_inputs = 0;
  std::vector<int64_t> dims;                   // iteration dims, outermost first; never empty
  std::vector<int64_t> strides[kMaxOperands];  // per input: element stride per dim (0 = broadcast)
  int64_t numel = 0;
  int64_t inner_stride(int k) const { return strides[k].back(); }
};

// NumPy broadcast of every shape; InvalidArgument naming the node and the offending shapes.
Result<Shape> broadcast_all(const graph::Node& node, std::span<const Shape> shapes);

// The iteration of an output in memory order and each input's element strides over it, for any
// number of inputs (make_strided_plan's dims and strides): size-1 dims dropped, contiguous runs
// merged.
struct StridedWalk {
  std::vector<int64_t> dims;                  // never empty
  std::vector<std::vector<int64_t>> strides;  // per input, per dim (0 = broadcast)
};
StridedWalk make_walk(const Shape& out_shape, Layout out_layout, std::span<const Operand> inputs);

// Plan for writing an output of `out_shape`/`out_layout` from `inputs` (at most kMaxOperands), each
// of which must broadcast to out_shape and be one strided_plan_supports() accepts.
StridedPlan make_strided_plan(const Shape& out_shape, Layout out_layout, std::span<const Operand> inputs);
// Whether make_strided_plan can walk these inputs for this output: plain and channels-last inputs
// of any broadcasting shape, one-pixel [N, C, 1, 1] tensors in any layout (their bytes do not
// depend on it), and blocked inputs when the output is blocked by the same number of channels (or,
// for a plain or channels-last output, when they are the output's shape and layout).
bool strided_plan_supports(const Shape& out_shape, Layout out_layout, std::span<const Operand> inputs);

// Walks the first `r` dims of p (the outer ones, as if the inner ones were one element) over
// positions [begin, end) of that walk in memory order, calling f(position, in_offsets, len) for
// each run that stays within dim r - 1; within a run input k advances by p.strides[k][r - 1].
template <typename F>
inline void for_each_run_outer(const StridedPlan& p, int r, int64_t begin, int64_t end, F&& f) {
  const int n = p.num_inputs;
  int64_t idx[kMaxBroadcastRank];
  int64_t off[StridedPlan::kMaxOperands] = {0, 0, 0};
  int64_t rem = begin;
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rem % p.dims[d];
    rem /= p.dims[d];
    for (int k = 0; k < n; ++k) off[k] += idx[d] * p.strides[k][d];
  }
  const int64_t inner = p.dims[r - 1];
  int64_t pos = begin;
  while (pos < end) {
    const int64_t len = std::min(inner - idx[r - 1], end - pos);
    f(pos, static_cast<const int64_t*>(off), len);
    pos += len;
    idx[r - 1] += len;
    for (int k = 0; k < n; ++k) off[k] += len * p.strides[k][r - 1];
    for (int d = r - 1; d > 0 && idx[d] == p.dims[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
      for (int k = 0; k < n; ++k) off[k] += p.strides[k][d - 1] - p.dims[d] * p.strides[k][d];
    }
  }
}

// Walks output elements [begin, end) in memory order and calls f(out_offset, in_offsets, len) for
// each run that stays within the innermost dimension; within a run input k advances by
// inner_stride(k) per element.
template <typename F>
inline void for_each_run(const StridedPlan& p, int64_t begin, int64_t end, F&& f) {
  for_each_run_outer(p, static_cast<int>(p.dims.size()), begin, end, std::forward<F>(f));
}

// A two-input plan whose innermost dim is one channel block (kBlock elements, 8 or 16) that both
// inputs read contiguously, and whose next dim walks the pixels, along which each input either
// moves by a block or stays: a per-channel [1, C, 1, 1] tensor against a blocked activation, walked
// as [N, C/b, H*W, b] with strides [.., b, 0, 1]. Walked element by element that is a run of b per
// call; walked row by row the block is a compile-time length and the loop one vector operation.
// Returns the block (8 or 16), or 0 when the plan is not of that form.
inline int64_t block_rows(const StridedPlan& p) {
  const size_t r = p.dims.size();
  if (p.num_inputs != 2 || r < 2 || (p.dims[r - 1] != 8 && p.dims[r - 1] != 16)) return 0;
  const int64_t blk = p.dims[r - 1];
  for (int k = 0; k < 2; ++k)
    if (p.strides[k][r - 1] != 1 || (p.strides[k][r - 2] != blk && p.strides[k][r - 2] != 0)) return 0;
  return blk;
}

// apply_binary for a plan block_rows() accepts, with kBlock its answer.
template <int64_t kBlock, typename TA, typename TB, typename TO, typename Op>
inline void apply_binary_rows(const StridedPlan& p, const TA* a, const TB* b, TO* out, Op op, int threads,
                              int64_t grain) {
  const int r = static_cast<int>(p.dims.size()) - 1;
  const bool a_moves = p.strides[0][r - 1] != 0;
  const bool b_moves = p.strides[1][r - 1] != 0;
  parallel_chunks(p.numel / kBlock, std::max<int64_t>(1, grain / kBlock), threads, [&](int64_t begin, int64_t end) {
    for_each_run_outer(p, r, begin, end, [&](int64_t row, const int64_t* off, int64_t rows) {
      const TA* pa = a + off[0];
      const TB* pb = b + off[1];
      TO* po = out + row * kBlock;
      // Each row is read into locals before the output row is written: the output may be the
      // moving input's buffer, and the compiler vectorises the block only when it can see that
      // the loads come first.
      for (int64_t j = 0; j < rows; ++j) {
        const TA* ra = a_moves ? pa + j * kBlock : pa;
        const TB* rb = b_moves ? pb + j * kBlock : pb;
        TA va[kBlock];
        TB vb[kBlock];
        for (int64_t i = 0; i < kBlock; ++i) va[i] = ra[i];
        for (int64_t i = 0; i < kBlock; ++i) vb[i] = rb[i];
        TO* ro = po + j * kBlock;
        for (int64_t i = 0; i < kBlock; ++i) ro[i] = op(va[i], vb[i]);
      }
    });
  });
}

// Calls f with the inner strides of a two-operand plan as compile-time constants for the common
// patterns (1,1), (1,0), (0,1) and as runtime values otherwise.
template <typename F>
inline void with_inner_strides(int64_t sa, int64_t sb, F&& f) {
  using One = std::integral_constant<int64_t, 1>;
  using Zero = std::integral_constant<int64_t, 0>;
  if (sa == 1 && sb == 1)
    f(One{}, One{});
  else if (sa == 1 && sb == 0)
    f(One{}, Zero{});
  else if (sa == 0 && sb == 1)
    f(Zero{}, One{});
  else
    f(sa, sb);
}

// out = op(a, b) over a two-input plan. `out` may alias an input that has the output's shape and
// layout (each element is read before the same element is written).
template <typename TA, typename TB, typename TO, typename Op>
inline void apply_binary(const StridedPlan& p, const TA* a, const TB* b, TO* out, Op op, int threads, int64_t grain) {
  switch (block_rows(p)) {
    case 8:
      return apply_binary_rows<8>(p, a, b, out, op, threads, grain);
    case 16:
      return apply_binary_rows<16>(p, a, b, out, op, threads, grain);
    default:
      break;
  }
  with_inner_strides(p.inner_stride(0), p.inner_stride(1), [&](auto sa_c, auto sb_c) {
    parallel_chunks(p.numel, grain, threads, [&](int64_t begin, int64_t end) {
      for_each_run(p, begin, end, [&](int64_t o, const int64_t* off, int64_t len) {
        const int64_t sa = sa_c;
        const int64_t sb = sb_c;
        const TA* pa = a + off[0];
        const TB* pb = b + off[1];
        TO* po = out + o;
        for (int64_t i = 0; i < len; ++i) po[i] = op(pa[i * sa], pb[i * sb]);
      });
    });
  });
}

// out = a broadcast to the output (one-input plan).
template <typename T>
inline void apply_copy(const StridedPlan& p, const T* a, T* out, int threads) {
  parallel_chunks(p.numel, kCheapGrain, threads, [&](int64_t begin, int64_t end) {
    for_each_run(p, begin, end, [&](int64_t o, const int64_t* off, int64_t len) {
      const int64_t sa = p.inner_stride(0);
      const T* pa = a + off[0];
      T* po = out + o;
      if (sa == 1) {
        for (int64_t i = 0; i < len; ++i) po[i] = pa[i];
      } else {
        for (int64_t i = 0; i < len; ++i) po[i] = pa[i * sa];
      }
    });
  });
}

// out = cond ? x : y over a three-input plan (cond stored as one byte per element).
template <typename T>
inline void apply_where(const StridedPlan& p, const uint8_t* cond, const T* x, const T* y, T* out, int threads) {
  parallel_chunks(p.numel, kCheapGrain, threads, [&](int64_t begin, int64_t end) {
    for_each_run(p, begin, end, [&](int64_t o, const int64_t* off, int64_t len) {
      const int64_t sc = p.inner_stride(0);
      const int64_t sx = p.inner_stride(1);
      const int64_t sy = p.inner_stride(2);
      const uint8_t* pc = cond + off[0];
      const T* px = x + off[1];
      const T* py = y + off[2];
      T* po = out + o;
      if (sc == 1 && sx == 1 && sy == 1) {
        for (int64_t i = 0; i < len; ++i) po[i] = pc[i] ? px[i] : py[i];
      } else {
        for (int64_t i = 0; i < len; ++i) po[i] = pc[i * sc] ? px[i * sx] : py[i * sy];
      }
    });
  });
}

}  // namespace streamline::ops::cpu::math
