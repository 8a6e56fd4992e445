#include "ops/op_params.h"

#include <algorithm>
#include <cfloat>

namespace streamline::ops {
namespace {

Status invalid_for(const std::string& who, const std::string& msg) {
  return invalid_argument(who + ": " + msg);
}

bool same_pads(const std::string& auto_pad) {
  return auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
}

}  // namespace

bool normalize_axis(int64_t axis, int64_t rank, int64_t* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = axis < 0 ? axis + rank : axis;
  return true;
}

Result<int64_t> normalize_axis(int64_t axis, int64_t rank, const std::string& who) {
  int64_t out = 0;
  if (!normalize_axis(axis, rank, &out))
    return invalid_for(who, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return out;
}

Result<std::vector<int64_t>> constant_ints(const TensorInfo& info, std::string_view what, const std::string& who) {
  if (!info.value) return unsupported(who + " needs a constant shape input '" + std::string(what) + "'");
  const DType t = info.value->dtype();
  if (t != DType::kInt64 && t != DType::kInt32)
    return invalid_for(who, "input '" + std::string(what) + "' must be int32 or int64, got " + dtype_name(t));
  std::vector<int64_t> v(static_cast<size_t>(info.value->numel()));
  for (int64_t i = 0; i < info.value->numel(); ++i) v[static_cast<size_t>(i)] = element_as_int64(*info.value, i);
  return v;
}

SliceAttrs read_slice_attrs(const graph::Node& node) {
  SliceAttrs a;
  if (node.opset < 10) {
    a.starts = node.attr_ints("starts");
    a.ends = node.attr_ints("ends");
    a.has_axes = node.has_attr("axes");
    a.axes = node.attr_ints("axes");
  }
  return a;
}

Result<SliceGeometry> slice_geometry(const SliceAttrs& attrs, int opset, std::span<const TensorInfo> in,
                                     const std::string& who) {
  const Shape& s = in[0].shape;
  const int64_t rank = static_cast<int64_t>(s.rank());
  std::vector<int64_t> starts = attrs.starts, ends = attrs.ends, axes = attrs.axes, steps;
  bool has_axes = attrs.has_axes;
  if (opset >= 10) {
    if (in.size() < 3 || !in[1].present() || !in[2].present())
      return invalid_for(who, "missing input 'starts' or 'ends'");
    SL_ASSIGN_OR_RETURN(starts, constant_ints(in[1], "starts", who));
    SL_ASSIGN_OR_RETURN(ends, constant_ints(in[2], "ends", who));
    if (in.size() > 3 && in[3].present()) {
      SL_ASSIGN_OR_RETURN(axes, constant_ints(in[3], "axes", who));
      has_axes = true;
    }
    if (in.size() > 4 && in[4].present()) {
      SL_ASSIGN_OR_RETURN(steps, constant_ints(in[4], "steps", who));
    }
  }
  if (starts.size() != ends.size()) return invalid_for(who, "'starts' and 'ends' differ in length");
  if (!has_axes) {
    axes.resize(starts.size());
    for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    return invalid_for(who, "'starts', 'ends', 'axes' and 'steps' differ in length");

  // Pass 1: per sliced axis, the first element, the step and the output length.
  SliceGeometry g;
  g.out = s;
  g.begin.assign(s.rank(), 0);
  g.step.assign(s.rank(), 1);
  std::vector<bool> seen(s.rank(), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    SL_ASSIGN_OR_RETURN(const int64_t ax, normalize_axis(axes[i], rank, who));
    const size_t a = static_cast<size_t>(ax);
    if (seen[a]) return invalid_for(who, "axis " + std::to_string(axes[i]) + " is repeated");
    seen[a] = true;
    const int64_t dim = s[a];
    const int64_t st = steps[i];
    if (st == 0) return invalid_for(who, "step is zero");
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    int64_t len = 0;
    if (st > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      if (e > b) len = (e - b - 1) / st + 1;
    } else if (dim > 0) {
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      if (b > e) len = (b - e - 1) / (-st) + 1;
    }
    g.begin[a] = len > 0 ? b : 0;
    g.step[a] = st;
    g.out[a] = len;
  }
  // Pass 2: the strided view of the dense input that the output is.
  g.strides.assign(s.rank(), 0);
  for (size_t d = 0; d < s.rank(); ++d) {
    g.strides[d] = s.stride(d) * g.step[d];
    g.offset += g.begin[d] * s.stride(d);
  }
  return g;
}

Result<PoolAttrs> read_pool_attrs(const graph::Node& node, bool global, const std::string& who) {
  if (node.inputs.size() != 1) return invalid_for(who, "expects one input");
  PoolAttrs a;
  const std::string ap = node.attr_string("auto_pad", "NOTSET");
  if (ap != "NOTSET" && !same_pads(ap) && ap != "VALID" && !ap.empty())
    return invalid_for(who, "unknown auto_pad '" + ap + "'");
  a.auto_pad = ap.empty() ? "NOTSET" : ap;
  a.ceil_mode = node.attr_int("ceil_mode", 0) != 0;
  a.count_include_pad = node.attr_int("count_include_pad", 0) != 0;
  a.kernel_shape = node.attr_ints("kernel_shape");
  a.strides = node.attr_ints("strides");
  a.dilations = node.attr_ints("dilations");
  a.pads = node.attr_ints("pads");
  if (!global && a.kernel_shape.empty()) return invalid_for(who, "kernel_shape is required");
  for (int64_t v : a.kernel_shape)
    if (v < 1) return invalid_for(who, "kernel_shape values must be >= 1");
  for (int64_t v : a.strides)
    if (v < 1) return invalid_for(who, "strides must be >= 1");
  for (int64_t v : a.dilations)
    if (v < 1) return invalid_for(who, "dilations must be >= 1");
  for (int64_t v : a.pads)
    if (v < 0) return invalid_for(who, "pads must be >= 0");
  return a;
}

Result<std::vector<PoolAxis>> pool_axes(const PoolAttrs& attrs, const Shape& x, bool global, const std::string& who) {
  const size_t nsp = x.rank() - 2;
  if (!global) {
    auto check = [&](const std::vector<int64_t>& v, size_t n, const char* name) -> Status {
      if (!v.empty() && v.size() != n)
        return invalid_for(
            who, std::string(name) + " has " + std::to_string(v.size()) + " values, expected " + std::to_string(n));
      return ok_status();
    };
    SL_RETURN_IF_ERROR(check(attrs.kernel_shape, nsp, "kernel_shape"));
    SL_RETURN_IF_ERROR(check(attrs.strides, nsp, "strides"));
    SL_RETURN_IF_ERROR(check(attrs.dilations, nsp, "dilations"));
    SL_RETURN_IF_ERROR(check(attrs.pads, 2 * nsp, "pads"));
  }
  std::vector<PoolAxis> axes;
  for (size_t i = 0; i < nsp; ++i) {
    PoolAxis a;
    a.in = x[i + 2];
    a.k = a.in;
    if (!global) {
      a.k = attrs.kernel_shape[i];
      a.s = attrs.strides.empty() ? 1 : attrs.strides[i];
      a.d = attrs.dilations.empty() ? 1 : attrs.dilations[i];
      const int64_t dk = (a.k - 1) * a.d + 1;
      if (same_pads(attrs.auto_pad)) {
        a.out = (a.in + a.s - 1) / a.s;
        const int64_t total = std::max<int64_t>(0, (a.out - 1) * a.s + dk - a.in);
        a.pad_begin = attrs.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        a.pad_end = total - a.pad_begin;
        a.pad_end_fit = a.pad_end;
      } else {
        if (attrs.auto_pad == "NOTSET" && !attrs.pads.empty()) {
          a.pad_begin = attrs.pads[i];
          a.pad_end = attrs.pads[i + nsp];
        }
        a.pad_end_fit = a.pad_end;
        const int64_t span = a.in + a.pad_begin + a.pad_end - dk;
        if (span < 0)
          return invalid_for(who, "kernel extent " + std::to_string(dk) + " exceeds padded input " +
                                      std::to_string(a.in + a.pad_begin + a.pad_end));
        a.out = attrs.ceil_mode ? (span + a.s - 1) / a.s + 1 : span / a.s + 1;
        // A window that would start in the end padding is dropped.
        if (attrs.ceil_mode && (a.out - 1) * a.s >= a.in + a.pad_begin) --a.out;
        if (attrs.ceil_mode) a.pad_end_fit = (a.out - 1) * a.s + dk - a.in - a.pad_begin;
      }
    }
    if (a.out < 1) return invalid_for(who, "non-positive output size along axis " + std::to_string(i + 2));
    axes.push_back(a);
  }
  return axes;
}

Result<ActivationAttrs> read_activation(const graph::Node& node, bool allow_gelu) {
  const std::string name = node.attr_string("activation", "");
  const std::vector<float> p = node.attr_floats("activation_params");
  ActivationAttrs a;
  if (name.empty() || name == "None" || name == "Identity") {
    a.kind = ActivationKind::kNone;
  } else if (name == "Relu") {
    a.kind = ActivationKind::kRelu;
  } else if (name == "LeakyRelu") {
    a.kind = ActivationKind::kLeakyRelu;
    a.alpha = p.empty() ? 0.01f : p[0];
  } else if (name == "Clip") {
    a.kind = ActivationKind::kClip;
    a.alpha = p.size() > 0 ? p[0] : -FLT_MAX;
    a.beta = p.size() > 1 ? p[1] : FLT_MAX;
    if (a.alpha > a.beta) return invalid_argument(node.describe() + ": Clip activation with min > max");
  } else if (name == "Sigmoid") {
    a.kind = ActivationKind::kSigmoid;
  } else if (name == "HardSigmoid") {
    a.kind = ActivationKind::kHardSigmoid;
    a.alpha = p.size() > 0 ? p[0] : 0.2f;
    a.beta = p.size() > 1 ? p[1] : 0.5f;
  } else if (name == "Tanh") {
    a.kind = ActivationKind::kTanh;
  } else if (name == "Gelu" && allow_gelu) {
    a.kind = ActivationKind::kGelu;
  } else {
    return invalid_argument(node.describe() + ": unknown activation '" + name + "'");
  }
  return a;
}

Shape reduced_shape(const Shape& s, const std::vector<bool>& reduced, bool keepdims) {
  Shape out;
  for (size_t d = 0; d < s.rank(); ++d) {
    if (!reduced[d])
      out.push_back(s[d]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

ReduceAttrs read_reduce_attrs(const graph::Node& node) {
  ReduceAttrs a;
  a.axes_from_input = node.opset >= 18 || (node.op_type == "ReduceSum" && node.opset >= 13);
  if (!a.axes_from_input) a.axes = node.attr_ints("axes");
  a.keepdims = node.attr_int("keepdims", 1) != 0;
  a.noop_with_empty_axes = node.attr_int("noop_with_empty_axes", 0) != 0;
  return a;
}

Result<ReduceAxes> reduce_axes(const ReduceAttrs& attrs, std::span<const TensorInfo> in, const std::string& who) {
  if (in.empty() || !in[0].present()) return invalid_for(who, "missing input 'data'");
  const Shape& s = in[0].shape;
  const int64_t rank = static_cast<int64_t>(s.rank());
  std::vector<int64_t> axes = attrs.axes;
  if (attrs.axes_from_input && in.size() > 1 && in[1].present()) {
    SL_ASSIGN_OR_RETURN(axes, constant_ints(in[1], "axes", who));
  }
  ReduceAxes r;
  r.identity = axes.empty() && attrs.noop_with_empty_axes;
  r.reduced.assign(s.rank(), axes.empty() && !attrs.noop_with_empty_axes);
  for (int64_t a : axes) {
    SL_ASSIGN_OR_RETURN(const int64_t ax, normalize_axis(a, rank, who));
    r.reduced[static_cast<size_t>(ax)] = true;
  }
  r.y = reduced_shape(s, r.reduced, attrs.keepdims);
  return r;
}

Result<AutoPad> parse_auto_pad(const std::string& text, const std::string& who) {
  if (text == "NOTSET" || text.empty()) return AutoPad::kNotSet;
  if (text == "SAME_UPPER") return AutoPad::kSameUpper;
  if (text == "SAME_LOWER") return AutoPad::kSameLower;
  if (text == "VALID") return AutoPad::kValid;
  return invalid_argument(who + ": unknown auto_pad '" + text + "'");
}

Result<ConvAxis> conv_axis(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                           int64_t pad_end, AutoPad auto_pad, const std::string& who) {
  const int64_t extent = (kernel - 1) * dilation + 1;
  ConvAxis a{pad_begin, pad_end, 0};
  if (auto_pad == AutoPad::kValid) {
    a.pad_begin = a.pad_end = 0;
  } else if (auto_pad != AutoPad::kNotSet) {
    const int64_t o = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>(0, (o - 1) * stride + extent - in);
    a.pad_begin = auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
    a.pad_end = total - a.pad_begin;
  }
  const int64_t padded = in + a.pad_begin + a.pad_end;
  if (padded < extent)
    return invalid_argument(who + ": kernel extent " + std::to_string(extent) + " exceeds padded input " +
                            std::to_string(padded));
  a.out = (padded - extent) / stride + 1;
  return a;
}

Result<ConvAttrs> read_conv_attrs(const graph::Node& node, bool transposed) {
  ConvAttrs a;
  a.transposed = transposed;
  SL_ASSIGN_OR_RETURN(a.auto_pad, parse_auto_pad(node.attr_string("auto_pad", "NOTSET"), node.describe()));
  a.group = node.attr_int("group", 1);
  if (a.group < 1) return invalid_argument(node.describe() + ": group must be >= 1");
  a.kernel_shape = node.attr_ints("kernel_shape");
  a.strides = node.attr_ints("strides");
  a.dilations = node.attr_ints("dilations");
  a.pads = node.attr_ints("pads");
  a.output_padding = node.attr_ints("output_padding");
  a.output_shape = node.attr_ints("output_shape");
  for (int64_t v : a.strides)
    if (v < 1) return invalid_argument(node.describe() + ": strides must be >= 1");
  for (int64_t v : a.dilations)
    if (v < 1) return invalid_argument(node.describe() + ": dilations must be >= 1");
  for (int64_t v : a.pads)
    if (v < 0) return invalid_argument(node.describe() + ": pads must be >= 0");
  return a;
}

Result<ConvGeom> conv_geometry(const std::string& who, const ConvAttrs& a, const Shape& x, const Shape& w) {
  if (x.rank() < 3 || x.rank() > 5)
    return unsupported(who + ": input must be rank 3 to 5 (1-D to 3-D convolution), got " + x.to_string());
  if (w.rank() != x.rank())
    return invalid_argument(who + ": weight rank " + std::to_string(w.rank()) + " does not match input rank " +
                            std::to_string(x.rank()));
  const size_t nsp = x.rank() - 2;
  ConvGeom g;
  g.n = x[0];
  g.c = x[1];
  g.group = a.group;
  if (g.c % a.group != 0)
    return invalid_argument(who + ": group " + std::to_string(a.group) + " does not divide input channels " +
                            std::to_string(g.c));
  if (!a.transposed) {
    g.m = w[0];
    if (w[1] * a.group != g.c)
      return invalid_argument(who + ": weight " + w.to_string() + " expects " + std::to_string(w[1] * a.group) +
                              " input channels, input has " + std::to_string(g.c));
    if (g.m % a.group != 0)
      return invalid_argument(who + ": group " + std::to_string(a.group) + " does not divide output channels " +
                              std::to_string(g.m));
  } else {
    if (w[0] != g.c)
      return invalid_argument(who + ": weight " + w.to_string() + " expects " + std::to_string(w[0]) +
                              " input channels, input has " + std::to_string(g.c));
    g.m = w[1] * a.group;
  }
  auto sized = [&](const std::vector<int64_t>& v, size_t n, int64_t def, const char* name,
                   std::vector<int64_t>* out) -> Status {
    if (v.empty()) {
      out->assign(n, def);
      return ok_status();
    }
    if (v.size() != n)
      return invalid_argument(who + ": " + name + " has " + std::to_string(v.size()) + " values, expected " +
                              std::to_string(n));
    *out = v;
    return ok_status();
  };
  std::vector<int64_t> pads, out_pad;
  SL_RETURN_IF_ERROR(sized(a.strides, nsp, 1, "strides", &g.strides));
  SL_RETURN_IF_ERROR(sized(a.dilations, nsp, 1, "dilations", &g.dil));
  SL_RETURN_IF_ERROR(sized(a.pads, 2 * nsp, 0, "pads", &pads));
  SL_RETURN_IF_ERROR(sized(a.output_padding, nsp, 0, "output_padding", &out_pad));
  g.k.assign(w.begin() + 2, w.end());
  if (!a.kernel_shape.empty() && a.kernel_shape != g.k)
    return invalid_argument(who + ": kernel_shape does not match weight " + w.to_string());
  std::vector<int64_t> out_shape = a.output_shape;
  if (!out_shape.empty() && out_shape.size() == nsp + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (!out_shape.empty() && out_shape.size() != nsp)
    return invalid_argument(who + ": output_shape must have one value per spatial axis");
  g.y_shape = Shape{g.n, g.m};
  for (size_t i = 0; i < nsp; ++i) {
    const int64_t in = x[i + 2], s = g.strides[i], dk = (g.k[i] - 1) * g.dil[i] + 1;
    int64_t pl = pads[i], pr = pads[i + nsp], out = 0;
    if (!a.transposed) {
      SL_ASSIGN_OR_RETURN(ConvAxis ax, conv_axis(in, g.k[i], s, g.dil[i], pl, pr, a.auto_pad, who));
      pl = ax.pad_begin;
      pr = ax.pad_end;
      out = ax.out;
    } else {
      const int64_t full = s * (in - 1) + out_pad[i] + dk;
      if (!out_shape.empty() || a.auto_pad == AutoPad::kSameUpper || a.auto_pad == AutoPad::kSameLower) {
        out = out_shape.empty() ? in * s : out_shape[i];
        // The spec's total / 2 is floor division: an output_shape past the natural size gives a
        // negative end padding (extra trailing outputs), not a negative start.
        const int64_t total = full - out;
        const int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
        pl = a.auto_pad == AutoPad::kSameUpper ? half : total - half;
        pr = total - pl;
      } else {
        if (a.auto_pad == AutoPad::kValid) pl = pr = 0;
        out = full - pl - pr;
      }
    }
    if (out < 1)
      return invalid_argument(who + ": output size " + std::to_string(out) + " along axis " + std::to_string(i + 2) +
                              " is not positive");
    g.in.push_back(in);
    g.out.push_back(out);
    g.pad_l.push_back(pl);
    g.pad_r.push_back(pr);
    g.y_shape.push_back(out);
  }
  return g;
}

Result<Shape> broadcast_shape(const Shape& a, const Shape& b, const std::string& who) {
  Shape out;
  if (!broadcast_shapes(a, b, &out))
    return invalid_argument(who + ": shapes " + a.to_string() + " and " + b.to_string() + " do not broadcast");
  return out;
}

Result<MatMulShapes> matmul_shapes(const Shape& a, const Shape& b, const std::string& who) {
  if (a.rank() < 1 || b.rank() < 1) return invalid_argument(who + ": MatMul inputs must have rank >= 1");
  MatMulShapes s;
  const size_t ra = a.rank(), rb = b.rank();
  s.m = ra >= 2 ? a[ra - 2] : 1;
  s.k = a[ra - 1];
  const int64_t kb = rb >= 2 ? b[rb - 2] : b[0];
  s.n = rb >= 2 ? b[rb - 1] : 1;
  if (s.k != kb)
    return invalid_argument(who + ": inner dimensions differ: A " + a.to_string() + ", B " + b.to_string());
  s.a_batch = Shape(std::span<const int64_t>(a.data(), ra >= 2 ? ra - 2 : 0));
  s.b_batch = Shape(std::span<const int64_t>(b.data(), rb >= 2 ? rb - 2 : 0));
  if (!broadcast_shapes(s.a_batch, s.b_batch, &s.batch))
    return invalid_argument(who + ": batch dims of " + a.to_string() + " and " + b.to_string() + " do not broadcast");
  s.y = s.batch;
  if (ra >= 2) s.y.push_back(s.m);
  if (rb >= 2) s.y.push_back(s.n);
  return s;
}

Result<GemmShapes> gemm_shapes(const Shape& a, const Shape& b, bool trans_a, bool trans_b, const std::string& who) {
  if (a.rank() != 2 || b.rank() != 2)
    return invalid_argument(who + ": A and B must be 2-D, got " + a.to_string() + " and " + b.to_string());
  GemmShapes g;
  g.m = trans_a ? a[1] : a[0];
  g.k = trans_a ? a[0] : a[1];
  const int64_t kb = trans_b ? b[1] : b[0];
  g.n = trans_b ? b[0] : b[1];
  if (g.k != kb)
    return invalid_argument(who + ": inner dimensions differ: A " + a.to_string() + ", B " + b.to_string());
  return g;
}

Status check_gemm_c(const Shape& c, const GemmShapes& g, const std::string& who) {
  const Shape y{g.m, g.n};
  Shape bcast;
  if (c.rank() > 2 || !broadcast_shapes(c, y, &bcast) || bcast != y)
    return invalid_argument(who + ": C " + c.to_string() + " does not broadcast to " + y.to_string());
  return ok_status();
}

Status attention_operand_dims(const Shape& s, const std::vector<int64_t>& perm, const char* what,
                              const std::string& who, std::vector<int64_t>* dims, std::vector<int64_t>* strides) {
  if (!perm.empty() && perm.size() != s.rank())
    return invalid_argument(who + ": " + what + " " + s.to_string() + " has rank " + std::to_string(s.rank()) +
                            " but its perm has " + std::to_string(perm.size()) + " entries");
  if (s.rank() < 2) return unsupported(who + ": " + what + " must have rank >= 2, got " + s.to_string());
  const size_t r = s.rank();
  dims->assign(r, 0);
  strides->assign(r, 0);
  for (size_t i = 0; i < r; ++i) {
    const size_t src = perm.empty() ? i : static_cast<size_t>(perm[i]);
    (*dims)[i] = s[src];
    (*strides)[i] = s.stride(src);
  }
  return ok_status();
}

}  // namespace streamline::ops
