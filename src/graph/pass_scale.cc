// A per-channel scale computed at run time, multiplied into a convolution's input -> the
// convolution's `x_scale` input.
//
// Squeeze-excitation blocks (EfficientNet, MobileNetV3, RegNetY, MnasNet-A, and most of their
// descendants) end in Mul(x, s) with x [N, C, H, W] and s [N, C, 1, 1] computed from x itself
// (global pool, two small convolutions, a sigmoid), and the product is read by one ungrouped
// convolution. The multiply is a full pass over x that no producer can take: s depends on all of
// x. A convolution is linear in each input channel, so conv(x * s, W) = conv(x, W * s) with W's
// input-channel axis scaled, and with s per image that scales O x C x K weights instead of
// C x H x W activations. The rewrite is taken where the activations outnumber the weights
// several times (early and middle stages; at the later ones, 14x14 pixels or fewer against wider
// filters, the multiply is cheaper). The convolution becomes a streamline.FusedConv with inputs
// X, W, B, Z, S (the scale; its elementwise epilogue's inputs, if any, follow) and attribute
// x_scale = 1; kernels scale the weights per run for one image, and multiply the activations
// themselves for a batch of images with different scales.

#include "graph/pass_util.h"
#include "graph/passes.h"

namespace streamline::graph {
namespace {

// Whether `s` is a [N or 1, C, 1, 1] per-channel scale of `x` [N, C, H, W] (all known but N).
bool channel_scale_of(const Value& x, const Value& s) {
  if (!x.dims || !s.dims || x.dims->size() != 4 || s.dims->size() != 4) return false;
  const DimList& xd = *x.dims;
  const DimList& sd = *s.dims;
  for (int i = 1; i < 4; ++i)
    if (!xd[static_cast<size_t>(i)].fixed()) return false;
  if (!sd[1].fixed() || sd[1].value != xd[1].value || !sd[2].fixed() || sd[2].value != 1 || !sd[3].fixed() ||
      sd[3].value != 1)
    return false;
  return (sd[0].fixed() && sd[0].value == 1) || detail::same_dim(sd[0], xd[0]);
}

// Scaling a weight in oneDNN's reorder (into the convolution's blocked layout) costs about seven
// times what multiplying an activation does (EfficientNet-B3 on two threads: 816 x 136 weights
// took 77 us more a run, the multiply over 816 x 19 x 19 activations it replaced 28 us), so the
// rewrite asks for at least this many activations per weight.
constexpr int64_t kActivationsPerWeight = 8;

// A convolution that may take the scale: ungrouped, constant float32 rank-4 weights over `x`'s
// channels, no x_scale yet, reading the product as its input 0 only, and at most one weight per
// kActivationsPerWeight of x's elements per image.
bool takes_scale(const Graph& g, const Node& c, ValueId product, const Value& x) {
  const bool plain = detail::is_onnx_op(c, "Conv");
  const bool fused = !c.dead && c.op_type == "FusedConv" && c.domain == kStreamlineDomain;
  if (!(plain || fused) || c.inputs.size() < 2 || c.inputs[0] != product || c.inputs[1] == product) return false;
  if (c.attr_int("group", 1) != 1 || c.has_attr("x_scale")) return false;
  const Tensor* w = detail::constant_of(g, c.inputs[1]);
  if (!w || w->dtype() != DType::kFloat32 || w->shape().rank() != 4) return false;
  const Shape& ws = w->shape();
  const DimList& xd = *x.dims;
  if (ws[1] != xd[1].value) return false;
  return kActivationsPerWeight * ws.numel() <= xd[1].value * xd[2].value * xd[3].value;
}

}  // namespace

int fold_channel_scale_into_conv(Graph& g) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  const detail::ProtectedValues prot(g);
  int count = 0;
  for (NodeId id : *order) {
    const Node& m = g.node(id);
    if (!detail::is_onnx_op(m, "Mul") || m.inputs.size() != 2 || m.outputs.size() != 1) continue;
    const ValueId product = m.outputs[0];
    if (product == kNoValue || g.value(product).dtype != DType::kFloat32) continue;
    const NodeId cid = detail::sole_consumer(g, prot, product);
    if (cid == kNoNode) continue;
    for (int xi = 0; xi < 2; ++xi) {
      const ValueId x_id = m.inputs[static_cast<size_t>(xi)];
      const ValueId s_id = m.inputs[static_cast<size_t>(1 - xi)];
      if (x_id == kNoValue || s_id == kNoValue || detail::constant_of(g, s_id)) continue;
      const Value& x = g.value(x_id);
      const Value& s = g.value(s_id);
      if (x.dtype != DType::kFloat32 || s.dtype != DType::kFloat32 || !channel_scale_of(x, s)) continue;
      if (!detail::same_known_dims(x, g.value(product))) continue;
      if (!takes_scale(g, g.node(cid), product, x)) continue;
      Node& c = g.node(cid);
      if (c.domain.empty()) {
        c.op_type = "FusedConv";
        c.domain = kStreamlineDomain;
        c.opset = kStreamlineOpset;
      }
      // X, W, B, Z, then the scale before any epilogue operands.
      if (c.inputs.size() < 4) c.inputs.resize(4, kNoValue);
      c.inputs[0] = x_id;
      c.inputs.insert(c.inputs.begin() + 4, s_id);
      c.attrs["x_scale"] = detail::int_attr(1);
      g.node(id).dead = true;
      g.rebuild_edges();
      ++count;
      break;
    }
  }
  return count;
}

}  // namespace streamline::graph
