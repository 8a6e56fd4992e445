#pragma once
// Per-axis interpolation tables of Resize (data_resize.cc): for each output coordinate the input
// indices it reads and their weights.
//
//   AxisTable t = build_table(attrs, /*in=*/8, /*out=*/4, /*scale=*/0.5, roi0, roi1);
//   // t.taps taps per output: t.idx[o * t.taps + k] (clamped), t.w[o * t.taps + k]
//
// Nearest reads 1 tap, linear 2, cubic 4. With antialias (opset 18) a downscaling linear or cubic
// filter is stretched by 1 / scale: linear reads 2 * ceil(1 / scale) taps weighted by the triangle
// 1 - |d * scale|, cubic 2 * ceil(2 / scale) taps weighted by the cubic kernel at d * scale (d the
// tap's distance from the sampled coordinate), normalised to sum 1. Taps outside the input repeat
// the edge, or with exclude_outside are dropped and the rest renormalised.

#include <cstdint>
#include <vector>

namespace streamline::ops::cpu {

enum class Interp { kNearest, kLinear, kCubic };
enum class Coord {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize
};
enum class Round { kPreferFloor, kPreferCeil, kFloor, kCeil };
enum class AspectPolicy { kStretch, kNotLarger, kNotSmaller };

// Resize's attributes, checked.
struct ResizeAttrs {
  Interp mode = Interp::kNearest;
  Coord coord = Coord::kHalfPixel;
  Round round = Round::kPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
  AspectPolicy policy = AspectPolicy::kStretch;
  bool antialias = false;  // opset 18: widen downscaling linear/cubic filters
  std::vector<int64_t> axes;
};

struct AxisTable {
  int taps = 1;
  std::vector<int32_t> idx;      // out * taps input indices, clamped into [0, in)
  std::vector<float> w;          // out * taps weights
  std::vector<uint8_t> outside;  // out flags: tf_crop_and_resize sample outside the input
  bool identity = false;         // out == in and output x reads input x
  bool any_outside = false;      // some outside flag is set
};

// The table of one axis of `in` input and `out` output elements (`scale` = out / in, or the given
// scale; roi0/roi1 for tf_crop_and_resize).
AxisTable build_table(const ResizeAttrs& a, int64_t in, int64_t out, double scale, double roi0, double roi1);

}  // namespace streamline::ops::cpu
