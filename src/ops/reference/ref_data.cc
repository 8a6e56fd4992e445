// Reference data-movement kernels: Concat, Transpose, Pad, Slice, Gather (Resize in ref_resize.cc).
// Each visits every output element, turns its flat index into an N-d index, maps that to the input
// index the ONNX spec names, and copies one element. No fast paths, no threads.

#include <algorithm>
#include <cstring>

#include "ops/reference/ref_data_util.h"

namespace streamline::ops::reference {

std::vector<int64_t> unravel(int64_t flat, const Shape& s) {
  std::vector<int64_t> idx(s.rank(), 0);
  for (size_t d = s.rank(); d-- > 0;) {
    idx[d] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t flat = 0;
  for (size_t d = 0; d < s.rank(); ++d) flat = flat * s[d] + idx[d];
  return flat;
}

void copy_element(const Tensor& src, int64_t si, Tensor& dst, int64_t di) {
  const size_t esz = dtype_size(src.dtype());
  std::memcpy(static_cast<uint8_t*>(dst.raw()) + static_cast<size_t>(di) * esz,
              static_cast<const uint8_t*>(src.raw()) + static_cast<size_t>(si) * esz, esz);
}

Result<std::vector<int64_t>> ref_ints(const TensorInfo& info, const char* what) {
  if (!info.value) return unsupported(std::string("reference kernel needs a constant input '") + what + "'");
  std::vector<int64_t> v;
  for (int64_t i = 0; i < info.value->numel(); ++i) v.push_back(element_as_int64(*info.value, i));
  return v;
}

namespace {

Status fail(const graph::Node& n, const std::string& m) {
  return invalid_argument(n.describe() + ": " + m);
}

class ConcatRef final : public Kernel {
 public:
  explicit ConcatRef(const graph::Node& n) : node_(n), axis_(n.attr_int("axis", 1)) {}
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const int64_t r = static_cast<int64_t>(in[0].shape.rank());
    const int64_t axis = axis_ < 0 ? axis_ + r : axis_;
    if (r == 0 || axis < 0 || axis >= r) return fail(node_, "axis out of range");
    Shape out = in[0].shape;
    out[static_cast<size_t>(axis)] = 0;
    for (const auto& t : in) {
      if (t.shape.rank() != in[0].shape.rank()) return fail(node_, "rank mismatch");
      for (int64_t d = 0; d < r; ++d)
        if (d != axis && t.shape[static_cast<size_t>(d)] != in[0].shape[static_cast<size_t>(d)])
          return fail(node_, "shape mismatch");
      out[static_cast<size_t>(axis)] += t.shape[static_cast<size_t>(axis)];
    }
    ReshapeResult res;
    res.outputs.push_back({in[0].dtype, out, Layout::kPlain});
    return res;
  }
  Status run(const RunContext& ctx) const override {
    Tensor& out = ctx.outputs[0];
    const int64_t r = static_cast<int64_t>(out.shape().rank());
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + r : axis_);
    for (int64_t i = 0; i < out.numel(); ++i) {
      std::vector<int64_t> idx = unravel(i, out.shape());
      size_t part = 0;
      while (idx[axis] >= ctx.inputs[part].shape()[axis]) idx[axis] -= ctx.inputs[part++].shape()[axis];
      copy_element(ctx.inputs[part], ravel(idx, ctx.inputs[part].shape()), out, i);
    }
    return ok_status();
  }

 private:
  graph::Node node_;
  int64_t axis_;
};

class TransposeRef final : public Kernel {
 public:
  explicit TransposeRef(const graph::Node& n) : node_(n) {}
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const std::vector<int64_t> perm = perm_for(in[0].shape.rank());
    if (perm.size() != in[0].shape.rank()) return fail(node_, "perm size mismatch");
    Shape out;
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(in[0].shape.rank())) return fail(node_, "bad perm");
      out.push_back(in[0].shape[static_cast<size_t>(p)]);
    }
    ReshapeResult res;
    res.outputs.push_back({in[0].dtype, out, Layout::kPlain});
    return res;
  }
  Status run(const RunContext& ctx) const override {
    const Tensor& in = ctx.inputs[0];
    Tensor& out = ctx.outputs[0];
    const std::vector<int64_t> perm = perm_for(in.shape().rank());
    for (int64_t i = 0; i < out.numel(); ++i) {
      const std::vector<int64_t> oidx = unravel(i, out.shape());
      std::vector<int64_t> iidx(oidx.size());
      for (size_t k = 0; k < perm.size(); ++k) iidx[static_cast<size_t>(perm[k])] = oidx[k];
      copy_element(in, ravel(iidx, in.shape()), out, i);
    }
    return ok_status();
  }

 private:
  std::vector<int64_t> perm_for(size_t rank) const {
    if (node_.has_attr("perm")) return node_.attr_ints("perm");
    std::vector<int64_t> p;
    for (size_t i = rank; i-- > 0;) p.push_back(static_cast<int64_t>(i));
    return p;
  }
  graph::Node node_;
};

struct SliceParams {
  std::vector<int64_t> start, step;
};

class SliceRef final : public Kernel {
 public:
  explicit SliceRef(const graph::Node& n) : node_(n) {}
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const Shape& s = in[0].shape;
    std::vector<int64_t> starts, ends, axes, steps;
    if (node_.opset < 10) {
      starts = node_.attr_ints("starts");
      ends = node_.attr_ints("ends");
      axes = node_.attr_ints("axes");
    } else {
      SL_ASSIGN_OR_RETURN(starts, ref_ints(in[1], "starts"));
      SL_ASSIGN_OR_RETURN(ends, ref_ints(in[2], "ends"));
      if (in.size() > 3 && in[3].present()) {
        SL_ASSIGN_OR_RETURN(axes, ref_ints(in[3], "axes"));
      }
      if (in.size() > 4 && in[4].present()) {
        SL_ASSIGN_OR_RETURN(steps, ref_ints(in[4], "steps"));
      }
    }
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    auto p = std::make_shared<SliceParams>();
    p->start.assign(s.rank(), 0);
    p->step.assign(s.rank(), 1);
    Shape out = s;
    for (size_t i = 0; i < starts.size(); ++i) {
      const int64_t r = static_cast<int64_t>(s.rank());
      const size_t ax = static_cast<size_t>(axes[i] < 0 ? axes[i] + r : axes[i]);
      const int64_t dim = s[ax];
      const int64_t step = steps[i];
      if (step == 0) return fail(node_, "zero step");
      int64_t b = starts[i] < 0 ? starts[i] + dim : starts[i];
      int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
      // Count the indices b, b + step, ... that lie strictly before e and inside [0, dim).
      if (step > 0) {
        b = std::max<int64_t>(0, std::min(b, dim));
        e = std::max<int64_t>(0, std::min(e, dim));
      } else {
        b = std::max<int64_t>(0, std::min(b, dim - 1));
        e = std::max<int64_t>(-1, std::min(e, dim - 1));
      }
      int64_t n = 0;
      for (int64_t x = b; step > 0 ? x < e : x > e; x += step) {
        if (x < 0 || x >= dim) break;
        ++n;
      }
      p->start[ax] = b;
      p->step[ax] = step;
      out[ax] = n;
    }
    ReshapeResult res;
    res.outputs.push_back({in[0].dtype, out, Layout::kPlain});
    res.state = p;
    return res;
  }
  Status run(const RunContext& ctx) const override {
    const auto& p = *static_cast<const SliceParams*>(ctx.state);
    const Tensor& in = ctx.inputs[0];
    Tensor& out = ctx.outputs[0];
    for (int64_t i = 0; i < out.numel(); ++i) {
      std::vector<int64_t> idx = unravel(i, out.shape());
      for (size_t d = 0; d < idx.size(); ++d) idx[d] = p.start[d] + idx[d] * p.step[d];
      copy_element(in, ravel(idx, in.shape()), out, i);
    }
    return ok_status();
  }

 private:
  graph::Node node_;
};

class GatherRef final : public Kernel {
 public:
  explicit GatherRef(const graph::Node& n) : node_(n), axis_(n.attr_int("axis", 0)) {}
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const Shape& s = in[0].shape;
    const int64_t r = static_cast<int64_t>(s.rank());
    const int64_t axis = axis_ < 0 ? axis_ + r : axis_;
    if (axis < 0 || axis >= r) return fail(node_, "axis out of range");
    Shape out;
    for (int64_t d = 0; d < r; ++d) {
      if (d == axis)
        for (int64_t k : in[1].shape) out.push_back(k);
      else
        out.push_back(s[static_cast<size_t>(d)]);
    }
    ReshapeResult res;
    res.outputs.push_back({in[0].dtype, out, Layout::kPlain});
    return res;
  }
  Status run(const RunContext& ctx) const override {
    const Tensor& data = ctx.inputs[0];
    const Tensor& indices = ctx.inputs[1];
    Tensor& out = ctx.outputs[0];
    const size_t r = data.shape().rank();
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + static_cast<int64_t>(r) : axis_);
    const size_t q = indices.shape().rank();
    for (int64_t i = 0; i < out.numel(); ++i) {
      const std::vector<int64_t> oidx = unravel(i, out.shape());
      std::vector<int64_t> jidx(oidx.begin() + static_cast<ptrdiff_t>(axis),
                                oidx.begin() + static_cast<ptrdiff_t>(axis + q));
      int64_t v = element_as_int64(indices, ravel(jidx, indices.shape()));
      const int64_t dim = data.shape()[axis];
      if (v < -dim || v >= dim) return invalid_argument("index " + std::to_string(v) + " out of range");
      if (v < 0) v += dim;
      std::vector<int64_t> didx;
      for (size_t d = 0; d < axis; ++d) didx.push_back(oidx[d]);
      didx.push_back(v);
      for (size_t d = axis + q; d < oidx.size(); ++d) didx.push_back(oidx[d]);
      copy_element(data, ravel(didx, data.shape()), out, i);
    }
    return ok_status();
  }

 private:
  graph::Node node_;
  int64_t axis_;
};

struct PadParams {
  std::vector<int64_t> begin;
  std::string mode;
  double value = 0.0;
};

class PadRef final : public Kernel {
 public:
  explicit PadRef(const graph::Node& n) : node_(n) {}
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const Shape& s = in[0].shape;
    const size_t r = s.rank();
    std::vector<int64_t> pads;
    std::vector<int64_t> axes;
    auto p = std::make_shared<PadParams>();
    p->mode = node_.attr_string("mode", "constant");
    if (node_.opset < 11) {
      pads = node_.attr_ints("pads");
      p->value = node_.attr_float("value", 0.f);
    } else {
      SL_ASSIGN_OR_RETURN(pads, ref_ints(in[1], "pads"));
      if (node_.opset >= 18 && in.size() > 3 && in[3].present()) {
        SL_ASSIGN_OR_RETURN(axes, ref_ints(in[3], "axes"));
      }
    }
    if (axes.empty())
      for (size_t i = 0; i < r; ++i) axes.push_back(static_cast<int64_t>(i));
    if (pads.size() != 2 * axes.size()) return fail(node_, "pads size mismatch");
    p->begin.assign(r, 0);
    Shape out = s;
    for (size_t i = 0; i < axes.size(); ++i) {
      const size_t ax = static_cast<size_t>(axes[i] < 0 ? axes[i] + static_cast<int64_t>(r) : axes[i]);
      p->begin[ax] = pads[i];
      out[ax] = s[ax] + pads[i] + pads[i + axes.size()];
      if (out[ax] < 0) return fail(node_, "negative output dim");
    }
    ReshapeResult res;
    res.outputs.push_back({in[0].dtype, out, Layout::kPlain});
    res.state = p;
    return res;
  }
  Status run(const RunContext& ctx) const override {
    const auto& p = *static_cast<const PadParams*>(ctx.state);
    const Tensor& in = ctx.inputs[0];
    Tensor& out = ctx.outputs[0];
    Tensor value = Tensor::empty(in.dtype(), Shape{});
    if (node_.opset >= 11 && ctx.inputs.size() > 2 && ctx.inputs[2].defined()) {
      copy_element(ctx.inputs[2], 0, value, 0);
    } else {
      // Convert through the element type's own rules: integers truncate, bool is v != 0.
      const double d = p.value;
      switch (in.dtype()) {
        case DType::kFloat32:
          *value.data<float>() = static_cast<float>(d);
          break;
        case DType::kInt64:
          *value.data<int64_t>() = static_cast<int64_t>(d);
          break;
        case DType::kInt32:
          *value.data<int32_t>() = static_cast<int32_t>(d);
          break;
        case DType::kUInt8:
          *value.data<uint8_t>() = static_cast<uint8_t>(d);
          break;
        case DType::kInt8:
          *value.data<int8_t>() = static_cast<int8_t>(d);
          break;
        case DType::kFloat64:
          *value.data<double>() = d;
          break;
        default:
          break;
      }
    }
    for (int64_t i = 0; i < out.numel(); ++i) {
      std::vector<int64_t> idx = unravel(i, out.shape());
      bool use_value = false;
      for (size_t d = 0; d < idx.size(); ++d) {
        const int64_t n = in.shape()[d];
        int64_t x = idx[d] - p.begin[d];
        if (x >= 0 && x < n) {
          idx[d] = x;
          continue;
        }
        if (p.mode == "constant") {
          use_value = true;
        } else if (p.mode == "edge") {
          x = x < 0 ? 0 : n - 1;
        } else if (p.mode == "wrap") {
          while (x < 0) x += n;
          while (x >= n) x -= n;
        } else if (n == 1) {
          x = 0;
        } else {  // reflect, mirroring at the first and last element as often as needed
          while (x < 0 || x >= n) x = x < 0 ? -x : 2 * (n - 1) - x;
        }
        idx[d] = x;
      }
      if (use_value)
        copy_element(value, 0, out, i);
      else
        copy_element(in, ravel(idx, in.shape()), out, i);
    }
    return ok_status();
  }

 private:
  graph::Node node_;
};

template <typename K>
Status add_ref(KernelRegistry& reg, const char* op, int since) {
  KernelDef def;
  def.op = op;
  def.since_version = since;
  def.provider = "reference";
  def.create = [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(new K(a.node));
  };
  return reg.add(std::move(def));
}

}  // namespace

Status register_data(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_ref<ConcatRef>(reg, "Concat", 1));
  SL_RETURN_IF_ERROR(add_ref<TransposeRef>(reg, "Transpose", 1));
  SL_RETURN_IF_ERROR(add_ref<SliceRef>(reg, "Slice", 1));
  SL_RETURN_IF_ERROR(add_ref<GatherRef>(reg, "Gather", 1));
  SL_RETURN_IF_ERROR(add_ref<PadRef>(reg, "Pad", 2));
  return register_resize(reg);
}

}  // namespace streamline::ops::reference
