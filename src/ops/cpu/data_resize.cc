// Resize (opset 10 onwards) and Upsample (opsets 7-9).
//
// reshape() turns the attributes and the constant scales/sizes/roi into one table per axis: for each
// output coordinate, the input indices it reads ("taps": 1 for nearest, 2 for linear, 4 for cubic,
// more with antialias; data_resize_table.h) and their weights. An axis whose every output reads a single input with
// weight 1 collapses to one tap, so bilinear on NCHW costs two taps on H and two on W and nothing on N and C. run()
// walks output rows: nearest moves bytes of any dtype; linear and cubic accumulate float32.
//
// Semantics follow the ONNX spec and its reference implementation: coordinate modes half_pixel,
// half_pixel_symmetric, pytorch_half_pixel, align_corners (with the float length scale * in when
// scales are given, as the reference does), asymmetric, tf_half_pixel_for_nn, tf_crop_and_resize
// (extrapolation_value outside the roi); samples outside the input repeat the edge, or are dropped and
// the weights renormalised with exclude_outside. Resize-10 and Upsample use asymmetric coordinates with
// floor rounding for nearest, as the ONNX version converter maps them.

#include <algorithm>
#include <cmath>

#include "ops/cpu/data_common.h"
#include "ops/cpu/data_kernels.h"
#include "ops/cpu/data_resize_table.h"

namespace streamline::ops::cpu {
namespace {

// Most input rows one output row may blend (the product of the outer axes' taps).
constexpr int64_t kMaxCombos = 256;

struct ResizePlan {
  int rank = 0;
  Interp mode = Interp::kNearest;
  size_t esz = 0;
  std::vector<int64_t> in_dims, out_dims, in_strides;
  std::vector<AxisTable> axes;
  uint8_t extrap[8] = {};  // extrapolation_value as dtype bytes
  float extrap_f = 0.f;
};

template <typename T>
void gather_elems(const uint8_t* src, const int32_t* idx, int64_t n, uint8_t* dst) {
  const T* s = reinterpret_cast<const T*>(src);
  T* d = reinterpret_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = s[idx[i]];
}

class ResizeKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;

  // `upsample`: the Upsample op (opsets 7-9).
  static KernelPtr create(const KernelCreateArgs& a, bool upsample) {
    auto k = std::make_unique<ResizeKernel>(a.node);
    const graph::Node& n = a.node;
    k->upsample_ = upsample;
    k->legacy_ = upsample || n.opset < 11;
    ResizeAttrs& at = k->attrs_;
    const std::string mode = n.attr_string("mode", "nearest");
    if (mode == "nearest")
      at.mode = Interp::kNearest;
    else if (mode == "linear" || (upsample && mode == "bilinear"))
      at.mode = Interp::kLinear;
    else if (mode == "cubic" && !k->legacy_)
      at.mode = Interp::kCubic;
    else
      return k->invalid("unknown mode '" + mode + "'");
    if (k->legacy_) {
      at.coord = Coord::kAsymmetric;
      at.round = Round::kFloor;
    } else {
      const std::string c = n.attr_string("coordinate_transformation_mode", "half_pixel");
      if (c == "half_pixel")
        at.coord = Coord::kHalfPixel;
      else if (c == "half_pixel_symmetric" && n.opset >= 19)
        at.coord = Coord::kHalfPixelSymmetric;
      else if (c == "pytorch_half_pixel")
        at.coord = Coord::kPytorchHalfPixel;
      else if (c == "align_corners")
        at.coord = Coord::kAlignCorners;
      else if (c == "asymmetric")
        at.coord = Coord::kAsymmetric;
      else if (c == "tf_half_pixel_for_nn")
        at.coord = Coord::kTfHalfPixelForNn;
      else if (c == "tf_crop_and_resize")
        at.coord = Coord::kTfCropAndResize;
      else
        return k->invalid("unknown coordinate_transformation_mode '" + c + "'");
      const std::string r = n.attr_string("nearest_mode", "round_prefer_floor");
      if (r == "round_prefer_floor")
        at.round = Round::kPreferFloor;
      else if (r == "round_prefer_ceil")
        at.round = Round::kPreferCeil;
      else if (r == "floor")
        at.round = Round::kFloor;
      else if (r == "ceil")
        at.round = Round::kCeil;
      else
        return k->invalid("unknown nearest_mode '" + r + "'");
      at.cubic_a = n.attr_float("cubic_coeff_a", -0.75f);
      at.exclude_outside = n.attr_int("exclude_outside", 0) != 0;
      at.extrapolation = n.attr_float("extrapolation_value", 0.f);
      if (n.opset >= 18) {
        at.antialias = n.attr_int("antialias", 0) != 0;
        at.axes = n.attr_ints("axes");
        const std::string p = n.attr_string("keep_aspect_ratio_policy", "stretch");
        if (p == "stretch")
          at.policy = AspectPolicy::kStretch;
        else if (p == "not_larger")
          at.policy = AspectPolicy::kNotLarger;
        else if (p == "not_smaller")
          at.policy = AspectPolicy::kNotSmaller;
        else
          return k->invalid("unknown keep_aspect_ratio_policy '" + p + "'");
      }
    }
    if (upsample && n.opset < 9) {
      if (!n.has_attr("scales")) return k->invalid("missing attribute 'scales'");
      const std::vector<float> s = n.attr_floats("scales");
      k->scales_attr_.assign(s.begin(), s.end());
    }
    const DType t = input_dtype(a, 0);
    if (at.mode != Interp::kNearest && t != DType::kFloat32 && t != DType::kUndefined)
      return k->unsupported_error(std::string("linear and cubic modes need float32 input, got ") + dtype_name(t));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }

  // Nearest resizing of the spatial axes of a rank-4 channels-last or blocked tensor runs in that
  // layout: a pixel (channels-last) or a pixel of one channel block (blocked) moves as one element,
  // so an upsampling in a feature pyramid needs no conversion either side.
  bool accepts(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return false;
    if (in[0].layout == Layout::kPlain) return true;
    if (attrs_.mode != Interp::kNearest || in[0].shape.rank() != 4) return false;
    if (const int64_t b = layout_block(in[0].layout); b != 0 && in[0].shape[1] % b != 0) return false;
    auto plan = make_plan(in);
    return plan.ok() && spatial_only(**plan);
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    SL_ASSIGN_OR_RETURN(std::shared_ptr<ResizePlan> plan, make_plan(in));
    const Layout layout = in[0].layout;
    ReshapeResult r;
    if (layout != Layout::kPlain) {
      if (!accepts(in)) return unsupported_error(std::string(layout_name(layout)) + " input cannot resize so");
      const Shape out{plan->out_dims[0], plan->out_dims[1], plan->out_dims[2], plan->out_dims[3]};
      r.outputs.push_back({in[0].dtype, out, layout});
      r.state = in_memory_order(*plan, layout);
      return r;
    }
    r.outputs.push_back({in[0].dtype, Shape(plan->out_dims), Layout::kPlain});
    r.state = plan;
    return r;
  }

  // The plan for a plain input of in[0]'s shape.
  Result<std::shared_ptr<ResizePlan>> make_plan(std::span<const TensorInfo> in) const {
    if (in.empty() || !in[0].present()) return invalid("missing input 'X'");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, desc_));
    if (attrs_.mode != Interp::kNearest && in[0].dtype != DType::kFloat32)
      return unsupported_error("linear and cubic modes need float32 input");
    const Shape& s = in[0].shape;
    SL_RETURN_IF_ERROR(check_rank(s.rank()));
    const size_t rank = s.rank();
    auto present = [&](size_t i) { return i < in.size() && in[i].present(); };

    // 1. Axes the scales/sizes/roi refer to.
    std::vector<int64_t> axes;
    for (int64_t ax : attrs_.axes) {
      int64_t n = 0;
      if (!normalize_axis(ax, static_cast<int64_t>(rank), &n))
        return invalid("axis " + std::to_string(ax) + " is out of range");
      axes.push_back(n);
    }
    if (axes.empty())
      for (size_t i = 0; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));

    // 2. Scales or sizes.
    std::vector<double> scales_in, roi;
    std::vector<int64_t> sizes;
    if (upsample_ && opset_ < 9) {
      scales_in = scales_attr_;
    } else if (legacy_) {
      if (!present(1)) return invalid("missing input 'scales'");
      SL_ASSIGN_OR_RETURN(scales_in, constant_doubles(in[1], "scales", desc_));
    } else {
      if (present(3) && in[3].shape.numel() > 0) {
        SL_ASSIGN_OR_RETURN(sizes, constant_ints(in[3], "sizes", desc_));
      }
      if (present(2) && in[2].shape.numel() > 0) {
        SL_ASSIGN_OR_RETURN(scales_in, constant_doubles(in[2], "scales", desc_));
      }
      if (attrs_.coord == Coord::kTfCropAndResize && present(1) && in[1].shape.numel() > 0) {
        SL_ASSIGN_OR_RETURN(roi, constant_doubles(in[1], "roi", desc_));
      }
    }
    if (!sizes.empty() && !scales_in.empty()) return invalid("only one of 'scales' and 'sizes' may be given");
    if (sizes.empty() && scales_in.empty()) return invalid("one of 'scales' and 'sizes' must be given");
    const size_t na = axes.size();
    if (!roi.empty() && roi.size() != 2 * na) return invalid("'roi' must hold 2 values per axis");
    std::vector<double> scale(rank, 1.0), roi0(rank, 0.0), roi1(rank, 1.0);
    std::vector<int64_t> out_dims(s.begin(), s.end());
    for (size_t i = 0; i < na && !roi.empty(); ++i) {
      roi0[static_cast<size_t>(axes[i])] = roi[i];
      roi1[static_cast<size_t>(axes[i])] = roi[i + na];
    }
    if (!scales_in.empty()) {
      if (scales_in.size() != na)
        return invalid("'scales' has " + std::to_string(scales_in.size()) + " values for " + std::to_string(na) +
                       " axes");
      for (size_t i = 0; i < na; ++i) {
        const size_t ax = static_cast<size_t>(axes[i]);
        if (!(scales_in[i] > 0.0)) return invalid("scales must be positive");
        if (upsample_ && scales_in[i] < 1.0) return invalid("Upsample scales must be >= 1");
        scale[ax] = scales_in[i];
        double len = static_cast<double>(s[ax]) * scales_in[i];
        if (attrs_.coord == Coord::kTfCropAndResize) len *= roi1[ax] - roi0[ax];
        out_dims[ax] = static_cast<int64_t>(std::floor(len));
      }
    } else {
      if (sizes.size() != na)
        return invalid("'sizes' has " + std::to_string(sizes.size()) + " values for " + std::to_string(na) + " axes");
      for (size_t i = 0; i < na; ++i) {
        const size_t ax = static_cast<size_t>(axes[i]);
        if (sizes[i] < 0) return invalid("sizes must be non-negative");
        out_dims[ax] = sizes[i];
        scale[ax] = s[ax] == 0 ? 1.0 : static_cast<double>(sizes[i]) / static_cast<double>(s[ax]);
      }
      if (attrs_.policy != AspectPolicy::kStretch) {
        double p = attrs_.policy == AspectPolicy::kNotLarger ? 1e300 : 0.0;
        for (int64_t ax : axes)
          p = attrs_.policy == AspectPolicy::kNotLarger ? std::min(p, scale[static_cast<size_t>(ax)])
                                                        : std::max(p, scale[static_cast<size_t>(ax)]);
        for (int64_t ax : axes) {
          scale[static_cast<size_t>(ax)] = p;
          out_dims[static_cast<size_t>(ax)] =
              static_cast<int64_t>(std::floor(p * static_cast<double>(s[static_cast<size_t>(ax)]) + 0.5));
        }
      }
    }
    for (size_t d = 0; d < rank; ++d) {
      if (s[d] == 0 && out_dims[d] != 0) return invalid("cannot resize an empty axis to a non-empty one");
      if (s[d] > INT32_MAX) return unsupported_error("axes longer than 2^31 are not supported");
    }

    // 3. Per-axis tables.
    auto plan = std::make_shared<ResizePlan>();
    plan->rank = static_cast<int>(rank);
    plan->mode = attrs_.mode;
    plan->esz = dtype_size(in[0].dtype);
    plan->in_dims.assign(s.begin(), s.end());
    plan->out_dims = out_dims;
    plan->in_strides = dense_strides(s.dims());
    int64_t combos = 1;
    for (size_t d = 0; d < rank; ++d) {
      plan->axes.push_back(build_table(attrs_, s[d], out_dims[d], scale[d], roi0[d], roi1[d]));
      if (d + 1 < rank) combos *= plan->axes.back().taps;
    }
    if (combos > kMaxCombos) return unsupported_error("too many interpolated axes");
    store_scalar(in[0].dtype, attrs_.extrapolation, plan->extrap);
    plan->extrap_f = static_cast<float>(attrs_.extrapolation);
    return plan;
  }

  // Whether a rank-4 nearest plan keeps N and C as they are and samples nothing outside.
  static bool spatial_only(const ResizePlan& p) {
    if (p.rank != 4 || p.mode != Interp::kNearest) return false;
    for (const AxisTable& t : p.axes)
      if (t.any_outside) return false;
    return p.axes[0].identity && p.axes[1].identity;
  }

  // A spatial-only plan over the memory of `layout`: [N, H, W] of pixels of C elements for
  // channels-last, [N, C/B, H, W] of pixels of B elements for a blocked layout of B channels.
  static std::shared_ptr<ResizePlan> in_memory_order(const ResizePlan& p, Layout layout) {
    auto q = std::make_shared<ResizePlan>(p);
    const int64_t n = p.in_dims[0], c = p.in_dims[1];
    AxisTable blocks;  // the identity over the channel blocks
    if (layout == Layout::kChannelsLast) {
      q->rank = 3;
      q->esz = p.esz * static_cast<size_t>(c);
      q->in_dims = {n, p.in_dims[2], p.in_dims[3]};
      q->out_dims = {n, p.out_dims[2], p.out_dims[3]};
      q->axes = {p.axes[0], p.axes[2], p.axes[3]};
    } else {
      const int64_t b = layout_block(layout);
      for (int32_t i = 0; i < static_cast<int32_t>(c / b); ++i) blocks.idx.push_back(i);
      blocks.outside.assign(blocks.idx.size(), 0);
      blocks.identity = true;
      q->esz = p.esz * static_cast<size_t>(b);
      q->in_dims = {n, c / b, p.in_dims[2], p.in_dims[3]};
      q->out_dims = {n, c / b, p.out_dims[2], p.out_dims[3]};
      q->axes = {p.axes[0], blocks, p.axes[2], p.axes[3]};
    }
    q->in_strides = dense_strides(q->in_dims);
    return q;
  }

  Status run(const RunContext& ctx) const override {
    const ResizePlan& p = *static_cast<const ResizePlan*>(ctx.state);
    const auto* src = ctx.inputs[0].data<uint8_t>();
    auto* dst = ctx.outputs[0].data<uint8_t>();
    const int64_t numel = ctx.outputs[0].numel();
    if (numel == 0) return ok_status();
    if (p.rank == 0) {
      std::memcpy(dst, src, p.esz);
      return ok_status();
    }
    const int last = p.rank - 1;
    const int64_t n_out = p.out_dims[static_cast<size_t>(last)];
    // Rows of the plan's dims (pixels of several channels for a plan in a layout's memory order).
    int64_t rows = 1;
    for (int d = 0; d < last; ++d) rows *= p.out_dims[static_cast<size_t>(d)];
    const bool big = ctx.num_threads > 1 && rows * n_out * static_cast<int64_t>(p.esz) >= kParallelBytes;
    const int64_t chunks = big ? std::min<int64_t>(rows, int64_t{omp_threads(ctx.num_threads)} * 4) : 1;
    const bool nearest = p.mode == Interp::kNearest;
#pragma omp parallel for num_threads(omp_threads(ctx.num_threads)) if (big) schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t r0 = rows * c / chunks, r1 = rows * (c + 1) / chunks;
      if (nearest)
        nearest_rows(p, src, dst, r0, r1);
      else
        interp_rows(p, reinterpret_cast<const float*>(src), reinterpret_cast<float*>(dst), r0, r1);
    }
    return ok_status();
  }

 private:
  // Longest input row interp_rows() blends on the stack before the horizontal pass.
  static constexpr int64_t kBlendMax = 4096;

  // Nearest: each output row reads one input row through the last axis' index table. A row that reads
  // the same input row as the one before it (integer upscales) is a copy of that row.
  static void nearest_rows(const ResizePlan& p, const uint8_t* src, uint8_t* dst, int64_t r0, int64_t r1) {
    const int last = p.rank - 1;
    const AxisTable& lt = p.axes[static_cast<size_t>(last)];
    const int64_t n_out = p.out_dims[static_cast<size_t>(last)];
    const size_t esz = p.esz;
    const int64_t row_bytes = n_out * static_cast<int64_t>(esz);
    int64_t prev_off = -1;
    bool prev_outside = false;
    for (int64_t r = r0; r < r1; ++r) {
      uint8_t* row = dst + r * row_bytes;
      int64_t rem = r, off = 0;
      bool outside = false;
      for (int d = last - 1; d >= 0; --d) {
        const size_t du = static_cast<size_t>(d);
        const int64_t o = rem % p.out_dims[du];
        rem /= p.out_dims[du];
        off += p.axes[du].idx[static_cast<size_t>(o)] * p.in_strides[du];
        outside = outside || p.axes[du].outside[static_cast<size_t>(o)];
      }
      if (r > r0 && off == prev_off && outside == prev_outside) {
        std::memcpy(row, row - row_bytes, static_cast<size_t>(row_bytes));
        continue;
      }
      prev_off = off;
      prev_outside = outside;
      if (outside) {
        fill_pattern(row, p.extrap, esz, n_out);
        continue;
      }
      const uint8_t* srow = src + off * static_cast<int64_t>(esz);
      if (lt.identity) {
        std::memcpy(row, srow, static_cast<size_t>(row_bytes));
        continue;
      }
      switch (esz) {
        case 1:
          gather_elems<uint8_t>(srow, lt.idx.data(), n_out, row);
          break;
        case 2:
          gather_elems<uint16_t>(srow, lt.idx.data(), n_out, row);
          break;
        case 4:
          gather_elems<uint32_t>(srow, lt.idx.data(), n_out, row);
          break;
        case 8:
          gather_elems<uint64_t>(srow, lt.idx.data(), n_out, row);
          break;
        default:
          for (int64_t x = 0; x < n_out; ++x)
            std::memcpy(row + x * static_cast<int64_t>(esz),
                        srow + lt.idx[static_cast<size_t>(x)] * static_cast<int64_t>(esz), esz);
      }
      if (lt.any_outside)
        for (int64_t x = 0; x < n_out; ++x)
          if (lt.outside[static_cast<size_t>(x)]) std::memcpy(row + x * static_cast<int64_t>(esz), p.extrap, esz);
    }
  }

  // Linear / cubic: an output row blends input rows (the product of the outer axes' taps), then
  // interpolates along the last axis. The blend goes through a stack row when it fits.
  static void interp_rows(const ResizePlan& p, const float* src, float* dst, int64_t r0, int64_t r1) {
    const int last = p.rank - 1;
    const AxisTable& lt = p.axes[static_cast<size_t>(last)];
    const int64_t n_out = p.out_dims[static_cast<size_t>(last)];
    const int64_t n_in = p.in_dims[static_cast<size_t>(last)];
    const int taps = lt.taps;
    const int32_t* li = lt.idx.data();
    const float* lw = lt.w.data();
    float blend[kBlendMax];
    for (int64_t r = r0; r < r1; ++r) {
      float* row = dst + r * n_out;
      int64_t offs[kMaxCombos];
      float ws[kMaxCombos];
      int nc = 1;
      offs[0] = 0;
      ws[0] = 1.f;
      int64_t rem = r;
      bool outside = false;
      for (int d = last - 1; d >= 0; --d) {
        const size_t du = static_cast<size_t>(d);
        const AxisTable& t = p.axes[du];
        const int64_t o = rem % p.out_dims[du];
        rem /= p.out_dims[du];
        outside = outside || t.outside[static_cast<size_t>(o)];
        if (t.taps == 1) {
          const int64_t add = t.idx[static_cast<size_t>(o)] * p.in_strides[du];
          for (int c = 0; c < nc; ++c) offs[c] += add;
          continue;
        }
        int64_t o2[kMaxCombos];
        float w2[kMaxCombos];
        int w = 0;
        for (int c = 0; c < nc; ++c)
          for (int k = 0; k < t.taps; ++k) {
            const float wk = t.w[static_cast<size_t>(o * t.taps + k)];
            if (wk == 0.f) continue;
            o2[w] = offs[c] + t.idx[static_cast<size_t>(o * t.taps + k)] * p.in_strides[du];
            w2[w] = ws[c] * wk;
            ++w;
          }
        nc = w;
        std::copy(o2, o2 + w, offs);
        std::copy(w2, w2 + w, ws);
      }
      if (outside) {
        std::fill(row, row + n_out, p.extrap_f);
        continue;
      }
      if (nc == 1 || n_in <= kBlendMax) {
        // 1. Blend the source rows (or take the single one), 2. interpolate along the last axis.
        const float* s = src + offs[0];
        float scale = ws[0];
        if (nc > 1) {
          for (int64_t i = 0; i < n_in; ++i) blend[i] = ws[0] * s[i];
          for (int c = 1; c < nc; ++c) {
            const float* sc = src + offs[c];
            const float wc = ws[c];
            for (int64_t i = 0; i < n_in; ++i) blend[i] += wc * sc[i];
          }
          s = blend;
          scale = 1.f;
        }
        if (taps == 1) {
          for (int64_t x = 0; x < n_out; ++x) row[x] = scale * s[li[x]];
        } else if (taps == 2) {
          for (int64_t x = 0; x < n_out; ++x)
            row[x] = scale * (lw[2 * x] * s[li[2 * x]] + lw[2 * x + 1] * s[li[2 * x + 1]]);
        } else {
          for (int64_t x = 0; x < n_out; ++x) {
            float acc = 0.f;
            for (int k = 0; k < taps; ++k) acc += lw[x * taps + k] * s[li[x * taps + k]];
            row[x] = scale * acc;
          }
        }
      } else {
        for (int64_t x = 0; x < n_out; ++x) row[x] = 0.f;
        for (int c = 0; c < nc; ++c) {
          const float* s = src + offs[c];
          const float wc = ws[c];
          for (int64_t x = 0; x < n_out; ++x) {
            float acc = 0.f;
            for (int k = 0; k < taps; ++k) acc += lw[x * taps + k] * s[li[x * taps + k]];
            row[x] += wc * acc;
          }
        }
      }
      if (lt.any_outside)
        for (int64_t x = 0; x < n_out; ++x)
          if (lt.outside[static_cast<size_t>(x)]) row[x] = p.extrap_f;
    }
  }

  ResizeAttrs attrs_;
  bool upsample_ = false;
  bool legacy_ = false;
  std::vector<double> scales_attr_;
};

}  // namespace

Status register_resize_ops(KernelRegistry& reg) {
  for (const bool upsample : {false, true}) {
    KernelDef def;
    def.op = upsample ? "Upsample" : "Resize";
    def.since_version = upsample ? 7 : 10;
    def.end_version = upsample ? 9 : INT_MAX;
    def.provider = "cpu";
    def.create = [upsample](const KernelCreateArgs& a) { return ResizeKernel::create(a, upsample); };
    SL_RETURN_IF_ERROR(reg.add(std::move(def)));
  }
  return ok_status();
}

}  // namespace streamline::ops::cpu
