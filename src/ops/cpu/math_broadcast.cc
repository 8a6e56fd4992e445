#include "ops/cpu/math_broadcast.h"

namespace streamline::ops::cpu::math {
namespace {

// A rank-4 tensor of one pixel per image ([N, C, 1, 1]) has the same bytes in every layout (a
// blocked one needs C to be whole blocks, which any blocked tensor has): plain strides describe it.
bool one_pixel(const Shape& shape) {
  return shape.rank() == 4 && shape[2] * shape[3] == 1;
}

// Element strides of each logical dimension for a tensor stored in `layout` (plain or
// channels-last; blocked layouts are walked through blocked_strides).
std::vector<int64_t> logical_strides(const Shape& shape, Layout layout) {
  const size_t r = shape.rank();
  std::vector<int64_t> s(r, 1);
  if (layout == Layout::kChannelsLast && r == 4 && !one_pixel(shape)) {
    // Logical N,C,H,W stored as N,H,W,C.
    s[1] = 1;
    s[3] = shape[1];
    s[2] = shape[3] * shape[1];
    s[0] = shape[2] * shape[3] * shape[1];
    return s;
  }
  for (size_t i = r; i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

// For an output blocked by `b` channels, iterated in its memory order as the five dims
// [N, C/b, H, W, b]: the element stride of each of them in an input of `shape` (right-aligned to
// the output's rank 4, size-1 dims broadcast) stored in `layout` (plain, channels-last, or blocked
// by the same b).
std::vector<int64_t> blocked_strides(const Shape& shape, Layout layout, int64_t b) {
  std::vector<int64_t> dims = shape.to_vector();
  while (dims.size() < 4) dims.insert(dims.begin(), 1);
  const Shape s(dims);
  std::vector<int64_t> v(5, 0);
  if (is_blocked(layout) && !one_pixel(s)) {
    const int64_t hw = s[2] * s[3];
    v[0] = s[0] == 1 ? 0 : s[1] * hw;
    v[1] = s[1] == 1 ? 0 : hw * b;
    v[2] = s[2] == 1 ? 0 : s[3] * b;
    v[3] = s[3] == 1 ? 0 : b;
    v[4] = s[1] == 1 ? 0 : 1;
    return v;
  }
  const std::vector<int64_t> st = logical_strides(s, layout);
  v[0] = s[0] == 1 ? 0 : st[0];
  v[1] = s[1] == 1 ? 0 : st[1] * b;
  v[2] = s[2] == 1 ? 0 : st[2];
  v[3] = s[3] == 1 ? 0 : st[3];
  v[4] = s[1] == 1 ? 0 : st[1];
  return v;
}

}  // namespace

Result<Shape> broadcast_all(const graph::Node& node, std::span<const Shape> shapes) {
  if (shapes.empty()) return Shape{};
  Shape out = shapes[0];
  for (size_t i = 1; i < shapes.size(); ++i) {
    Shape next;
    if (!broadcast_shapes(out, shapes[i], &next)) {
      return invalid_argument(node_prefix(node) + "shapes " + out.to_string() + " and " + shapes[i].to_string() +
                              " cannot be broadcast together");
    }
    out = next;
  }
  if (out.rank() > static_cast<size_t>(kMaxBroadcastRank))
    return unsupported(node_prefix(node) + "rank " + std::to_string(out.rank()) + " is above the supported " +
                       std::to_string(kMaxBroadcastRank));
  return out;
}

bool strided_plan_supports(const Shape& out_shape, Layout out_layout, std::span<const Operand> inputs) {
  const int64_t b = layout_block(out_layout);
  for (const Operand& in : inputs) {
    if (in.shape.rank() > out_shape.rank()) return false;
    if (one_pixel(in.shape) || in.layout == Layout::kPlain) continue;
    if (in.shape.rank() != 4) return false;
    if (in.layout == Layout::kChannelsLast) continue;
    // A blocked input: its block must be the output's, or the output's dims must be its own.
    if (b != 0 && layout_block(in.layout) != b) return false;
    if (b == 0 && (in.layout != out_layout || in.shape != out_shape)) return false;
  }
  return true;
}

StridedWalk make_walk(const Shape& out_shape, Layout out_layout, std::span<const Operand> inputs) {
  StridedWalk w;
  w.strides.resize(inputs.size());
  const size_t r = out_shape.rank();
  const int64_t blk = r == 4 ? layout_block(out_layout) : 0;

  // 1. The iteration dims in the output's memory order, and per input the element stride of each
  //    (0 where broadcast). A blocked output is walked as [N, C/b, H, W, b].
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides(inputs.size());
  if (blk > 0 && !one_pixel(out_shape)) {
    sizes = {out_shape[0], out_shape[1] / blk, out_shape[2], out_shape[3], blk};
    for (size_t k = 0; k < inputs.size(); ++k) strides[k] = blocked_strides(inputs[k].shape, inputs[k].layout, blk);
  } else {
    std::vector<size_t> order(r);
    for (size_t i = 0; i < r; ++i) order[i] = i;
    if (out_layout == Layout::kChannelsLast && r == 4 && !one_pixel(out_shape)) order = {0, 2, 3, 1};
    std::vector<std::vector<int64_t>> logical(inputs.size(), std::vector<int64_t>(r, 0));
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Shape& s = inputs[k].shape;
      const std::vector<int64_t> st =
          logical_strides(s, is_blocked(inputs[k].layout) ? Layout::kPlain : inputs[k].layout);
      const size_t lead = r - s.rank();
      for (size_t i = 0; i < s.rank(); ++i) logical[k][lead + i] = s[i] == 1 ? 0 : st[i];
    }
    for (size_t i : order) {
      sizes.push_back(out_shape[i]);
      for (size_t k = 0; k < inputs.size(); ++k) strides[k].push_back(logical[k][i]);
    }
  }

  // 2. Drop size-1 dims and merge a dim into the next inner one when every input continues
  //    contiguously across the pair.
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t d = sizes[i];
    if (d == 1) continue;
    if (!w.dims.empty()) {
      bool mergeable = true;
      for (size_t k = 0; k < inputs.size(); ++k)
        if (w.strides[k].back() != strides[k][i] * d) mergeable = false;
      if (mergeable) {
        w.dims.back() *= d;
        for (size_t k = 0; k < inputs.size(); ++k) w.strides[k].back() = strides[k][i];
        continue;
      }
    }
    w.dims.push_back(d);
    for (size_t k = 0; k < inputs.size(); ++k) w.strides[k].push_back(strides[k][i]);
  }
  if (w.dims.empty()) {
    w.dims.push_back(1);
    for (size_t k = 0; k < inputs.size(); ++k) w.strides[k].push_back(0);
  }
  return w;
}

StridedPlan make_strided_plan(const Shape& out_shape, Layout out_layout, std::span<const Operand> inputs) {
  StridedWalk w = make_walk(out_shape, out_layout, inputs);
  StridedPlan p;
  p.num_inputs = static_cast<int>(inputs.size());
  p.numel = out_shape.numel();
  p.dims = std::move(w.dims);
  for (size_t k = 0; k < inputs.size() && k < StridedPlan::kMaxOperands; ++k) p.strides[k] = std::move(w.strides[k]);
  return p;
}

}  // namespace streamline::ops::cpu::math
