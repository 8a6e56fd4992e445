// Pad (constant / reflect / edge / wrap; negative pads crop), CenterCropPad (opset 18), Tile and
// Expand.
//
// CenterCropPad brings each of `axes` (all, by default) to the size in `shape`, centred: an axis of
// n elements becomes m by dropping (n - m) / 2 at the start (rounded down) and the rest at the end,
// or by adding zeros the same way when m > n. It runs as a constant Pad with those begins.

#include <algorithm>

#include "ops/cpu/data_common.h"
#include "ops/cpu/data_kernels.h"

namespace streamline::ops::cpu {
namespace {

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

// Input coordinate that output-side coordinate i (already shifted by the begin pad) reads, or -1 for
// the constant value.
inline int64_t pad_source(PadMode mode, int64_t i, int64_t n) {
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      return i < 0 ? 0 : n - 1;
    case PadMode::kWrap:
      return ((i % n) + n) % n;
    case PadMode::kReflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);
      int64_t m = ((i % period) + period) % period;
      return m < n ? m : period - m;
    }
  }
  return -1;
}

struct PadState {
  int rank = 0;
  int64_t in_dims[kMaxDataRank] = {};
  int64_t out_dims[kMaxDataRank] = {};
  int64_t begin[kMaxDataRank] = {};
  uint8_t value[8] = {};  // the constant as dtype bytes, when it comes from the attribute
};

// Writes `in` padded (or cropped, for negative begins) as `st` says into `out`; outside the input
// the mode decides, `value` (dtype bytes) for constant padding.
void pad_into(const PadState& st, PadMode mode, const void* value, const Tensor& in, Tensor& out, int threads) {
  const int64_t esz = static_cast<int64_t>(dtype_size(in.dtype()));
  const auto* src = in.data<uint8_t>();
  auto* dst = out.data<uint8_t>();
  if (st.rank == 0) {
    std::memcpy(dst, src, static_cast<size_t>(esz));
    return;
  }
  if (out.numel() == 0) return;
  const int last = st.rank - 1;
  const int64_t n_out = st.out_dims[last], n_in = st.in_dims[last], b = st.begin[last];
  int64_t in_strides[kMaxDataRank];
  in_strides[last] = 1;
  for (int d = last; d > 0; --d) in_strides[d - 1] = in_strides[d] * st.in_dims[d];
  const int64_t rows = out.numel() / n_out;
  const int64_t lo = std::clamp<int64_t>(b, 0, n_out), hi = std::clamp<int64_t>(b + n_in, lo, n_out);
  const bool big = threads > 1 && out.numel() * esz >= kParallelBytes;
#pragma omp parallel for num_threads(omp_threads(threads)) if (big) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = dst + r * n_out * esz;
    int64_t rem = r, off = 0;
    bool constant_row = false;
    for (int d = last - 1; d >= 0; --d) {
      const int64_t o = rem % st.out_dims[d];
      rem /= st.out_dims[d];
      const int64_t i = pad_source(mode, o - st.begin[d], st.in_dims[d]);
      if (i < 0)
        constant_row = true;
      else
        off += i * in_strides[d];
    }
    if (constant_row) {
      fill_pattern(row, value, static_cast<size_t>(esz), n_out);
      continue;
    }
    const uint8_t* srow = src + off * esz;
    if (hi > lo) std::memcpy(row + lo * esz, srow + (lo - b) * esz, static_cast<size_t>((hi - lo) * esz));
    for (int64_t x = 0; x < n_out; ++x) {
      if (x == lo && hi > lo) x = hi;
      if (x >= n_out) break;
      const int64_t i = pad_source(mode, x - b, n_in);
      if (i < 0)
        std::memcpy(row + x * esz, value, static_cast<size_t>(esz));
      else
        std::memcpy(row + x * esz, srow + i * esz, static_cast<size_t>(esz));
    }
  }
}

class PadKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<PadKernel>(a.node);
    const std::string mode = a.node.attr_string("mode", "constant");
    if (mode == "constant")
      k->mode_ = PadMode::kConstant;
    else if (mode == "reflect")
      k->mode_ = PadMode::kReflect;
    else if (mode == "edge")
      k->mode_ = PadMode::kEdge;
    else if (mode == "wrap" && a.node.opset >= 19)
      k->mode_ = PadMode::kWrap;
    else
      return k->invalid("unknown mode '" + mode + "'");
    if (a.node.opset < 11) {
      const char* name = a.node.has_attr("pads") ? "pads" : "paddings";
      if (!a.node.has_attr(name)) return k->invalid("missing attribute 'pads'");
      k->pads_attr_ = a.node.attr_ints(name);
      k->value_attr_ = a.node.attr_float("value", 0.f);
    }
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("missing input 'data'");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, desc_));
    const Shape& s = in[0].shape;
    SL_RETURN_IF_ERROR(check_rank(s.rank()));
    const int64_t rank = static_cast<int64_t>(s.rank());
    std::vector<int64_t> pads = pads_attr_;
    std::vector<int64_t> axes;
    if (opset_ >= 11) {
      if (in.size() < 2 || !in[1].present()) return invalid("missing input 'pads'");
      SL_ASSIGN_OR_RETURN(pads, constant_ints(in[1], "pads", desc_));
      if (in.size() > 2 && in[2].present()) {
        if (in[2].dtype != in[0].dtype) return invalid("'constant_value' dtype differs from 'data'");
        if (in[2].shape.numel() != 1) return invalid("'constant_value' must hold one value");
      }
      if (opset_ >= 18 && in.size() > 3 && in[3].present()) {
        SL_ASSIGN_OR_RETURN(axes, constant_ints(in[3], "axes", desc_));
      }
    }
    if (axes.empty())
      for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    if (pads.size() != 2 * axes.size())
      return invalid("'pads' has " + std::to_string(pads.size()) + " entries, expected " +
                     std::to_string(2 * axes.size()));
    auto st = std::make_shared<PadState>();
    st->rank = static_cast<int>(rank);
    std::vector<int64_t> end(s.rank(), 0);
    std::vector<bool> seen(s.rank(), false);
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t ax = 0;
      if (!normalize_axis(axes[i], rank, &ax)) return invalid("axis " + std::to_string(axes[i]) + " is out of range");
      if (seen[static_cast<size_t>(ax)]) return invalid("axis " + std::to_string(axes[i]) + " is repeated");
      seen[static_cast<size_t>(ax)] = true;
      st->begin[ax] = pads[i];
      end[static_cast<size_t>(ax)] = pads[i + axes.size()];
    }
    Shape out;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t n = s[static_cast<size_t>(d)];
      const int64_t o = n + st->begin[d] + end[static_cast<size_t>(d)];
      if (o < 0) return invalid("pads crop axis " + std::to_string(d) + " of " + s.to_string() + " below zero");
      if (n == 0 && o > 0 && mode_ != PadMode::kConstant) return invalid("cannot pad an empty axis in this mode");
      st->in_dims[d] = n;
      st->out_dims[d] = o;
      out.push_back(o);
    }
    store_scalar(in[0].dtype, value_attr_, st->value);
    ReshapeResult r;
    r.outputs.push_back({in[0].dtype, out, Layout::kPlain});
    r.state = st;
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const void* value = static_cast<const PadState*>(ctx.state)->value;
    if (opset_ >= 11 && ctx.inputs.size() > 2 && ctx.inputs[2].defined()) value = ctx.inputs[2].raw();
    pad_into(*static_cast<const PadState*>(ctx.state), mode_, value, ctx.inputs[0], ctx.outputs[0], ctx.num_threads);
    return ok_status();
  }

 private:
  PadMode mode_ = PadMode::kConstant;
  std::vector<int64_t> pads_attr_;
  float value_attr_ = 0.f;
};

class CenterCropPadKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<CenterCropPadKernel>(a.node);
    k->axes_ = a.node.attr_ints("axes");
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 2 || !in[0].present() || !in[1].present()) return invalid("needs inputs 'input_data' and 'shape'");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, desc_));
    const Shape& s = in[0].shape;
    SL_RETURN_IF_ERROR(check_rank(s.rank()));
    SL_ASSIGN_OR_RETURN(std::vector<int64_t> target, constant_ints(in[1], "shape", desc_));
    const int64_t rank = static_cast<int64_t>(s.rank());
    std::vector<int64_t> axes = axes_;
    if (axes.empty())
      for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    if (target.size() != axes.size())
      return invalid("'shape' has " + std::to_string(target.size()) + " entries for " + std::to_string(axes.size()) +
                     " axes");
    auto st = std::make_shared<PadState>();
    st->rank = static_cast<int>(rank);
    for (int64_t d = 0; d < rank; ++d) st->in_dims[d] = st->out_dims[d] = s[static_cast<size_t>(d)];
    std::vector<bool> seen(s.rank(), false);
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t ax = 0;
      if (!normalize_axis(axes[i], rank, &ax)) return invalid("axis " + std::to_string(axes[i]) + " is out of range");
      if (seen[static_cast<size_t>(ax)]) return invalid("axis " + std::to_string(axes[i]) + " is repeated");
      seen[static_cast<size_t>(ax)] = true;
      if (target[i] < 0) return invalid("'shape' has a negative entry");
      const int64_t n = st->in_dims[ax], m = target[i];
      st->out_dims[ax] = m;
      st->begin[ax] = m >= n ? (m - n) / 2 : -((n - m) / 2);
    }
    Shape out;
    for (int64_t d = 0; d < rank; ++d) out.push_back(st->out_dims[d]);
    ReshapeResult r;
    r.outputs.push_back({in[0].dtype, out, Layout::kPlain});
    r.state = st;
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const auto& st = *static_cast<const PadState*>(ctx.state);
    pad_into(st, PadMode::kConstant, st.value, ctx.inputs[0], ctx.outputs[0], ctx.num_threads);
    return ok_status();
  }

 private:
  std::vector<int64_t> axes_;
};

class TileKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) { return std::unique_ptr<Kernel>(new TileKernel(a.node)); }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 2 || !in[0].present() || !in[1].present()) return invalid("needs inputs 'input' and 'repeats'");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, desc_));
    SL_RETURN_IF_ERROR(check_rank(in[0].shape.rank()));
    SL_ASSIGN_OR_RETURN(std::vector<int64_t> rep, constant_ints(in[1], "repeats", desc_));
    const Shape& s = in[0].shape;
    if (rep.size() != s.rank())
      return invalid("'repeats' has " + std::to_string(rep.size()) + " entries for rank " + std::to_string(s.rank()));
    Shape out;
    for (size_t i = 0; i < s.rank(); ++i) {
      if (rep[i] < 0) return invalid("'repeats' has a negative entry");
      out.push_back(s[i] * rep[i]);
    }
    ReshapeResult r;
    r.outputs.push_back({in[0].dtype, out, Layout::kPlain});
    return r;
  }
  Status run(const RunContext& ctx) const override {
    const Tensor& in = ctx.inputs[0];
    Tensor& out = ctx.outputs[0];
    if (out.numel() == 0) return ok_status();
    const size_t esz = dtype_size(in.dtype());
    if (in.shape().rank() == 0) {
      std::memcpy(out.raw(), in.raw(), esz);
      return ok_status();
    }
    tile(0, in, out, in.data<uint8_t>(), out.data<uint8_t>(), esz, ctx.num_threads);
    return ok_status();
  }

 private:
  // Writes the tile of input dims [d, rank) at dst: copies each input slice once, then replicates the
  // block with large memcpys.
  static void tile(size_t d, const Tensor& in, const Tensor& out, const uint8_t* src, uint8_t* dst, size_t esz,
                   int threads) {
    const Shape& is = in.shape();
    const Shape& os = out.shape();
    const int64_t n = is[d];
    const int64_t reps = os[d] / n;
    int64_t block;  // bytes of the untiled slab of dim d in the output
    if (d + 1 == is.rank()) {
      block = n * static_cast<int64_t>(esz);
      std::memcpy(dst, src, static_cast<size_t>(block));
    } else {
      const int64_t in_step = is.stride(d) * static_cast<int64_t>(esz);
      const int64_t out_step = os.stride(d) * static_cast<int64_t>(esz);
      for (int64_t i = 0; i < n; ++i) tile(d + 1, in, out, src + i * in_step, dst + i * out_step, esz, threads);
      block = n * out_step;
    }
    for (int64_t k = 1; k < reps; ++k) copy_bytes(dst + k * block, dst, static_cast<size_t>(block), threads);
  }
};

class ExpandKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) { return std::unique_ptr<Kernel>(new ExpandKernel(a.node)); }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 2 || !in[0].present() || !in[1].present()) return invalid("needs inputs 'input' and 'shape'");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, desc_));
    SL_ASSIGN_OR_RETURN(std::vector<int64_t> target, constant_ints(in[1], "shape", desc_));
    const Shape& s = in[0].shape;
    Shape out;
    if (!broadcast_shapes(s, Shape(target), &out))
      return invalid("cannot broadcast " + s.to_string() + " to " + Shape(target).to_string());
    SL_RETURN_IF_ERROR(check_rank(out.rank()));
    const size_t lead = out.rank() - s.rank();
    const std::vector<int64_t> in_strides = dense_strides(s.dims());
    std::vector<int64_t> strides(out.rank(), 0);
    for (size_t i = 0; i < s.rank(); ++i) strides[lead + i] = s[i] == 1 ? 0 : in_strides[i];
    ReshapeResult r;
    r.outputs.push_back({in[0].dtype, out, Layout::kPlain});
    r.state = std::make_shared<CopyPlan>(make_copy_plan(dtype_size(in[0].dtype), out.dims(), strides, 0));
    return r;
  }
  Status run(const RunContext& ctx) const override {
    run_copy_plan(*static_cast<const CopyPlan*>(ctx.state), ctx.inputs[0].raw(), ctx.outputs[0].raw(), ctx.num_threads);
    return ok_status();
  }
};

}  // namespace

Status register_pad_ops(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_data_kernel<PadKernel>(reg, "Pad", 2));
  SL_RETURN_IF_ERROR(add_data_kernel<CenterCropPadKernel>(reg, "CenterCropPad", 18));
  SL_RETURN_IF_ERROR(add_data_kernel<TileKernel>(reg, "Tile", 6));
  SL_RETURN_IF_ERROR(add_data_kernel<ExpandKernel>(reg, "Expand", 8));
  return ok_status();
}

}  // namespace streamline::ops::cpu
