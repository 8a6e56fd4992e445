// Widening narrow convolution groups (see passes.h, widen_narrow_groups).
//
// oneDNN's direct convolutions take groups whose input and output channels are whole multiples of
// its vector width; narrower groups (ResNeXt's four channels per group, say) fall back to a GEMM
// per group and run at a tenth of the speed or less. Merging f neighbouring groups into one of f
// times the width, with zero weights between the channels of different original groups, gives
// the same sums (the extra products are exact zeros) at f times the multiply-adds, on the fast
// kernel: ResNeXt-50's first grouped convolution (128 channels, 32 groups of 4, 56x56) took
// 9.3 ms on oneDNN's GEMM path and 2.0 ms merged into 16 groups of 8, on one AVX2 core.
//
// One difference: an infinite or NaN input channel now meets zero weights of the neighbouring
// groups, and 0 * inf is NaN, so such a value spreads to the f - 1 groups merged with its own.

#include "graph/pass_util.h"
#include "graph/passes.h"

namespace streamline::graph {
namespace {

// Largest merge: at most this many times the original multiply-adds.
constexpr int64_t kMaxMerge = 4;

// The merge factor for groups of c_in input and m_out output channels each (the smallest f that
// makes both whole multiples of `width`, with f dividing the group count), or 1 for none.
int64_t merge_factor(int64_t group, int64_t c_in, int64_t m_out, int64_t width) {
  if (c_in % width == 0 && m_out % width == 0) return 1;
  for (int64_t f = 2; f <= kMaxMerge; f *= 2)
    if (group % f == 0 && (f * c_in) % width == 0 && (f * m_out) % width == 0) return f;
  return 1;
}

}  // namespace

int widen_narrow_groups(Graph& g, int64_t width) {
  if (width <= 1) return 0;
  int widened = 0;
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(static_cast<NodeId>(i));
    const bool conv = detail::is_onnx_op(n, "Conv");
    const bool fused = n.op_type == "FusedConv" && n.domain == kStreamlineDomain;
    if (n.dead || !(conv || fused) || n.inputs.size() < 2) continue;
    const int64_t group = n.attr_int("group", 1);
    if (group <= 1) continue;
    const Tensor* w = detail::constant_of(g, n.inputs[1]);
    if (!w || w->dtype() != DType::kFloat32 || w->shape().rank() < 3) continue;
    const Shape& ws = w->shape();
    const int64_t m = ws[0], c_in = ws[1];
    if (m % group != 0) continue;  // malformed: left for the kernel to report
    const int64_t m_out = m / group;
    // Depthwise layers (one input channel per group) have kernels of their own.
    if (c_in == 1) continue;
    const int64_t f = merge_factor(group, c_in, m_out, width);
    if (f == 1) continue;
    // W'[o, (G mod f) * c_in + j, k...] = W[o, j, k...] for output o of original group G; zero
    // elsewhere.
    Shape wide_shape = ws;
    wide_shape[1] = f * c_in;
    Tensor wide = Tensor::empty(DType::kFloat32, wide_shape);  // zeroed
    const int64_t taps = w->numel() / (m * c_in);
    const float* src = w->data<float>();
    float* dst = wide.data<float>();
    for (int64_t o = 0; o < m; ++o) {
      const int64_t slot = (o / m_out) % f;
      for (int64_t j = 0; j < c_in; ++j)
        for (int64_t t = 0; t < taps; ++t)
          dst[(o * f * c_in + slot * c_in + j) * taps + t] = src[(o * c_in + j) * taps + t];
    }
    const ValueId wv =
        g.add_constant(detail::unique_value_name(g, g.value(n.inputs[1]).name + "/widened"), std::move(wide));
    Node& node = g.node(static_cast<NodeId>(i));  // add_constant may have moved the nodes
    node.inputs[1] = wv;
    node.attrs["group"] = detail::int_attr(group / f);
    ++widened;
  }
  if (widened) g.rebuild_edges();
  return widened;
}

}  // namespace streamline::graph
