// Resize's per-axis tables (data_resize_table.h). Coordinates follow the ONNX spec's
// coordinate_transformation_mode formulas; the antialias filters are the linear and cubic kernels
// evaluated at (tap - coordinate) * scale over the taps whose kernel argument is in the support.

#include "ops/cpu/data_resize_table.h"

#include <algorithm>
#include <cmath>

namespace streamline::ops::cpu {
namespace {

double original_coord(Coord c, double x, double scale, int64_t in, int64_t out, double roi0, double roi1) {
  switch (c) {
    case Coord::kHalfPixel:
      return (x + 0.5) / scale - 0.5;
    case Coord::kHalfPixelSymmetric: {
      const double adjustment = static_cast<double>(out) / (scale * static_cast<double>(in));
      const double center = static_cast<double>(in) / 2.0;
      return center * (1.0 - adjustment) + (x + 0.5) / scale - 0.5;
    }
    case Coord::kPytorchHalfPixel:
      return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case Coord::kAlignCorners: {
      const double len = scale * static_cast<double>(in);
      return len == 1.0 ? 0.0 : x * static_cast<double>(in - 1) / (len - 1.0);
    }
    case Coord::kAsymmetric:
      return x / scale;
    case Coord::kTfHalfPixelForNn:
      return (x + 0.5) / scale;
    case Coord::kTfCropAndResize:
      return out > 1 ? roi0 * static_cast<double>(in - 1) +
                           x * (roi1 - roi0) * static_cast<double>(in - 1) / static_cast<double>(out - 1)
                     : 0.5 * (roi0 + roi1) * static_cast<double>(in - 1);
  }
  return 0.0;
}

int64_t round_nearest(Round r, double x) {
  switch (r) {
    case Round::kPreferFloor:
      return static_cast<int64_t>(std::ceil(x - 0.5));
    case Round::kPreferCeil:
      return static_cast<int64_t>(std::floor(x + 0.5));
    case Round::kFloor:
      return static_cast<int64_t>(std::floor(x));
    case Round::kCeil:
      return static_cast<int64_t>(std::ceil(x));
  }
  return 0;
}

void cubic_coeffs(double r, double a, double* c) {
  const double r1 = r + 1.0, q = 1.0 - r, q1 = q + 1.0;
  c[0] = ((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a;
  c[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
  c[2] = ((a + 2) * q - (a + 3)) * q * q + 1;
  c[3] = ((a * q1 - 5 * a) * q1 + 8 * a) * q1 - 4 * a;
}

// The antialias filter's weight at kernel argument t (distance times scale).
double antialias_weight(Interp mode, double t, double a) {
  t = std::fabs(t);
  if (mode == Interp::kLinear) return std::max(0.0, 1.0 - t);
  if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
  return 0.0;
}

}  // namespace

AxisTable build_table(const ResizeAttrs& a, int64_t in, int64_t out, double scale, double roi0, double roi1) {
  AxisTable t;
  // Antialias widens the filter only when downscaling; its window starts `start` taps left of the
  // last input index below the coordinate.
  const double s = std::min(scale, 1.0);
  const bool wide = a.antialias && a.mode != Interp::kNearest && s < 1.0;
  const double support = a.mode == Interp::kLinear ? 1.0 : 2.0;
  const int64_t start = wide ? static_cast<int64_t>(std::floor(-support / s)) + 1 : 0;
  t.taps = a.mode == Interp::kNearest ? 1 : wide ? static_cast<int>(2 - 2 * start) : a.mode == Interp::kLinear ? 2 : 4;
  const int taps = t.taps;
  t.idx.resize(static_cast<size_t>(out * taps));
  t.w.resize(static_cast<size_t>(out * taps));
  t.outside.assign(static_cast<size_t>(out), 0);
  std::vector<int64_t> idx(static_cast<size_t>(taps));
  std::vector<double> c(static_cast<size_t>(taps));
  for (int64_t x = 0; x < out; ++x) {
    const double xo = original_coord(a.coord, static_cast<double>(x), scale, in, out, roi0, roi1);
    if (a.coord == Coord::kTfCropAndResize && (xo < 0.0 || xo > static_cast<double>(in - 1)))
      t.outside[static_cast<size_t>(x)] = 1;
    float* w = &t.w[static_cast<size_t>(x * taps)];
    std::fill(c.begin(), c.end(), 0.0);
    c[0] = 1.0;
    if (a.mode == Interp::kNearest) {
      idx[0] = round_nearest(a.round, xo);
    } else if (wide) {
      // The window's first tap: the last index strictly below xo, moved `start` left.
      const int64_t below = static_cast<int64_t>(std::ceil(xo)) - 1;
      double sum = 0.0;
      for (int k = 0; k < taps; ++k) {
        idx[static_cast<size_t>(k)] = below + start + k;
        c[static_cast<size_t>(k)] =
            antialias_weight(a.mode, (static_cast<double>(idx[static_cast<size_t>(k)]) - xo) * s, a.cubic_a);
        sum += c[static_cast<size_t>(k)];
      }
      for (double& v : c) v /= sum;
    } else {
      const double base = std::floor(xo);
      const double r = xo - base;
      const int64_t b = static_cast<int64_t>(base);
      if (a.mode == Interp::kLinear) {
        idx[0] = b;
        idx[1] = b + 1;
        c[0] = 1.0 - r;
        c[1] = r;
      } else {
        for (int k = 0; k < 4; ++k) idx[static_cast<size_t>(k)] = b - 1 + k;
        cubic_coeffs(r, a.cubic_a, c.data());
      }
    }
    if (a.mode != Interp::kNearest && a.exclude_outside) {
      double sum = 0.0;
      for (int k = 0; k < taps; ++k) {
        if (idx[static_cast<size_t>(k)] < 0 || idx[static_cast<size_t>(k)] >= in) c[static_cast<size_t>(k)] = 0.0;
        sum += c[static_cast<size_t>(k)];
      }
      if (sum != 0.0)
        for (double& v : c) v /= sum;
    }
    for (int k = 0; k < taps; ++k) {
      t.idx[static_cast<size_t>(x * taps + k)] =
          static_cast<int32_t>(std::clamp<int64_t>(idx[static_cast<size_t>(k)], 0, in - 1));
      w[k] = static_cast<float>(c[static_cast<size_t>(k)]);
    }
  }
  // Collapse to one tap when every output reads exactly one input with weight 1.
  bool single = taps == 1;
  if (!single) {
    single = true;
    for (int64_t x = 0; x < out && single; ++x) {
      int nonzero = 0;
      for (int k = 0; k < taps; ++k) {
        const float wk = t.w[static_cast<size_t>(x * taps + k)];
        if (wk != 0.f) {
          ++nonzero;
          if (wk != 1.f) single = false;
        }
      }
      if (nonzero != 1) single = false;
    }
    if (single) {
      std::vector<int32_t> idx1(static_cast<size_t>(out));
      for (int64_t x = 0; x < out; ++x)
        for (int k = 0; k < taps; ++k)
          if (t.w[static_cast<size_t>(x * taps + k)] != 0.f)
            idx1[static_cast<size_t>(x)] = t.idx[static_cast<size_t>(x * taps + k)];
      t.idx = std::move(idx1);
      t.w.assign(static_cast<size_t>(out), 1.f);
      t.taps = 1;
    }
  }
  t.any_outside = std::find(t.outside.begin(), t.outside.end(), 1) != t.outside.end();
  t.identity = t.taps == 1 && out == in;
  for (int64_t x = 0; x < out && t.identity; ++x)
    if (t.idx[static_cast<size_t>(x)] != x || t.outside[static_cast<size_t>(x)]) t.identity = false;
  return t;
}

}  // namespace streamline::ops::cpu
