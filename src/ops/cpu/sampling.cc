// Spatial sampling: GridSample (opset 16: 4-D input, bilinear/nearest/bicubic; opset 20 names them
// linear/nearest/cubic and adds 5-D input for linear and nearest; zeros/border/reflection padding,
// align_corners), AffineGrid (opset 20) and RoiAlign (opset 10/16; avg and max, half_pixel and
// output_half_pixel coordinates, adaptive or fixed sampling_ratio). float32.
//
// AffineGrid makes the grid GridSample reads: for each output position the base coordinates
// (x, y[, z]) in [-1, 1] (pixel centres, or the corner pixels with align_corners) times theta
// [N, 2, 3] (or [N, 3, 4]): grid[n, (d,) h, w] = theta[n] @ (x, y, (z,) 1).
//
// GridSample maps a grid value g in [-1, 1] to a pixel coordinate: ((g + 1) / 2) * (size - 1) with
// align_corners, ((g + 1) * size - 1) / 2 without. Border padding clamps the coordinate, reflection
// mirrors it at the borders (pixel centres with align_corners, pixel edges without); zeros padding
// reads 0 outside the image. Bicubic uses the cubic convolution kernel with A = -0.75 on a 4x4
// neighbourhood, each tap padded as above.

#include <cmath>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"

namespace streamline::ops::cpu {
namespace {

enum class Mode { kBilinear, kNearest, kBicubic };
enum class Pad { kZeros, kBorder, kReflection };

float reflect(float x, float twice_lo, float twice_hi) {
  if (twice_lo == twice_hi) return 0.f;
  const float mn = twice_lo / 2.f, span = (twice_hi - twice_lo) / 2.f;
  x = std::fabs(x - mn);
  const float extra = std::fmod(x, span);
  const int flips = static_cast<int>(std::floor(x / span));
  return flips % 2 == 0 ? extra + mn : span - extra + mn;
}

float clamp_coord(float x, int64_t size) {
  return std::min(static_cast<float>(size - 1), std::max(x, 0.f));
}

// Applies the padding mode to an unnormalised coordinate (border clamps, reflection mirrors).
float pad_coord(float x, int64_t size, Pad pad, bool align) {
  if (pad == Pad::kBorder) return clamp_coord(x, size);
  if (pad == Pad::kReflection) {
    x = align ? reflect(x, 0.f, 2.f * static_cast<float>(size - 1))
              : reflect(x, -1.f, 2.f * static_cast<float>(size) - 1.f);
    return clamp_coord(x, size);
  }
  return x;
}

float unnormalize(float g, int64_t size, bool align) {
  return align ? (g + 1.f) / 2.f * static_cast<float>(size - 1) : ((g + 1.f) * static_cast<float>(size) - 1.f) / 2.f;
}

float cubic1(float x, float a) {
  return ((a + 2.f) * x - (a + 3.f)) * x * x + 1.f;
}
float cubic2(float x, float a) {
  return ((a * x - 5.f * a) * x + 8.f * a) * x - 4.f * a;
}

void cubic_coeffs(float t, float c[4]) {
  constexpr float kA = -0.75f;
  c[0] = cubic2(t + 1.f, kA);
  c[1] = cubic1(t, kA);
  c[2] = cubic1(1.f - t, kA);
  c[3] = cubic2(2.f - t, kA);
}

class GridSampleKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;

  Status init(const KernelCreateArgs& a) {
    const std::string m = a.node.attr_string("mode", "bilinear");
    if (m == "bilinear" || m == "linear")
      mode_ = Mode::kBilinear;
    else if (m == "nearest")
      mode_ = Mode::kNearest;
    else if (m == "bicubic" || m == "cubic")
      mode_ = Mode::kBicubic;
    else
      return invalid("unknown mode '" + m + "'");
    const std::string p = a.node.attr_string("padding_mode", "zeros");
    if (p == "zeros")
      pad_ = Pad::kZeros;
    else if (p == "border")
      pad_ = Pad::kBorder;
    else if (p == "reflection")
      pad_ = Pad::kReflection;
    else
      return invalid("unknown padding_mode '" + p + "'");
    align_ = a.node.attr_int("align_corners", 0) != 0;
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 2 || !in[0].present() || !in[1].present()) return invalid("expected X and grid");
    if (in[0].dtype != DType::kFloat32 || in[1].dtype != DType::kFloat32) return unsupported_error("only float32");
    const Shape& x = in[0].shape;
    const Shape& g = in[1].shape;
    if (x.rank() == 5) {
      if (opset_ < 20) return invalid("5-D input needs GridSample-20");
      if (mode_ == Mode::kBicubic) return invalid("cubic mode takes 4-D input only");
      if (g.rank() != 5 || g[0] != x[0] || g[4] != 3)
        return invalid("grid must be [N, D_out, H_out, W_out, 3], got " + g.to_string());
      ReshapeResult rr;
      rr.outputs.push_back(OutputInfo{DType::kFloat32, Shape{x[0], x[1], g[1], g[2], g[3]}, Layout::kPlain});
      return rr;
    }
    if (x.rank() != 4) return unsupported_error("only 4-D and 5-D input");
    if (g.rank() != 4 || g[0] != x[0] || g[3] != 2)
      return invalid("grid must be [N, H_out, W_out, 2], got " + g.to_string());
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{DType::kFloat32, Shape{x[0], x[1], g[1], g[2]}, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    if (ctx.inputs[0].shape().rank() == 5) return run_3d(ctx);
    const Shape& xs = ctx.inputs[0].shape();
    const Shape& gs = ctx.inputs[1].shape();
    const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3], oh = gs[1], ow = gs[2];
    const float* x = ctx.inputs[0].data<float>();
    const float* grid = ctx.inputs[1].data<float>();
    float* y = ctx.outputs[0].data<float>();
    math::parallel_chunks(n * oh * ow, 256, ctx.num_threads, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const int64_t ni = p / (oh * ow), pix = p % (oh * ow);
        const float gx = grid[p * 2], gy = grid[p * 2 + 1];
        for (int64_t ci = 0; ci < c; ++ci) {
          const float* plane = x + (ni * c + ci) * h * w;
          y[(ni * c + ci) * oh * ow + pix] = sample(plane, h, w, gx, gy);
        }
      }
    });
    return ok_status();
  }

 private:
  // Volumetric sampling: grid (x, y, z) indexes (W, H, D); trilinear or nearest.
  Status run_3d(const RunContext& ctx) const {
    const Shape& xs = ctx.inputs[0].shape();
    const Shape& gs = ctx.inputs[1].shape();
    const int64_t n = xs[0], c = xs[1], d = xs[2], h = xs[3], w = xs[4];
    const int64_t outs = gs[1] * gs[2] * gs[3];
    const float* x = ctx.inputs[0].data<float>();
    const float* grid = ctx.inputs[1].data<float>();
    float* y = ctx.outputs[0].data<float>();
    math::parallel_chunks(n * outs, 256, ctx.num_threads, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const int64_t ni = p / outs, pos = p % outs;
        const float ix = pad_coord(unnormalize(grid[p * 3], w, align_), w, pad_, align_);
        const float iy = pad_coord(unnormalize(grid[p * 3 + 1], h, align_), h, pad_, align_);
        const float iz = pad_coord(unnormalize(grid[p * 3 + 2], d, align_), d, pad_, align_);
        for (int64_t ci = 0; ci < c; ++ci) {
          const float* vol = x + (ni * c + ci) * d * h * w;
          const auto at3 = [&](int64_t z, int64_t yy, int64_t xx) {
            return z >= 0 && z < d && yy >= 0 && yy < h && xx >= 0 && xx < w ? vol[(z * h + yy) * w + xx] : 0.f;
          };
          float v = 0.f;
          if (mode_ == Mode::kNearest) {
            v = at3(static_cast<int64_t>(std::nearbyint(iz)), static_cast<int64_t>(std::nearbyint(iy)),
                    static_cast<int64_t>(std::nearbyint(ix)));
          } else {
            const float x0f = std::floor(ix), y0f = std::floor(iy), z0f = std::floor(iz);
            const float lx = ix - x0f, ly = iy - y0f, lz = iz - z0f;
            const int64_t x0 = static_cast<int64_t>(x0f), y0 = static_cast<int64_t>(y0f),
                          z0 = static_cast<int64_t>(z0f);
            for (int dz = 0; dz < 2; ++dz)
              for (int dy = 0; dy < 2; ++dy)
                for (int dx = 0; dx < 2; ++dx)
                  v += at3(z0 + dz, y0 + dy, x0 + dx) * (dz ? lz : 1.f - lz) * (dy ? ly : 1.f - ly) *
                       (dx ? lx : 1.f - lx);
          }
          y[(ni * c + ci) * outs + pos] = v;
        }
      }
    });
    return ok_status();
  }

  float at(const float* plane, int64_t h, int64_t w, int64_t iy, int64_t ix) const {
    return iy >= 0 && iy < h && ix >= 0 && ix < w ? plane[iy * w + ix] : 0.f;
  }

  // A bicubic tap: padding applied to the tap's own coordinate.
  float tap(const float* plane, int64_t h, int64_t w, float fx, float fy) const {
    const float px = pad_coord(fx, w, pad_, align_), py = pad_coord(fy, h, pad_, align_);
    return at(plane, h, w, static_cast<int64_t>(std::floor(py)), static_cast<int64_t>(std::floor(px)));
  }

  float sample(const float* plane, int64_t h, int64_t w, float gx, float gy) const {
    if (mode_ == Mode::kBicubic) {
      const float ix = unnormalize(gx, w, align_), iy = unnormalize(gy, h, align_);
      const float x0 = std::floor(ix), y0 = std::floor(iy);
      float cx[4], cy[4];
      cubic_coeffs(ix - x0, cx);
      cubic_coeffs(iy - y0, cy);
      float out = 0.f;
      for (int r = 0; r < 4; ++r) {
        float row = 0.f;
        for (int k = 0; k < 4; ++k)
          row += cx[k] * tap(plane, h, w, x0 - 1.f + static_cast<float>(k), y0 - 1.f + static_cast<float>(r));
        out += cy[r] * row;
      }
      return out;
    }
    const float ix = pad_coord(unnormalize(gx, w, align_), w, pad_, align_);
    const float iy = pad_coord(unnormalize(gy, h, align_), h, pad_, align_);
    if (mode_ == Mode::kNearest)
      return at(plane, h, w, static_cast<int64_t>(std::nearbyint(iy)), static_cast<int64_t>(std::nearbyint(ix)));
    const float x0f = std::floor(ix), y0f = std::floor(iy);
    const int64_t x0 = static_cast<int64_t>(x0f), y0 = static_cast<int64_t>(y0f);
    const float lx = ix - x0f, ly = iy - y0f;
    return at(plane, h, w, y0, x0) * (1.f - lx) * (1.f - ly) + at(plane, h, w, y0, x0 + 1) * lx * (1.f - ly) +
           at(plane, h, w, y0 + 1, x0) * (1.f - lx) * ly + at(plane, h, w, y0 + 1, x0 + 1) * lx * ly;
  }

  Mode mode_ = Mode::kBilinear;
  Pad pad_ = Pad::kZeros;
  bool align_ = false;
};

class AffineGridKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;

  Status init(const KernelCreateArgs& a) {
    align_ = a.node.attr_int("align_corners", 0) != 0;
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 2 || !in[0].present() || !in[1].present()) return invalid("expected theta and size");
    if (!is_float_dtype(in[0].dtype)) return unsupported_error(std::string("dtype ") + dtype_name(in[0].dtype));
    SL_ASSIGN_OR_RETURN(std::vector<int64_t> size, constant_ints(in[1], "size", desc_));
    const Shape& t = in[0].shape;
    const bool two_d = size.size() == 4;
    if (!two_d && size.size() != 5) return invalid("size must be [N, C, H, W] or [N, C, D, H, W]");
    const int64_t k = two_d ? 2 : 3;
    if (t.rank() != 3 || t[0] != size[0] || t[1] != k || t[2] != k + 1)
      return invalid("theta must be [N, " + std::to_string(k) + ", " + std::to_string(k + 1) + "], got " +
                     t.to_string());
    for (int64_t v : size)
      if (v < 0) return invalid("size values must be >= 0");
    Shape out{size[0]};
    for (size_t i = 2; i < size.size(); ++i) out.push_back(size[i]);
    out.push_back(k);
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, out, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& theta = ctx.inputs[0];
    Tensor& grid = ctx.outputs[0];
    const Shape& o = grid.shape();
    const bool two_d = o.rank() == 4;
    const int64_t k = two_d ? 2 : 3;
    const int64_t n = o[0], dd = two_d ? 1 : o[1], hh = o[o.rank() - 3], ww = o[o.rank() - 2];
    const DType dt = theta.dtype();
    // Base coordinate i of an axis of `size` points in [-1, 1].
    const auto base = [this](int64_t i, int64_t size) -> double {
      if (align_) return size > 1 ? -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(size - 1) : 0.0;
      return (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(size) - 1.0;
    };
    int64_t at = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t z = 0; z < dd; ++z)
        for (int64_t yy = 0; yy < hh; ++yy)
          for (int64_t xx = 0; xx < ww; ++xx) {
            const double src[4] = {base(xx, ww), base(yy, hh), two_d ? 1.0 : base(z, dd), 1.0};
            for (int64_t r = 0; r < k; ++r) {
              double v = 0.0;
              for (int64_t col = 0; col <= k; ++col) {
                const double s = col == k ? 1.0 : src[col];
                v += load_f(dt, theta.raw(), (b * k + r) * (k + 1) + col) * s;
              }
              store_f(dt, grid.raw(), at++, v);
            }
          }
    return ok_status();
  }

 private:
  bool align_ = false;
};

class RoiAlignKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;

  Status init(const KernelCreateArgs& a) {
    const std::string m = a.node.attr_string("mode", "avg");
    if (m != "avg" && m != "max") return invalid("unknown mode '" + m + "'");
    max_ = m == "max";
    const std::string t =
        a.node.attr_string("coordinate_transformation_mode", opset_ >= 16 ? "half_pixel" : "output_half_pixel");
    if (t != "half_pixel" && t != "output_half_pixel")
      return invalid("unknown coordinate_transformation_mode '" + t + "'");
    half_pixel_ = t == "half_pixel";
    out_h_ = a.node.attr_int("output_height", 1);
    out_w_ = a.node.attr_int("output_width", 1);
    sampling_ = a.node.attr_int("sampling_ratio", 0);
    scale_ = a.node.attr_float("spatial_scale", 1.f);
    if (out_h_ < 1 || out_w_ < 1 || sampling_ < 0) return invalid("bad output size or sampling_ratio");
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 3 || !in[0].present() || !in[1].present() || !in[2].present())
      return invalid("expected X, rois, batch_indices");
    if (in[0].dtype != DType::kFloat32 || in[1].dtype != DType::kFloat32) return unsupported_error("only float32");
    if (in[2].dtype != DType::kInt64 && in[2].dtype != DType::kInt32) return invalid("batch_indices must be int64");
    const Shape& x = in[0].shape;
    const Shape& r = in[1].shape;
    if (x.rank() != 4 || r.rank() != 2 || r[1] != 4 || in[2].shape != Shape{r[0]}) return invalid("bad input shapes");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{DType::kFloat32, Shape{r[0], x[1], out_h_, out_w_}, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Shape& xs = ctx.inputs[0].shape();
    const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3], rois = ctx.inputs[1].shape()[0];
    const float* x = ctx.inputs[0].data<float>();
    const float* roi = ctx.inputs[1].data<float>();
    float* y = ctx.outputs[0].data<float>();
    for (int64_t r = 0; r < rois; ++r) {
      const int64_t b = load_index(ctx.inputs[2], r);
      if (b < 0 || b >= n) return invalid("batch index " + std::to_string(b) + " out of range");
    }
    const float off = half_pixel_ ? 0.5f : 0.f;
    // Where a ROI's samples fall and how they weigh is the same for every channel: worked out once
    // per ROI (per chunk of work) and applied to each channel's plane.
    math::parallel_chunks(rois * c, 1, ctx.num_threads, [&](int64_t b0, int64_t b1) {
      std::vector<Sample> samples;
      int64_t sampled_roi = -1, gh = 1, gw = 1;
      for (int64_t rc = b0; rc < b1; ++rc) {
        const int64_t r = rc / c, ci = rc % c;
        if (r != sampled_roi) {
          sample_roi(roi + r * 4, off, h, w, samples, gh, gw);
          sampled_roi = r;
        }
        const float* plane = x + (load_index(ctx.inputs[2], r) * c + ci) * h * w;
        const float count = static_cast<float>(std::max<int64_t>(gh * gw, 1));
        const Sample* s = samples.data();
        for (int64_t p = 0; p < out_h_ * out_w_; ++p) {
          float acc = 0.f;
          for (int64_t k = 0; k < gh * gw; ++k, ++s) {
            float a = 0.f, b = 0.f, cc = 0.f, d = 0.f;
            if (s->inside) {
              a = s->w[0] * plane[s->at[0]];
              b = s->w[1] * plane[s->at[1]];
              cc = s->w[2] * plane[s->at[2]];
              d = s->w[3] * plane[s->at[3]];
            }
            if (max_) {
              const float v = std::max(std::max(a, b), std::max(cc, d));
              acc = k == 0 ? v : std::max(acc, v);
            } else {
              acc += a + b + cc + d;
            }
          }
          y[rc * out_h_ * out_w_ + p] = max_ ? acc : acc / count;
        }
      }
    });
    return ok_status();
  }

 private:
  // One bilinear sample: the offsets of its four corners in a plane and their weights; a point
  // outside the map has the value 0.
  struct Sample {
    int64_t at[4];
    float w[4];
    bool inside;
  };

  // The samples of one ROI, output pixel by output pixel, gh x gw each (row-major); max mode
  // takes the largest weighted corner of a sample, as ONNX Runtime does.
  void sample_roi(const float* box, float off, int64_t h, int64_t w, std::vector<Sample>& out, int64_t& gh,
                  int64_t& gw) const {
    const float x0 = box[0] * scale_ - off, y0 = box[1] * scale_ - off;
    float rw = box[2] * scale_ - off - x0, rh = box[3] * scale_ - off - y0;
    if (!half_pixel_) {
      rw = std::max(rw, 1.f);
      rh = std::max(rh, 1.f);
    }
    const float bh = rh / static_cast<float>(out_h_), bw = rw / static_cast<float>(out_w_);
    gh = sampling_ > 0 ? sampling_ : static_cast<int64_t>(std::ceil(rh / static_cast<float>(out_h_)));
    gw = sampling_ > 0 ? sampling_ : static_cast<int64_t>(std::ceil(rw / static_cast<float>(out_w_)));
    out.clear();
    out.reserve(static_cast<size_t>(out_h_ * out_w_ * std::max<int64_t>(gh * gw, 0)));
    for (int64_t ph = 0; ph < out_h_; ++ph)
      for (int64_t pw = 0; pw < out_w_; ++pw)
        for (int64_t iy = 0; iy < gh; ++iy) {
          const float yy =
              y0 + static_cast<float>(ph) * bh + (static_cast<float>(iy) + 0.5f) * bh / static_cast<float>(gh);
          for (int64_t ix = 0; ix < gw; ++ix) {
            const float xx =
                x0 + static_cast<float>(pw) * bw + (static_cast<float>(ix) + 0.5f) * bw / static_cast<float>(gw);
            out.push_back(corners(h, w, yy, xx));
          }
        }
  }

  static Sample corners(int64_t h, int64_t w, float y, float x) {
    if (y < -1.f || y > static_cast<float>(h) || x < -1.f || x > static_cast<float>(w))
      return Sample{{0, 0, 0, 0}, {}, false};
    y = std::max(y, 0.f);
    x = std::max(x, 0.f);
    int64_t yl = static_cast<int64_t>(y), xl = static_cast<int64_t>(x), yh, xh;
    if (yl >= h - 1) {
      yh = yl = h - 1;
      y = static_cast<float>(yl);
    } else {
      yh = yl + 1;
    }
    if (xl >= w - 1) {
      xh = xl = w - 1;
      x = static_cast<float>(xl);
    } else {
      xh = xl + 1;
    }
    const float ly = y - static_cast<float>(yl), lx = x - static_cast<float>(xl), hy = 1.f - ly, hx = 1.f - lx;
    return Sample{{yl * w + xl, yl * w + xh, yh * w + xl, yh * w + xh}, {hy * hx, hy * lx, ly * hx, ly * lx}, true};
  }

  bool max_ = false;
  bool half_pixel_ = true;
  int64_t out_h_ = 1, out_w_ = 1, sampling_ = 0;
  float scale_ = 1.f;
};

}  // namespace

Status register_sampling(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_typed_def(reg, "GridSample", 16, DType::kUndefined, make_factory<GridSampleKernel>()));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "AffineGrid", 20, DType::kUndefined, make_factory<AffineGridKernel>()));
  return add_typed_def(reg, "RoiAlign", 10, DType::kUndefined, make_factory<RoiAlignKernel>());
}

}  // namespace streamline::ops::cpu
