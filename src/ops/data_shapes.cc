#include "ops/data_shapes.h"

#include "ops/op_params.h"

namespace streamline::ops {
namespace {

Status invalid_for(const std::string& who, const std::string& msg) {
  return invalid_argument(who + ": " + msg);
}

}  // namespace

Status check_movable(DType t, const std::string& who) {
  if (t == DType::kString) return unsupported(who + ": string tensors are not supported");
  if (!dtype_supported(t)) return invalid_for(who, "input has an unknown dtype");
  return ok_status();
}

Status check_index_dtype(DType t, const char* what, const std::string& who) {
  if (t != DType::kInt32 && t != DType::kInt64)
    return invalid_for(who, std::string("'") + what + "' must be int32 or int64, got " + dtype_name(t));
  return ok_status();
}

TransposeAttrs read_transpose_attrs(const graph::Node& node) {
  return TransposeAttrs{node.has_attr("perm"), node.attr_ints("perm")};
}

Result<TransposeShapes> transpose_shape(const TransposeAttrs& attrs, const Shape& x, const std::string& who) {
  const size_t rank = x.rank();
  TransposeShapes t;
  t.perm = attrs.perm;
  if (!attrs.has_perm) {
    t.perm.resize(rank);
    for (size_t i = 0; i < rank; ++i) t.perm[i] = static_cast<int64_t>(rank - 1 - i);
  }
  if (t.perm.size() != rank)
    return invalid_for(who, "perm has " + std::to_string(t.perm.size()) + " entries for rank " + std::to_string(rank));
  std::vector<bool> seen(rank, false);
  for (int64_t p : t.perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)])
      return invalid_for(who,
                         "perm " + Shape(t.perm).to_string() + " is not a permutation of rank " + std::to_string(rank));
    seen[static_cast<size_t>(p)] = true;
    t.y.push_back(x[static_cast<size_t>(p)]);
  }
  return t;
}

Result<int64_t> read_concat_axis(const graph::Node& node) {
  if (node.opset >= 4 && !node.has_attr("axis")) return invalid_for(node.describe(), "missing attribute 'axis'");
  return node.attr_int("axis", 1);
}

Result<ConcatShapes> concat_shape(std::span<const TensorInfo> in, int64_t axis, const std::string& who) {
  if (in.empty()) return invalid_for(who, "needs at least one input");
  const TensorInfo& f = in[0];
  if (!f.present()) return invalid_for(who, "input 0 is missing");
  SL_RETURN_IF_ERROR(check_movable(f.dtype, who));
  const int64_t rank = static_cast<int64_t>(f.shape.rank());
  if (rank == 0) return invalid_for(who, "cannot concatenate scalars");
  ConcatShapes c;
  SL_ASSIGN_OR_RETURN(c.axis, normalize_axis(axis, rank, who));
  const size_t ax = static_cast<size_t>(c.axis);
  int64_t total = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const TensorInfo& t = in[i];
    const std::string input = "input " + std::to_string(i);
    if (!t.present()) return invalid_for(who, input + " is missing");
    if (t.dtype != f.dtype)
      return invalid_for(who, input + " has dtype " + dtype_name(t.dtype) + ", input 0 has " + dtype_name(f.dtype));
    if (static_cast<int64_t>(t.shape.rank()) != rank)
      return invalid_for(
          who, input + " has rank " + std::to_string(t.shape.rank()) + ", input 0 has rank " + std::to_string(rank));
    for (size_t d = 0; d < t.shape.rank(); ++d)
      if (d != ax && t.shape[d] != f.shape[d])
        return invalid_for(who, input + " shape " + t.shape.to_string() + " does not match input 0 shape " +
                                    f.shape.to_string() + " off axis " + std::to_string(c.axis));
    total += t.shape[ax];
  }
  c.y = f.shape;
  c.y[ax] = total;
  return c;
}

Result<GatherShapes> gather_shape(std::span<const TensorInfo> in, int64_t axis, const std::string& who) {
  if (in.size() < 2 || !in[0].present() || !in[1].present())
    return invalid_for(who, "needs inputs 'data' and 'indices'");
  SL_RETURN_IF_ERROR(check_movable(in[0].dtype, who));
  SL_RETURN_IF_ERROR(check_index_dtype(in[1].dtype, "indices", who));
  const Shape& s = in[0].shape;
  GatherShapes g;
  SL_ASSIGN_OR_RETURN(g.axis, normalize_axis(axis, static_cast<int64_t>(s.rank()), who));
  for (int64_t i = 0; i < g.axis; ++i) g.y.push_back(s[static_cast<size_t>(i)]);
  for (int64_t d : in[1].shape) g.y.push_back(d);
  for (size_t i = static_cast<size_t>(g.axis) + 1; i < s.rank(); ++i) g.y.push_back(s[i]);
  return g;
}

Result<Shape> reshape_shape(const Shape& x, const std::vector<int64_t>& target, bool allowzero,
                            const std::string& who) {
  const std::string req = Shape(target).to_string();
  Shape out;
  int infer = -1;
  bool has_zero = false;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == -1) {
      if (infer >= 0) return invalid_for(who, "shape " + req + " has more than one -1");
      infer = static_cast<int>(i);
      out.push_back(1);
      continue;
    }
    if (d < -1) return invalid_for(who, "shape " + req + " has an invalid negative dimension");
    if (d == 0) {
      has_zero = true;
      if (!allowzero) {
        if (i >= x.rank())
          return invalid_for(who, "shape " + req + " copies dimension " + std::to_string(i) + " of a rank-" +
                                      std::to_string(x.rank()) + " input");
        d = x[i];
      }
    }
    out.push_back(d);
    known *= d;
  }
  if (allowzero && has_zero && infer >= 0)
    return invalid_for(who, "shape " + req + " has both 0 and -1 with allowzero=1");
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0)
      return invalid_for(who, "cannot infer the -1 of shape " + req + " for input " + x.to_string());
    out[static_cast<size_t>(infer)] = x.numel() / known;
  }
  if (out.numel() != x.numel())
    return invalid_for(who, "cannot view " + x.to_string() + " (" + std::to_string(x.numel()) + " elements) as " +
                                out.to_string() + " (" + std::to_string(out.numel()) + " elements)");
  return out;
}

Result<Shape> flatten_shape(const Shape& x, int64_t axis, const std::string& who) {
  const int64_t r = static_cast<int64_t>(x.rank());
  // Unlike other axes, r itself is allowed: everything goes to the outer dim.
  if (axis < -r || axis > r)
    return invalid_for(who, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  const int64_t a = axis < 0 ? axis + r : axis;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < r; ++i) (i < a ? outer : inner) *= x[static_cast<size_t>(i)];
  return Shape{outer, inner};
}

namespace {

// Marks `axes` (of an output or input of rank `rank`); InvalidArgument when one is out of range or repeated.
Result<std::vector<bool>> mark_axes(const std::vector<int64_t>& axes, int64_t rank, const std::string& who) {
  std::vector<bool> marked(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    SL_ASSIGN_OR_RETURN(const int64_t ax, normalize_axis(a, rank, who));
    if (marked[static_cast<size_t>(ax)]) return invalid_for(who, "axis " + std::to_string(a) + " is repeated");
    marked[static_cast<size_t>(ax)] = true;
  }
  return marked;
}

}  // namespace

Result<Shape> squeeze_shape(const Shape& x, const std::vector<int64_t>& axes, bool has_axes, const std::string& who) {
  SL_ASSIGN_OR_RETURN(std::vector<bool> marked, mark_axes(axes, static_cast<int64_t>(x.rank()), who));
  Shape out;
  for (size_t i = 0; i < x.rank(); ++i) {
    const int64_t d = x[i];
    // No axes, or an empty list, squeezes every dim of size 1.
    const bool squeeze = has_axes && !axes.empty() ? marked[i] : d == 1;
    if (squeeze && d != 1)
      return invalid_for(
          who, "cannot squeeze axis " + std::to_string(i) + " of size " + std::to_string(d) + " in " + x.to_string());
    if (!squeeze) out.push_back(d);
  }
  return out;
}

Result<Shape> unsqueeze_shape(const Shape& x, const std::vector<int64_t>& axes, const std::string& who) {
  const int64_t rank = static_cast<int64_t>(x.rank() + axes.size());
  SL_ASSIGN_OR_RETURN(std::vector<bool> marked, mark_axes(axes, rank, who));
  Shape out;
  size_t src = 0;
  for (size_t i = 0; i < marked.size(); ++i) out.push_back(marked[i] ? 1 : x[src++]);
  return out;
}

Result<ViewAttrs> read_view_attrs(const graph::Node& node) {
  const std::string who = node.describe();
  ViewAttrs a;
  a.opset = node.opset;
  const std::string& op = node.op_type;
  if (op == "Reshape") {
    a.op = ViewOp::kReshape;
    a.allowzero = node.opset >= 14 && node.attr_int("allowzero", 0) != 0;
    a.list_from_input = node.opset >= 5;
    if (!a.list_from_input) {
      if (!node.has_attr("shape")) return invalid_for(who, "missing attribute 'shape'");
      a.has_list_attr = true;
      a.list_attr = node.attr_ints("shape");
    }
  } else if (op == "Flatten") {
    a.op = ViewOp::kFlatten;
    a.axis = node.attr_int("axis", 1);
  } else if (op == "Squeeze" || op == "Unsqueeze") {
    a.op = op == "Squeeze" ? ViewOp::kSqueeze : ViewOp::kUnsqueeze;
    a.list_from_input = node.opset >= 13;
    if (!a.list_from_input) {
      a.has_list_attr = node.has_attr("axes");
      a.list_attr = node.attr_ints("axes");
      if (a.op == ViewOp::kUnsqueeze && !a.has_list_attr) return invalid_for(who, "missing attribute 'axes'");
    }
  } else if (op == "Identity") {
    a.op = ViewOp::kIdentity;
  } else if (op == "Dropout") {
    a.op = ViewOp::kDropout;
    a.mask = node.outputs.size() > 1;
  } else {
    return unsupported(who + ": " + op + " is not a view op");
  }
  return a;
}

namespace {

// Dropout at inference is the identity; training mode is too, but only with a zero ratio.
Status check_dropout_inference(std::span<const TensorInfo> in, int opset, const std::string& who) {
  if (opset < 12 || in.size() < 3 || !in[2].present()) return ok_status();
  if (!in[2].value) return unsupported(who + ": needs a constant input 'training_mode'");
  if (element_as_double(*in[2].value, 0) == 0.0) return ok_status();
  double ratio = 0.5;
  if (in.size() > 1 && in[1].present()) {
    if (!in[1].value) return unsupported(who + ": needs a constant input 'ratio' in training mode");
    ratio = element_as_double(*in[1].value, 0);
  }
  if (ratio != 0.0) return unsupported(who + ": training mode with a non-zero ratio is not supported");
  return ok_status();
}

// The axes or shape of a view op: the attribute before the op took them as input 1.
Result<std::vector<int64_t>> list_input(const ViewAttrs& a, std::span<const TensorInfo> in, const char* what,
                                        const std::string& who, bool* have) {
  *have = a.has_list_attr;
  if (!a.list_from_input || in.size() < 2 || !in[1].present()) return a.list_attr;
  *have = true;
  return constant_ints(in[1], what, who);
}

}  // namespace

Result<std::vector<OutputInfo>> view_outputs(const ViewAttrs& a, std::span<const TensorInfo> in,
                                             const std::string& who) {
  if (in.empty() || !in[0].present()) return invalid_for(who, "missing input 'data'");
  const TensorInfo& x = in[0];
  SL_RETURN_IF_ERROR(check_movable(x.dtype, who));
  Shape y = x.shape;
  bool have = false;
  switch (a.op) {
    case ViewOp::kReshape: {
      SL_ASSIGN_OR_RETURN(std::vector<int64_t> target, list_input(a, in, "shape", who, &have));
      if (!have) return invalid_for(who, "missing input 'shape'");
      SL_ASSIGN_OR_RETURN(y, reshape_shape(x.shape, target, a.allowzero, who));
      break;
    }
    case ViewOp::kFlatten: {
      SL_ASSIGN_OR_RETURN(y, flatten_shape(x.shape, a.axis, who));
      break;
    }
    case ViewOp::kSqueeze: {
      SL_ASSIGN_OR_RETURN(std::vector<int64_t> axes, list_input(a, in, "axes", who, &have));
      SL_ASSIGN_OR_RETURN(y, squeeze_shape(x.shape, axes, have, who));
      break;
    }
    case ViewOp::kUnsqueeze: {
      SL_ASSIGN_OR_RETURN(std::vector<int64_t> axes, list_input(a, in, "axes", who, &have));
      if (!have) return invalid_for(who, "missing input 'axes'");
      SL_ASSIGN_OR_RETURN(y, unsqueeze_shape(x.shape, axes, who));
      break;
    }
    case ViewOp::kIdentity:
      break;
    case ViewOp::kDropout:
      SL_RETURN_IF_ERROR(check_dropout_inference(in, a.opset, who));
      break;
  }
  std::vector<OutputInfo> out{OutputInfo{x.dtype, y}};
  if (a.mask) out.push_back(OutputInfo{a.opset >= 10 ? DType::kBool : x.dtype, x.shape});
  return out;
}

}  // namespace streamline::ops
