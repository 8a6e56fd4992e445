// Reference GridSample and RoiAlign in double, one output element at a time.
//
// GridSample: the source coordinate is unnormalised, then padded (border clamps; reflection folds the
// coordinate back into range by repeated mirroring); samples outside the image read 0. Bicubic pads
// each of its 16 taps. RoiAlign averages (or takes the max of) a grid of bilinear samples per bin.

#include <cmath>

#include "ops/reference/ref_math_util.h"
#include "ops/reference/reference.h"

namespace streamline::ops::reference {
namespace {

using math_util::prefix;
using math_util::read_f;
using math_util::read_i;
using math_util::write_f;

// Mirrors x into [lo, hi] one reflection at a time.
double mirror(double x, double lo, double hi) {
  if (hi <= lo) return lo;
  while (x < lo || x > hi) x = x < lo ? 2 * lo - x : 2 * hi - x;
  return x;
}

class RefGridSampleKernel final : public Kernel {
 public:
  explicit RefGridSampleKernel(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const Shape& x = in[0].shape;
    const Shape& g = in[1].shape;
    if (x.rank() != 4 || g.rank() != 4) return unsupported(prefix(node_) + "4-D only");
    ReshapeResult rr;
    rr.outputs.push_back({in[0].dtype, Shape{x[0], x[1], g[1], g[2]}});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Tensor& grid = ctx.inputs[1];
    Tensor& y = ctx.outputs[0];
    const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
    const int64_t OH = grid.shape()[1], OW = grid.shape()[2];
    const std::string mode = node_.attr_string("mode", "bilinear"), pad = node_.attr_string("padding_mode", "zeros");
    const bool align = node_.attr_int("align_corners", 0) != 0;
    auto pixel = [&](int64_t n, int64_t c, int64_t iy, int64_t ix) {
      return iy < 0 || ix < 0 || iy >= H || ix >= W ? 0.0 : read_f(x, ((n * C + c) * H + iy) * W + ix);
    };
    auto padded = [&](double v, int64_t size) {
      if (pad == "border") return std::min(double(size - 1), std::max(0.0, v));
      if (pad == "reflection") {
        v = align ? mirror(v, 0, double(size - 1)) : mirror(v, -0.5, double(size) - 0.5);
        return std::min(double(size - 1), std::max(0.0, v));
      }
      return v;
    };
    auto unnorm = [&](double g, int64_t size) {
      return align ? (g + 1) / 2 * double(size - 1) : ((g + 1) * double(size) - 1) / 2;
    };
    auto cubic = [](double t) {
      const double a = -0.75;
      t = std::fabs(t);
      if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
      if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
      return 0.0;
    };
    for (int64_t n = 0; n < N; ++n)
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          const double gx = read_f(grid, ((n * OH + oy) * OW + ox) * 2),
                       gy = read_f(grid, ((n * OH + oy) * OW + ox) * 2 + 1);
          for (int64_t c = 0; c < C; ++c) {
            double v = 0;
            if (mode == "bicubic") {
              const double ix = unnorm(gx, W), iy = unnorm(gy, H);
              const double fx = std::floor(ix), fy = std::floor(iy);
              for (int r = -1; r <= 2; ++r)
                for (int k = -1; k <= 2; ++k) {
                  const double px = padded(fx + k, W), py = padded(fy + r, H);
                  v += cubic(ix - (fx + k)) * cubic(iy - (fy + r)) *
                       pixel(n, c, static_cast<int64_t>(std::floor(py)), static_cast<int64_t>(std::floor(px)));
                }
            } else {
              const double ix = padded(unnorm(gx, W), W), iy = padded(unnorm(gy, H), H);
              if (mode == "nearest") {
                v = pixel(n, c, static_cast<int64_t>(std::nearbyint(iy)), static_cast<int64_t>(std::nearbyint(ix)));
              } else {
                const double fx = std::floor(ix), fy = std::floor(iy);
                for (int dy = 0; dy <= 1; ++dy)
                  for (int dx = 0; dx <= 1; ++dx)
                    v += (1 - std::fabs(ix - (fx + dx))) * (1 - std::fabs(iy - (fy + dy))) *
                         pixel(n, c, static_cast<int64_t>(fy) + dy, static_cast<int64_t>(fx) + dx);
              }
            }
            write_f(y, ((n * C + c) * OH + oy) * OW + ox, v);
          }
        }
    return ok_status();
  }

 private:
  graph::Node node_;
};

class RefRoiAlignKernel final : public Kernel {
 public:
  explicit RefRoiAlignKernel(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    ReshapeResult rr;
    rr.outputs.push_back({in[0].dtype, Shape{in[1].shape[0], in[0].shape[1], node_.attr_int("output_height", 1),
                                             node_.attr_int("output_width", 1)}});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const int64_t C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
    const int64_t OH = y.shape()[2], OW = y.shape()[3];
    const bool half = node_.attr_string("coordinate_transformation_mode",
                                        node_.opset >= 16 ? "half_pixel" : "output_half_pixel") == "half_pixel";
    const bool is_max = node_.attr_string("mode", "avg") == "max";
    const int64_t ratio = node_.attr_int("sampling_ratio", 0);
    const double scale = node_.attr_float("spatial_scale", 1.f), off = half ? 0.5 : 0.0;
    auto sample = [&](int64_t n, int64_t c, double yy, double xx) {
      if (yy < -1 || yy > double(H) || xx < -1 || xx > double(W)) return 0.0;
      yy = std::min(std::max(yy, 0.0), double(H - 1));
      xx = std::min(std::max(xx, 0.0), double(W - 1));
      const int64_t y0 = static_cast<int64_t>(yy), x0 = static_cast<int64_t>(xx);
      const int64_t y1 = std::min(y0 + 1, H - 1), x1 = std::min(x0 + 1, W - 1);
      const double ly = yy - double(y0), lx = xx - double(x0);
      const double v[4] = {(1 - ly) * (1 - lx) * read_f(x, ((n * C + c) * H + y0) * W + x0),
                           (1 - ly) * lx * read_f(x, ((n * C + c) * H + y0) * W + x1),
                           ly * (1 - lx) * read_f(x, ((n * C + c) * H + y1) * W + x0),
                           ly * lx * read_f(x, ((n * C + c) * H + y1) * W + x1)};
      return is_max ? std::max(std::max(v[0], v[1]), std::max(v[2], v[3])) : v[0] + v[1] + v[2] + v[3];
    };
    for (int64_t r = 0; r < y.shape()[0]; ++r) {
      const int64_t n = read_i(ctx.inputs[2], r);
      const double x0 = read_f(ctx.inputs[1], r * 4) * scale - off, y0 = read_f(ctx.inputs[1], r * 4 + 1) * scale - off;
      double rw = read_f(ctx.inputs[1], r * 4 + 2) * scale - off - x0,
             rh = read_f(ctx.inputs[1], r * 4 + 3) * scale - off - y0;
      if (!half) {
        rw = std::max(rw, 1.0);
        rh = std::max(rh, 1.0);
      }
      const int64_t gh = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rh / double(OH)));
      const int64_t gw = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rw / double(OW)));
      for (int64_t c = 0; c < C; ++c)
        for (int64_t ph = 0; ph < OH; ++ph)
          for (int64_t pw = 0; pw < OW; ++pw) {
            double acc = is_max ? -INFINITY : 0.0;
            for (int64_t iy = 0; iy < gh; ++iy)
              for (int64_t ix = 0; ix < gw; ++ix) {
                const double yy = y0 + (double(ph) + (double(iy) + 0.5) / double(gh)) * rh / double(OH);
                const double xx = x0 + (double(pw) + (double(ix) + 0.5) / double(gw)) * rw / double(OW);
                const double v = sample(n, c, yy, xx);
                acc = is_max ? std::max(acc, v) : acc + v;
              }
            if (!is_max) acc /= double(std::max<int64_t>(gh * gw, 1));
            if (gh * gw == 0) acc = 0;
            write_f(y, ((r * C + c) * OH + ph) * OW + pw, acc);
          }
    }
    return ok_status();
  }

 private:
  graph::Node node_;
};

template <typename K>
KernelFactory factory() {
  return [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<K>(a.node));
  };
}

}  // namespace

Status register_sampling(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(math_util::add_ref(reg, "GridSample", 16, factory<RefGridSampleKernel>()));
  return math_util::add_ref(reg, "RoiAlign", 10, factory<RefRoiAlignKernel>());
}

}  // namespace streamline::ops::reference
