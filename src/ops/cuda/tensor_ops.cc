// CUDA data-movement ops (Concat, Slice, Gather; Reshape, Flatten, Squeeze, Unsqueeze, Identity,
// Dropout), Cast, Clip and ReduceSum / ReduceMean / ReduceMax. The device code is in tensor_ops.cu
// (reductions in pool.cu).
//
// Shapes are worked out on the host in reshape() by the shape functions the CPU kernels call too
// (ops/data_shapes.h, ops/op_params.h), so both devices accept the same graphs with the same error
// messages; only run() is the device's. The view ops return inplace = {0} and copy only when the
// planner gave them their own output buffer. Data movement works on bytes, so those ops take every
// dtype; Clip and the reductions take float32 and float16 (float32 arithmetic).

#include <algorithm>
#include <cfloat>

#include "core/cuda/cuda_status.h"
#include "ops/copy_plan.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/launch_tensor.h"
#include "ops/data_shapes.h"
#include "ops/op_params.h"

namespace streamline::ops::cuda {
namespace {

// The ElemType of `t`; Unsupported for dtypes the typed kernels lack.
Result<ElemType> elem_type(DType t, const std::string& who, bool floats_only) {
  if (t == DType::kFloat32) return ElemType::kF32;
  if (t == DType::kFloat16) return ElemType::kF16;
  if (!floats_only && t == DType::kInt32) return ElemType::kI32;
  if (!floats_only && t == DType::kInt64) return ElemType::kI64;
  if (!floats_only && t == DType::kBool) return ElemType::kBool;
  return unsupported(who + ": the CUDA kernel does not take " + dtype_name(t) +
                     (floats_only ? " (float32 or float16 only)" : " (float32, float16, int32, int64, bool only)"));
}

// Elements before `axis` and bytes after it (inclusive of none) of a dense tensor.
void split_at(const Shape& s, size_t axis, size_t esz, int64_t* outer, int64_t* inner_bytes) {
  *outer = 1;
  *inner_bytes = static_cast<int64_t>(esz);
  for (size_t d = 0; d < axis; ++d) *outer *= s[d];
  for (size_t d = axis + 1; d < s.rank(); ++d) *inner_bytes *= s[d];
}

Status copy_device(const Tensor& from, const Tensor& to, cudaStream_t stream, const std::string& who) {
  if (to.raw() == from.raw() || from.nbytes() == 0) return ok_status();
  SL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(to.raw(), from.raw(), from.nbytes(), cudaMemcpyDeviceToDevice, stream), who);
  return ok_status();
}

Status check_plain(std::span<const TensorInfo> in, const std::string& who) {
  for (const TensorInfo& t : in)
    if (t.present() && t.layout != Layout::kPlain)
      return unsupported(who + ": the CUDA kernel takes plain layouts only");
  return ok_status();
}

// Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout: output 0 is input 0's bytes.
class ViewKernel final : public Kernel {
 public:
  ViewKernel(std::string who, ViewAttrs attrs) : who_(std::move(who)), attrs_(std::move(attrs)) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    SL_RETURN_IF_ERROR(check_plain(in, who_));
    ReshapeResult rr;
    SL_ASSIGN_OR_RETURN(rr.outputs, view_outputs(attrs_, in, who_));
    // Dropout's mask: all true, filled with a memset, which suits one-byte bool only.
    for (size_t k = 1; k < rr.outputs.size(); ++k)
      if (rr.outputs[k].dtype != DType::kBool)
        return unsupported(who_ + ": the CUDA kernel writes a bool mask only (opset 10+), not " +
                           dtype_name(rr.outputs[k].dtype));
    rr.inplace.assign(rr.outputs.size(), -1);
    rr.inplace[0] = 0;  // run() then copies nothing
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    SL_RETURN_IF_ERROR(copy_device(ctx.inputs[0], ctx.outputs[0], stream_of(ctx), who_));
    for (size_t k = 1; k < ctx.outputs.size(); ++k) {
      const Tensor& mask = ctx.outputs[k];
      if (!mask.defined() || mask.numel() == 0) continue;
      SL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(mask.raw(), 1, mask.nbytes(), stream_of(ctx)), who_);
    }
    return ok_status();
  }

 private:
  std::string who_;
  ViewAttrs attrs_;
};

// Concat along any axis: one row copy per input into its column range of the output.
class ConcatKernel final : public Kernel {
 public:
  ConcatKernel(std::string who, int64_t axis) : who_(std::move(who)), axis_(axis) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    SL_RETURN_IF_ERROR(check_plain(in, who_));
    SL_ASSIGN_OR_RETURN(ConcatShapes c, concat_shape(in, axis_, who_));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, c.y});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& y = ctx.outputs[0];
    int64_t axis = 0;  // reshape() checked the axis against this rank
    if (!normalize_axis(axis_, static_cast<int64_t>(y.shape().rank()), &axis))
      return internal_error(who_ + ": axis out of range at run");
    int64_t outer = 0, inner_bytes = 0;
    split_at(y.shape(), static_cast<size_t>(axis), dtype_size(y.dtype()), &outer, &inner_bytes);
    const int64_t whole = y.shape()[static_cast<size_t>(axis)] * inner_bytes;
    int64_t offset = 0;
    for (const Tensor& x : ctx.inputs) {
      const int64_t chunk = x.shape()[static_cast<size_t>(axis)] * inner_bytes;
      SL_CUDA_RETURN_IF_ERROR(launch_copy_rows(x.raw(), chunk, static_cast<uint8_t*>(y.raw()) + offset, whole, chunk,
                                               outer, stream_of(ctx)),
                              who_);
      offset += chunk;
    }
    return ok_status();
  }

 private:
  std::string who_;
  int64_t axis_;
};

// Gather along any axis; indices int32 or int64 (a run-time input or a constant, both on the device).
class GatherKernel final : public Kernel {
 public:
  GatherKernel(std::string who, int64_t axis) : who_(std::move(who)), axis_(axis) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    SL_RETURN_IF_ERROR(check_plain(in, who_));
    SL_ASSIGN_OR_RETURN(GatherShapes g, gather_shape(in, axis_, who_));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, g.y});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& data = ctx.inputs[0];
    const Tensor& idx = ctx.inputs[1];
    int64_t axis = 0;  // reshape() checked the axis against this rank
    if (!normalize_axis(axis_, static_cast<int64_t>(data.shape().rank()), &axis))
      return internal_error(who_ + ": axis out of range at run");
    int64_t outer = 0, inner_bytes = 0;
    split_at(data.shape(), static_cast<size_t>(axis), dtype_size(data.dtype()), &outer, &inner_bytes);
    SL_CUDA_RETURN_IF_ERROR(
        launch_gather(data.raw(), idx.raw(), idx.dtype() == DType::kInt64, ctx.outputs[0].raw(), outer,
                      data.shape()[static_cast<size_t>(axis)], idx.numel(), inner_bytes, stream_of(ctx)),
        who_);
    return ok_status();
  }

 private:
  std::string who_;
  int64_t axis_;
};

// Slice: starts/ends/axes/steps from attributes (opset 1-9) or constant inputs (10+), read by
// slice_geometry() (ops/op_params.h) as on the CPU; the output is a strided gather of the input
// (negative steps walk backwards).
class SliceKernel final : public Kernel {
 public:
  explicit SliceKernel(const graph::Node& n) : who_(n.describe()), opset_(n.opset), attrs_(read_slice_attrs(n)) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid_argument(who_ + ": missing input 'data'");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, who_));
    if (in[0].layout != Layout::kPlain) return unsupported(who_ + ": the CUDA kernel takes plain layouts only");
    const Shape& s = in[0].shape;
    if (s.rank() > static_cast<size_t>(kMaxDataRank))
      return unsupported(who_ + ": rank " + std::to_string(s.rank()) + " exceeds the supported maximum of " +
                         std::to_string(kMaxDataRank));
    SL_ASSIGN_OR_RETURN(SliceGeometry g, slice_geometry(attrs_, opset_, in, who_));
    // The strided gather, with size-1 dims dropped and contiguous dims merged.
    const CopyPlan plan = make_copy_plan(dtype_size(in[0].dtype), g.out.dims(), g.strides, g.offset);
    if (plan.rank > kMaxCopyRank)
      return unsupported(who_ + ": the CUDA kernel slices up to " + std::to_string(kMaxCopyRank) +
                         " non-contiguous dims, this slice has " + std::to_string(plan.rank));
    auto dims = std::make_shared<StridedDims>();
    dims->rank = plan.rank;
    dims->offset = plan.offset;
    for (int k = 0; k < plan.rank; ++k) {
      dims->out[k] = plan.dims[k];
      dims->in_stride[k] = plan.strides[k];
    }
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, g.out});
    rr.state = std::move(dims);
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const auto* d = static_cast<const StridedDims*>(ctx.state);
    if (d == nullptr) return internal_error(who_ + ": run without reshape state");
    const Tensor& y = ctx.outputs[0];
    SL_CUDA_RETURN_IF_ERROR(launch_strided_gather(ctx.inputs[0].raw(), y.raw(), y.numel(),
                                                  static_cast<int32_t>(dtype_size(y.dtype())), *d, stream_of(ctx)),
                            who_);
    return ok_status();
  }

 private:
  std::string who_;
  int opset_ = 0;
  SliceAttrs attrs_;
};

// Cast between float32, float16, int32, int64 and bool (the rules are in launch_tensor.h).
class CastKernel final : public Kernel {
 public:
  CastKernel(std::string who, DType to) : who_(std::move(who)), to_(to) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 1 || !in[0].present()) return invalid_argument(who_ + ": expected 1 input");
    SL_RETURN_IF_ERROR(elem_type(in[0].dtype, who_, false).status());
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{to_, in[0].shape});
    rr.inplace = {in[0].dtype == to_ ? 0 : -1};
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Tensor& y = ctx.outputs[0];
    if (x.dtype() == y.dtype()) return copy_device(x, y, stream_of(ctx), who_);
    SL_ASSIGN_OR_RETURN(ElemType from, elem_type(x.dtype(), who_, false));
    SL_ASSIGN_OR_RETURN(ElemType to, elem_type(y.dtype(), who_, false));
    SL_CUDA_RETURN_IF_ERROR(launch_cast(from, to, x.raw(), y.raw(), x.numel(), stream_of(ctx)), who_);
    return ok_status();
  }

 private:
  std::string who_;
  DType to_;
};

Result<std::unique_ptr<Kernel>> make_cast(const KernelCreateArgs& args) {
  const graph::Node& n = args.node;
  if (!n.has_attr("to")) return invalid_argument(n.describe() + ": missing attribute 'to'");
  if (n.attr_int("saturate", 1) == 0)
    return unsupported(n.describe() + ": saturate=0 (float8 targets) is not supported");
  const auto to = static_cast<DType>(n.attr_int("to", 0));
  SL_RETURN_IF_ERROR(elem_type(to, n.describe(), false).status());
  return std::unique_ptr<Kernel>(std::make_unique<CastKernel>(n.describe(), to));
}

// Clip: bounds from the min/max attributes before opset 11; from optional scalar inputs 1 and 2
// after, which the device kernel reads itself (so they need not be constants).
class ClipKernel final : public Kernel {
 public:
  explicit ClipKernel(const graph::Node& n)
      : who_(n.describe()),
        from_inputs_(n.opset >= 11),
        lo_(n.opset >= 11 ? -FLT_MAX : n.attr_float("min", -FLT_MAX)),
        hi_(n.opset >= 11 ? FLT_MAX : n.attr_float("max", FLT_MAX)) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present() || in.size() > 3) return invalid_argument(who_ + ": expected 1 to 3 inputs");
    const DType dt = in[0].dtype;
    SL_RETURN_IF_ERROR(elem_type(dt, who_, true).status());
    for (size_t k = 1; k < in.size(); ++k) {
      if (!in[k].present()) continue;
      if (in[k].dtype != dt)
        return invalid_argument(who_ + ": bound dtype " + dtype_name(in[k].dtype) + " differs from input dtype " +
                                dtype_name(dt));
      if (in[k].shape.numel() != 1)
        return invalid_argument(who_ + ": bounds must be scalars, got shape " + in[k].shape.to_string());
    }
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{dt, in[0].shape});
    rr.inplace = {0};
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    SL_ASSIGN_OR_RETURN(ElemType t, elem_type(x.dtype(), who_, true));
    auto bound = [&](size_t k) -> const void* {
      return from_inputs_ && ctx.inputs.size() > k && ctx.inputs[k].defined() ? ctx.inputs[k].raw() : nullptr;
    };
    SL_CUDA_RETURN_IF_ERROR(
        launch_clip(t, x.raw(), ctx.outputs[0].raw(), x.numel(), lo_, hi_, bound(1), bound(2), stream_of(ctx)), who_);
    return ok_status();
  }

 private:
  std::string who_;
  bool from_inputs_;
  float lo_, hi_;
};

// ReduceSum / ReduceMean / ReduceMax: axes by attribute (ReduceSum before opset 13, the others
// before 18) or by a constant input; keepdims; noop_with_empty_axes.
class ReduceKernel final : public Kernel {
 public:
  ReduceKernel(const graph::Node& n, ReduceOp op) : who_(n.describe()), op_(op), attrs_(read_reduce_attrs(n)) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid_argument(who_ + ": missing input");
    SL_RETURN_IF_ERROR(elem_type(in[0].dtype, who_, true).status());
    if (in[0].layout != Layout::kPlain) return unsupported(who_ + ": the CUDA kernel takes plain layouts only");
    SL_ASSIGN_OR_RETURN(ReduceAxes r, reduce_axes(attrs_, in, who_));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, r.y});
    // No state for noop_with_empty_axes without axes: the output is the input.
    if (!r.identity) {
      SL_ASSIGN_OR_RETURN(ReduceDims dims, reduce_dims(in[0].shape, r.reduced));
      rr.state = std::make_shared<ReduceDims>(dims);
    }
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const auto* dims = static_cast<const ReduceDims*>(ctx.state);
    const Tensor& x = ctx.inputs[0];
    if (dims == nullptr) return copy_device(x, ctx.outputs[0], stream_of(ctx), who_);
    SL_ASSIGN_OR_RETURN(ElemType t, elem_type(x.dtype(), who_, true));
    SL_CUDA_RETURN_IF_ERROR(launch_reduce(op_, t, x.raw(), ctx.outputs[0].raw(), *dims, stream_of(ctx)), who_);
    return ok_status();
  }

 private:
  // Kept and reduced dims of `s`: size-1 dims dropped, neighbours of the same kind merged.
  Result<ReduceDims> reduce_dims(const Shape& s, const std::vector<bool>& reduced) const {
    ReduceDims d;
    d.out_numel = 1;
    d.red_numel = 1;
    int last = -1;  // kind of the previous dim kept in the lists: 0 kept, 1 reduced
    for (size_t i = 0; i < s.rank(); ++i) {
      (reduced[i] ? d.red_numel : d.out_numel) *= s[i];
      if (s[i] == 1) continue;
      const int kind = reduced[i] ? 1 : 0;
      int32_t& r = kind ? d.red_rank : d.kept_rank;
      int64_t* dims = kind ? d.red : d.kept;
      int64_t* strides = kind ? d.red_stride : d.kept_stride;
      if (kind == last) {
        dims[r - 1] *= s[i];
      } else {
        if (r == kMaxCopyRank)
          return unsupported(who_ + ": the CUDA kernel reduces up to " + std::to_string(kMaxCopyRank) +
                             " alternating dim groups, " + s.to_string() + " has more");
        dims[r++] = s[i];
      }
      strides[r - 1] = s.stride(i);
      last = kind;
    }
    d.inner_reduced = last == 1;
    return d;
  }

  std::string who_;
  ReduceOp op_;
  ReduceAttrs attrs_;
};

constexpr DType kFloatTypes[] = {DType::kFloat32, DType::kFloat16};

}  // namespace

Status register_tensor_ops(KernelRegistry& reg) {
  // Data movement: any dtype (kUndefined); Gather is keyed by its data input (input 0).
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"}) {
    SL_RETURN_IF_ERROR(reg.add(cuda_def(
        op, 1,
        [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
          SL_ASSIGN_OR_RETURN(ViewAttrs attrs, read_view_attrs(a.node));
          return std::unique_ptr<Kernel>(std::make_unique<ViewKernel>(a.node.describe(), std::move(attrs)));
        },
        "", INT_MAX, DType::kUndefined)));
  }
  SL_RETURN_IF_ERROR(reg.add(cuda_def(
      "Concat", 1,
      [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
        SL_ASSIGN_OR_RETURN(const int64_t axis, read_concat_axis(a.node));
        return std::unique_ptr<Kernel>(std::make_unique<ConcatKernel>(a.node.describe(), axis));
      },
      "", INT_MAX, DType::kUndefined)));
  SL_RETURN_IF_ERROR(reg.add(cuda_def(
      "Gather", 1,
      [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
        return std::unique_ptr<Kernel>(std::make_unique<GatherKernel>(a.node.describe(), a.node.attr_int("axis", 0)));
      },
      "", INT_MAX, DType::kUndefined)));
  SL_RETURN_IF_ERROR(reg.add(cuda_def(
      "Slice", 1,
      [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
        if (a.node.opset < 10 && (!a.node.has_attr("starts") || !a.node.has_attr("ends")))
          return invalid_argument(a.node.describe() + ": missing 'starts' or 'ends'");
        return std::unique_ptr<Kernel>(std::make_unique<SliceKernel>(a.node));
      },
      "", INT_MAX, DType::kUndefined)));
  // Cast is keyed by its input's dtype.
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kInt32, DType::kInt64, DType::kBool})
    SL_RETURN_IF_ERROR(reg.add(cuda_def("Cast", 6, make_cast, "", INT_MAX, t)));
  const std::pair<const char*, ReduceOp> reduces[] = {
      {"ReduceSum", ReduceOp::kSum}, {"ReduceMean", ReduceOp::kMean}, {"ReduceMax", ReduceOp::kMax}};
  for (DType t : kFloatTypes) {
    SL_RETURN_IF_ERROR(reg.add(cuda_def(
        "Clip", 6,
        [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
          return std::unique_ptr<Kernel>(std::make_unique<ClipKernel>(a.node));
        },
        "", INT_MAX, t)));
    for (const auto& [op, kind] : reduces)
      SL_RETURN_IF_ERROR(reg.add(cuda_def(
          op, 1,
          [kind](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
            return std::unique_ptr<Kernel>(std::make_unique<ReduceKernel>(a.node, kind));
          },
          "", INT_MAX, t)));
  }
  return ok_status();
}

}  // namespace streamline::ops::cuda
