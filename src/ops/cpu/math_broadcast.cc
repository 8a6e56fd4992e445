#include "ops/cpu/math_broadcast.h"

namespace streamline::ops::cpu::math {
namespace {

// Element strides of each logical dimension for a tensor stored in `layout`.
std::vector<int64_t> logical_strides(const Shape& shape, Layout layout) {
  const size_t r = shape.rank();
  std::vector<int64_t> s(r, 1);
  if (layout == Layout::kChannelsLast && r == 4) {
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

StridedPlan make_strided_plan(const Shape& out_shape, Layout out_layout, std::span<const Operand> inputs) {
  StridedPlan p;
  p.num_inputs = static_cast<int>(inputs.size());
  p.numel = out_shape.numel();
  const size_t r = out_shape.rank();

  // 1. Per input, the stride of each output dimension in logical order (0 where broadcast).
  std::vector<std::vector<int64_t>> logical(inputs.size(), std::vector<int64_t>(r, 0));
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Shape& s = inputs[k].shape;
    const std::vector<int64_t> st = logical_strides(s, inputs[k].layout);
    const size_t lead = r - s.rank();
    for (size_t i = 0; i < s.rank(); ++i) logical[k][lead + i] = s[i] == 1 ? 0 : st[i];
  }

  // 2. Iteration order = the output's memory order.
  std::vector<size_t> order(r);
  for (size_t i = 0; i < r; ++i) order[i] = i;
  if (out_layout == Layout::kChannelsLast && r == 4) order = {0, 2, 3, 1};

  // 3. Drop size-1 dims and merge a dim into the next inner one when every input continues
  //    contiguously across the pair.
  for (size_t i : order) {
    const int64_t d = out_shape[i];
    if (d == 1) continue;
    if (!p.dims.empty()) {
      bool mergeable = true;
      for (size_t k = 0; k < inputs.size(); ++k)
        if (p.strides[k].back() != logical[k][i] * d) mergeable = false;
      if (mergeable) {
        p.dims.back() *= d;
        for (size_t k = 0; k < inputs.size(); ++k) p.strides[k].back() = logical[k][i];
        continue;
      }
    }
    p.dims.push_back(d);
    for (size_t k = 0; k < inputs.size(); ++k) p.strides[k].push_back(logical[k][i]);
  }
  if (p.dims.empty()) {
    p.dims.push_back(1);
    for (size_t k = 0; k < inputs.size(); ++k) p.strides[k].push_back(0);
  }
  return p;
}

}  // namespace streamline::ops::cpu::math
