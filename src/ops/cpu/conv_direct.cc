// Convolution relatives that oneDNN has no primitive for: Col2Im (opset 18) and DeformConv (19, 22).
//
//   Col2Im      input [N, C * prod(block), L] -> [N, C, image...]: each of the L block positions
//               (row-major over the grid the strides, pads and dilations give) adds its C x block
//               values into the image; taps that land in the padding are dropped.
//   DeformConv  X [N, C, H, W], W [M, C / group, kH, kW], offset [N, 2 * G * kH * kW, oH, oW],
//               optional B [M] and mask [N, G * kH * kW, oH, oW]: each tap of each output samples X
//               bilinearly (zero outside) at its regular position plus its (dy, dx) offset, scaled by
//               the mask; the sampled columns [C * kH * kW, oH * oW] then meet the weights in one
//               matrix product per image and group (oneDNN sgemm for float32).

#include <dnnl.h>

#include <cmath>
#include <vector>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"

namespace streamline::ops::cpu {
namespace {

// Attribute `name` with `n` entries, or `def` repeated when absent.
Result<std::vector<int64_t>> per_axis(const graph::Node& node, const char* name, size_t n, int64_t def,
                                      const std::string& desc) {
  std::vector<int64_t> v = node.attr_ints(name);
  if (v.empty()) return std::vector<int64_t>(n, def);
  if (v.size() != n)
    return invalid_argument(desc + ": '" + name + "' has " + std::to_string(v.size()) + " values, expected " +
                            std::to_string(n));
  return v;
}

class Col2ImKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs& a) {
    node_ = a.node;
    return ok_status();
  }

  struct Geom {
    int64_t n = 0, c = 0, blocks = 0, taps = 1;
    std::vector<int64_t> image, block, grid, stride, dil, pad;
  };

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    SL_ASSIGN_OR_RETURN(Geom g, geometry(in));
    Shape out{g.n, g.c};
    for (int64_t v : g.image) out.push_back(v);
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, out, Layout::kPlain});
    rr.workspace_bytes = static_cast<size_t>(std::max<int64_t>(out.numel() / std::max<int64_t>(g.n * g.c, 1), 1)) *
                         sizeof(double);  // one image plane, accumulated in double
    rr.state = std::make_shared<Geom>(std::move(g));
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Geom& g = *static_cast<const Geom*>(ctx.state);
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const DType dt = x.dtype();
    const size_t nsp = g.image.size();
    int64_t plane = 1;
    for (int64_t v : g.image) plane *= v;
    auto* acc = static_cast<double*>(ctx.workspace);
    int64_t pos[kMaxDataRank], tap[kMaxDataRank];
    for (int64_t b = 0; b < g.n; ++b)
      for (int64_t ch = 0; ch < g.c; ++ch) {
        std::fill(acc, acc + plane, 0.0);
        for (int64_t t = 0; t < g.taps; ++t) {
          for (int64_t r = t, d = static_cast<int64_t>(nsp) - 1; d >= 0; --d) {
            tap[d] = r % g.block[static_cast<size_t>(d)];
            r /= g.block[static_cast<size_t>(d)];
          }
          const int64_t row = (b * g.c + ch) * g.taps + t;
          for (int64_t l = 0; l < g.blocks; ++l) {
            for (int64_t r = l, d = static_cast<int64_t>(nsp) - 1; d >= 0; --d) {
              pos[d] = r % g.grid[static_cast<size_t>(d)];
              r /= g.grid[static_cast<size_t>(d)];
            }
            int64_t at = 0;
            bool inside = true;
            for (size_t d = 0; d < nsp && inside; ++d) {
              const int64_t i = pos[d] * g.stride[d] - g.pad[d] + tap[d] * g.dil[d];
              inside = i >= 0 && i < g.image[d];
              at = at * g.image[d] + i;
            }
            if (inside) acc[at] += load_f(dt, x.raw(), row * g.blocks + l);
          }
        }
        const int64_t base = (b * g.c + ch) * plane;
        for (int64_t i = 0; i < plane; ++i) store_f(dt, y.raw(), base + i, acc[i]);
      }
    return ok_status();
  }

 private:
  Result<Geom> geometry(std::span<const TensorInfo> in) const {
    if (in.size() != 3 || !in[0].present() || !in[1].present() || !in[2].present())
      return invalid("expects input, image_shape and block_shape");
    if (!is_float_dtype(in[0].dtype)) return unsupported_error(std::string("dtype ") + dtype_name(in[0].dtype));
    Geom g;
    SL_ASSIGN_OR_RETURN(g.image, constant_ints(in[1], "image_shape", desc_));
    SL_ASSIGN_OR_RETURN(g.block, constant_ints(in[2], "block_shape", desc_));
    const size_t nsp = g.image.size();
    if (nsp > static_cast<size_t>(kMaxDataRank)) return unsupported_error("too many spatial axes");
    if (nsp == 0 || g.block.size() != nsp) return invalid("image_shape and block_shape must have one entry per axis");
    SL_ASSIGN_OR_RETURN(g.stride, per_axis(node_, "strides", nsp, 1, desc_));
    SL_ASSIGN_OR_RETURN(g.dil, per_axis(node_, "dilations", nsp, 1, desc_));
    SL_ASSIGN_OR_RETURN(std::vector<int64_t> pads, per_axis(node_, "pads", 2 * nsp, 0, desc_));
    const Shape& x = in[0].shape;
    if (x.rank() != 3) return invalid("input must be [N, C * prod(block_shape), L], got " + x.to_string());
    g.blocks = 1;
    for (size_t d = 0; d < nsp; ++d) {
      if (g.block[d] < 1 || g.stride[d] < 1 || g.dil[d] < 1 || g.image[d] < 0 || pads[d] < 0 || pads[d + nsp] < 0)
        return invalid("block_shape, strides and dilations must be >= 1, image_shape and pads >= 0");
      g.taps *= g.block[d];
      const int64_t span = g.image[d] + pads[d] + pads[d + nsp] - g.dil[d] * (g.block[d] - 1) - 1;
      if (span < 0) return invalid("the block does not fit the padded image");
      g.grid.push_back(span / g.stride[d] + 1);
      g.blocks *= g.grid.back();
      g.pad.push_back(pads[d]);
    }
    if (x[1] % g.taps != 0)
      return invalid("input dim 1 (" + std::to_string(x[1]) + ") is not a multiple of prod(block_shape)");
    if (x[2] != g.blocks)
      return invalid("input has " + std::to_string(x[2]) + " blocks, the geometry gives " + std::to_string(g.blocks));
    g.n = x[0];
    g.c = x[1] / g.taps;
    return g;
  }

  graph::Node node_;
};

class DeformConvKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;

  Status init(const KernelCreateArgs& a) {
    group_ = a.node.attr_int("group", 1);
    offset_group_ = a.node.attr_int("offset_group", 1);
    if (group_ < 1 || offset_group_ < 1) return invalid("group and offset_group must be >= 1");
    kernel_ = a.node.attr_ints("kernel_shape");
    SL_ASSIGN_OR_RETURN(strides_, per_axis(a.node, "strides", 2, 1, desc_));
    SL_ASSIGN_OR_RETURN(dil_, per_axis(a.node, "dilations", 2, 1, desc_));
    SL_ASSIGN_OR_RETURN(pads_, per_axis(a.node, "pads", 4, 0, desc_));
    return ok_status();
  }

  struct Geom {
    int64_t n, c, h, w, m, kh, kw, oh, ow;
  };

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 3 || !in[0].present() || !in[1].present() || !in[2].present())
      return invalid("expects X, W and offset");
    for (const TensorInfo& t : in)
      if (t.present() && t.dtype != in[0].dtype)
        return invalid(std::string("inputs mix ") + dtype_name(in[0].dtype) + " and " + dtype_name(t.dtype));
    if (!is_float_dtype(in[0].dtype)) return unsupported_error(std::string("dtype ") + dtype_name(in[0].dtype));
    const Shape &x = in[0].shape, &wt = in[1].shape, &off = in[2].shape;
    if (x.rank() != 4 || wt.rank() != 4) return unsupported_error("only 2-D DeformConv (4-D X and W)");
    Geom g{x[0], x[1], x[2], x[3], wt[0], wt[2], wt[3], 0, 0};
    if (!kernel_.empty() && (kernel_.size() != 2 || kernel_[0] != g.kh || kernel_[1] != g.kw))
      return invalid("kernel_shape differs from W's spatial dims");
    if (g.c % group_ != 0 || g.m % group_ != 0 || wt[1] != g.c / group_ || g.c % offset_group_ != 0)
      return invalid("channels do not divide into the groups");
    for (int d = 0; d < 2; ++d) {
      const int64_t size = d == 0 ? g.h : g.w, k = d == 0 ? g.kh : g.kw;
      const int64_t span = size + pads_[static_cast<size_t>(d)] + pads_[static_cast<size_t>(d + 2)] -
                           dil_[static_cast<size_t>(d)] * (k - 1) - 1;
      if (span < 0) return invalid("the kernel does not fit the padded input");
      (d == 0 ? g.oh : g.ow) = span / strides_[static_cast<size_t>(d)] + 1;
    }
    const int64_t taps = g.kh * g.kw;
    if (off != Shape{g.n, 2 * offset_group_ * taps, g.oh, g.ow})
      return invalid("offset must be " + Shape{g.n, 2 * offset_group_ * taps, g.oh, g.ow}.to_string() + ", got " +
                     off.to_string());
    if (in.size() > 3 && in[3].present() && in[3].shape.numel() != g.m)
      return invalid("B must have one value per output channel");
    if (in.size() > 4 && in[4].present() && in[4].shape != Shape{g.n, offset_group_ * taps, g.oh, g.ow})
      return invalid("mask must be " + Shape{g.n, offset_group_ * taps, g.oh, g.ow}.to_string());
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, Shape{g.n, g.m, g.oh, g.ow}, Layout::kPlain});
    // float32 scratch: the sampled columns of one image, one output group's product, the weights.
    rr.workspace_bytes =
        static_cast<size_t>(g.c * taps * g.oh * g.ow + g.m * g.oh * g.ow + in[1].shape.numel()) * sizeof(float);
    rr.state = std::make_shared<Geom>(g);
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Geom& g = *static_cast<const Geom*>(ctx.state);
    const DType dt = ctx.inputs[0].dtype();
    const Tensor &x = ctx.inputs[0], &wt = ctx.inputs[1], &off = ctx.inputs[2];
    const bool has_b = ctx.inputs.size() > 3 && ctx.inputs[3].defined();
    const bool has_mask = ctx.inputs.size() > 4 && ctx.inputs[4].defined();
    const int64_t taps = g.kh * g.kw, outs = g.oh * g.ow, cpg = g.c / offset_group_;
    float* cols = static_cast<float*>(ctx.workspace);
    float* part = cols + g.c * taps * outs;
    // Weights as float32 rows [M, C/group * taps].
    float* wf = part + g.m * outs;
    for (int64_t i = 0; i < wt.numel(); ++i) wf[i] = static_cast<float>(load_f(dt, wt.raw(), i));
    for (int64_t b = 0; b < g.n; ++b) {
      // Pass 1: deformed, masked columns, row (c * taps + tap), column output position.
#pragma omp parallel for num_threads(omp_threads(ctx.num_threads)) schedule(static)
      for (int64_t ct = 0; ct < g.c * taps; ++ct) {
        const int64_t ch = ct / taps, t = ct % taps, ky = t / g.kw, kx = t % g.kw, og = ch / cpg;
        const int64_t plane = (b * g.c + ch) * g.h * g.w;
        for (int64_t o = 0; o < outs; ++o) {
          const int64_t oy = o / g.ow, ox = o % g.ow;
          // offset channels are (offset group, tap, [dy, dx]).
          const int64_t oi = (b * offset_group_ * taps * 2 + (og * taps + t) * 2) * outs + o;
          const double py = static_cast<double>(oy * strides_[0] - pads_[0] + ky * dil_[0]) + load_f(dt, off.raw(), oi);
          const double px =
              static_cast<double>(ox * strides_[1] - pads_[1] + kx * dil_[1]) + load_f(dt, off.raw(), oi + outs);
          double v = sample(x, dt, plane, g.h, g.w, py, px);
          if (has_mask) v *= load_f(dt, ctx.inputs[4].raw(), ((b * offset_group_ + og) * taps + t) * outs + o);
          cols[ct * outs + o] = static_cast<float>(v);
        }
      }
      // Pass 2: per group, out[M/group, outs] = W_g [M/group, C/group * taps] . cols_g.
      const int64_t mg = g.m / group_, kg = g.c / group_ * taps;
      for (int64_t gi = 0; gi < group_; ++gi) {
        float* dst = dt == DType::kFloat32 ? ctx.outputs[0].data<float>() + (b * g.m + gi * mg) * outs : part;
        dnnl_sgemm('N', 'N', mg, outs, kg, 1.f, wf + gi * mg * kg, kg, cols + gi * kg * outs, outs, 0.f, dst, outs);
        for (int64_t r = 0; r < mg; ++r) {
          const double bias = has_b ? load_f(dt, ctx.inputs[3].raw(), gi * mg + r) : 0.0;
          for (int64_t o = 0; o < outs; ++o)
            store_f(dt, ctx.outputs[0].raw(), (b * g.m + gi * mg + r) * outs + o, dst[r * outs + o] + bias);
        }
      }
    }
    return ok_status();
  }

 private:
  // Bilinear value of X's plane at (y, x); corners outside the image read 0.
  static double sample(const Tensor& x, DType dt, int64_t plane, int64_t h, int64_t w, double y, double xx) {
    if (y <= -1 || y >= static_cast<double>(h) || xx <= -1 || xx >= static_cast<double>(w)) return 0.0;
    const double y0f = std::floor(y), x0f = std::floor(xx);
    const int64_t y0 = static_cast<int64_t>(y0f), x0 = static_cast<int64_t>(x0f);
    const double ly = y - y0f, lx = xx - x0f;
    double v = 0.0;
    for (int dy = 0; dy < 2; ++dy)
      for (int dx = 0; dx < 2; ++dx) {
        const int64_t yi = y0 + dy, xi = x0 + dx;
        if (yi < 0 || yi >= h || xi < 0 || xi >= w) continue;
        v += load_f(dt, x.raw(), plane + yi * w + xi) * (dy ? ly : 1 - ly) * (dx ? lx : 1 - lx);
      }
    return v;
  }

  int64_t group_ = 1, offset_group_ = 1;
  std::vector<int64_t> kernel_, strides_, dil_, pads_;
};

}  // namespace

Status register_conv_direct(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_typed_def(reg, "Col2Im", 18, DType::kUndefined, make_factory<Col2ImKernel>()));
  return add_typed_def(reg, "DeformConv", 19, DType::kUndefined, make_factory<DeformConvKernel>());
}

}  // namespace streamline::ops::cpu
