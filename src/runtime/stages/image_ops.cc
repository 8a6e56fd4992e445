// Resize, crop, normalise, layout, softmax and top-k on host tensors.

#include "runtime/stages/image_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

namespace streamline::runtime {
namespace {

// Largest output side a resize or crop may ask for.
constexpr int64_t kMaxSide = 1 << 16;

Status check_hwc(const Tensor& t, bool any_dtype) {
  if (!t.defined() || t.shape().rank() != 3)
    return invalid_argument("expected an image [H, W, C], got " +
                            (t.defined() ? t.describe() : std::string("nothing")));
  if (!any_dtype && t.dtype() != DType::kUInt8 && t.dtype() != DType::kFloat32)
    return invalid_argument("expected a uint8 or float32 image, got " + t.describe());
  if (any_dtype && dtype_size(t.dtype()) == 0) return invalid_argument("unsupported image dtype: " + t.describe());
  const Shape& s = t.shape();
  if (s[0] < 1 || s[1] < 1 || s[2] < 1) return invalid_argument("empty image: " + t.describe());
  if (t.layout() != Layout::kPlain || !t.raw()) return invalid_argument("image has no plain data: " + t.describe());
  return ok_status();
}

// Per output coordinate: the two source coordinates and the weight of the second.
struct Taps {
  std::vector<int64_t> lo, hi;
  std::vector<float> frac;
};

Taps make_taps(int64_t in, int64_t out) {
  Taps t;
  t.lo.resize(static_cast<size_t>(out));
  t.hi.resize(static_cast<size_t>(out));
  t.frac.resize(static_cast<size_t>(out));
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (int64_t o = 0; o < out; ++o) {
    const double src = std::max(0.0, (static_cast<double>(o) + 0.5) * scale - 0.5);
    const int64_t lo = std::min(static_cast<int64_t>(src), in - 1);
    const size_t i = static_cast<size_t>(o);
    t.lo[i] = lo;
    t.hi[i] = std::min(lo + 1, in - 1);
    t.frac[i] = static_cast<float>(src - static_cast<double>(lo));
  }
  return t;
}

template <typename T>
T store(float v) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    return static_cast<uint8_t>(std::clamp(v, 0.f, 255.f) + 0.5f);
  } else {
    return v;
  }
}

template <typename T>
void resize_impl(const T* src, T* dst, int64_t in_h, int64_t in_w, int64_t c, int64_t out_h, int64_t out_w) {
  (void)in_h;
  const Taps ys = make_taps(in_h, out_h), xs = make_taps(in_w, out_w);
  const int64_t row = in_w * c;
  for (int64_t y = 0; y < out_h; ++y) {
    const size_t yi = static_cast<size_t>(y);
    const T* r0 = src + ys.lo[yi] * row;
    const T* r1 = src + ys.hi[yi] * row;
    const float fy = ys.frac[yi];
    T* out = dst + y * out_w * c;
    for (int64_t x = 0; x < out_w; ++x) {
      const size_t xi = static_cast<size_t>(x);
      const int64_t a = xs.lo[xi] * c, b = xs.hi[xi] * c;
      const float fx = xs.frac[xi];
      for (int64_t k = 0; k < c; ++k) {
        const float top =
            static_cast<float>(r0[a + k]) + fx * (static_cast<float>(r0[b + k]) - static_cast<float>(r0[a + k]));
        const float bot =
            static_cast<float>(r1[a + k]) + fx * (static_cast<float>(r1[b + k]) - static_cast<float>(r1[a + k]));
        out[x * c + k] = store<T>(top + fy * (bot - top));
      }
    }
  }
}

template <typename T>
void normalize_impl(const T* src, float* dst, int64_t pixels, int64_t c, const std::vector<float>& mean,
                    const std::vector<float>& inv_std, float scale) {
  for (int64_t p = 0; p < pixels; ++p)
    for (int64_t k = 0; k < c; ++k) {
      const size_t ki = static_cast<size_t>(k);
      dst[p * c + k] = (static_cast<float>(src[p * c + k]) * scale - mean[ki]) * inv_std[ki];
    }
}

template <typename T>
void to_planar(const T* src, T* dst, int64_t hw, int64_t c) {
  for (int64_t k = 0; k < c; ++k)
    for (int64_t p = 0; p < hw; ++p) dst[k * hw + p] = src[p * c + k];
}

// NaN sorts after every number; ties by lower index.
bool ranks_before(float a, int64_t ia, float b, int64_t ib) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na != nb) return nb;
  if (!na && a != b) return a > b;
  return ia < ib;
}

}  // namespace

Result<Tensor> resize_bilinear(const Tensor& hwc, int64_t out_h, int64_t out_w) {
  SL_RETURN_IF_ERROR(check_hwc(hwc, false));
  if (out_h < 1 || out_w < 1 || out_h > kMaxSide || out_w > kMaxSide)
    return invalid_argument("resize to " + std::to_string(out_h) + "x" + std::to_string(out_w) + " is out of range");
  const Shape& s = hwc.shape();
  Tensor out = Tensor::empty(hwc.dtype(), Shape{out_h, out_w, s[2]});
  if (hwc.dtype() == DType::kUInt8) {
    resize_impl(hwc.data<uint8_t>(), out.data<uint8_t>(), s[0], s[1], s[2], out_h, out_w);
  } else {
    resize_impl(hwc.data<float>(), out.data<float>(), s[0], s[1], s[2], out_h, out_w);
  }
  return out;
}

Result<Tensor> resize_shorter_side(const Tensor& hwc, int64_t shorter) {
  SL_RETURN_IF_ERROR(check_hwc(hwc, false));
  if (shorter < 1 || shorter > kMaxSide)
    return invalid_argument("shorter side " + std::to_string(shorter) + " is out of range");
  const int64_t h = hwc.shape()[0], w = hwc.shape()[1];
  const int64_t longer = std::max<int64_t>(1, std::min(kMaxSide, shorter * std::max(h, w) / std::min(h, w)));
  return h <= w ? resize_bilinear(hwc, shorter, longer) : resize_bilinear(hwc, longer, shorter);
}

Result<Tensor> center_crop(const Tensor& hwc, int64_t h, int64_t w) {
  SL_RETURN_IF_ERROR(check_hwc(hwc, true));
  const Shape& s = hwc.shape();
  if (h < 1 || w < 1 || h > s[0] || w > s[1])
    return invalid_argument("cannot crop " + std::to_string(h) + "x" + std::to_string(w) + " from " + hwc.describe());
  const int64_t top = std::llround(static_cast<double>(s[0] - h) / 2.0);
  const int64_t left = std::llround(static_cast<double>(s[1] - w) / 2.0);
  const size_t px = static_cast<size_t>(s[2]) * dtype_size(hwc.dtype());
  Tensor out = Tensor::empty(hwc.dtype(), Shape{h, w, s[2]});
  const auto* src = static_cast<const uint8_t*>(hwc.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t y = 0; y < h; ++y)
    std::memcpy(dst + static_cast<size_t>(y * w) * px, src + static_cast<size_t>((top + y) * s[1] + left) * px,
                static_cast<size_t>(w) * px);
  return out;
}

Result<Tensor> normalize_hwc(const Tensor& hwc, std::span<const float> mean, std::span<const float> std, float scale) {
  SL_RETURN_IF_ERROR(check_hwc(hwc, false));
  const int64_t c = hwc.shape()[2];
  const auto fits = [c](size_t n) { return n == 1 || static_cast<int64_t>(n) == c; };
  if (!fits(mean.size()) || !fits(std.size()))
    return invalid_argument("mean and std need 1 or " + std::to_string(c) + " values, got " +
                            std::to_string(mean.size()) + " and " + std::to_string(std.size()));
  if (!std::isfinite(scale)) return invalid_argument("scale must be finite");
  std::vector<float> m(static_cast<size_t>(c)), inv(static_cast<size_t>(c));
  for (size_t k = 0; k < m.size(); ++k) {
    m[k] = mean[mean.size() == 1 ? 0 : k];
    const float sd = std[std.size() == 1 ? 0 : k];
    if (sd == 0.f || !std::isfinite(sd) || !std::isfinite(m[k]))
      return invalid_argument("std must be finite and non-zero, mean finite");
    inv[k] = 1.f / sd;
  }
  Tensor out = Tensor::empty(DType::kFloat32, hwc.shape());
  const int64_t pixels = hwc.shape()[0] * hwc.shape()[1];
  if (hwc.dtype() == DType::kUInt8) {
    normalize_impl(hwc.data<uint8_t>(), out.data<float>(), pixels, c, m, inv, scale);
  } else {
    normalize_impl(hwc.data<float>(), out.data<float>(), pixels, c, m, inv, scale);
  }
  return out;
}

Result<Tensor> hwc_to_nchw(const Tensor& hwc) {
  SL_RETURN_IF_ERROR(check_hwc(hwc, true));
  const Shape& s = hwc.shape();
  Tensor out = Tensor::empty(hwc.dtype(), Shape{1, s[2], s[0], s[1]});
  const int64_t hw = s[0] * s[1];
  switch (dtype_size(hwc.dtype())) {
    case 1:
      to_planar(static_cast<const uint8_t*>(hwc.raw()), static_cast<uint8_t*>(out.raw()), hw, s[2]);
      break;
    case 2:
      to_planar(static_cast<const uint16_t*>(hwc.raw()), static_cast<uint16_t*>(out.raw()), hw, s[2]);
      break;
    case 4:
      to_planar(static_cast<const uint32_t*>(hwc.raw()), static_cast<uint32_t*>(out.raw()), hw, s[2]);
      break;
    case 8:
      to_planar(static_cast<const uint64_t*>(hwc.raw()), static_cast<uint64_t*>(out.raw()), hw, s[2]);
      break;
    default:
      return invalid_argument("unsupported image dtype: " + hwc.describe());
  }
  return out;
}

Result<Tensor> softmax_last_axis(const Tensor& logits) {
  if (logits.dtype() != DType::kFloat32 || logits.shape().rank() < 1 || logits.shape().back() < 1 || !logits.raw())
    return invalid_argument("softmax expects float32 [..., K] with K >= 1, got " + logits.describe());
  const int64_t k = logits.shape().back();
  const int64_t rows = logits.numel() / k;
  Tensor out = Tensor::empty(DType::kFloat32, logits.shape());
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits.data<float>() + r * k;
    float* y = out.data<float>() + r * k;
    const float mx = *std::max_element(x, x + k);
    double sum = 0;
    for (int64_t i = 0; i < k; ++i) {
      y[i] = std::exp(x[i] - mx);
      sum += y[i];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < k; ++i) y[i] *= inv;
  }
  return out;
}

Result<TopK> top_k_last_axis(const Tensor& scores, int k) {
  const size_t rank = scores.shape().rank();
  if (scores.dtype() != DType::kFloat32 || (rank != 1 && rank != 2) || scores.shape().back() < 1 || !scores.raw())
    return invalid_argument("top-k expects float32 [N, K] or [K] with K >= 1, got " + scores.describe());
  if (k < 1) return invalid_argument("k must be >= 1, got " + std::to_string(k));
  const int64_t classes = scores.shape().back();
  const int64_t rows = rank == 2 ? scores.shape()[0] : 1;
  const int64_t kk = std::min<int64_t>(k, classes);
  const Shape out_shape = rank == 2 ? Shape{rows, kk} : Shape{kk};
  TopK r{Tensor::empty(DType::kInt64, out_shape), Tensor::empty(DType::kFloat32, out_shape)};
  std::vector<int64_t> order(static_cast<size_t>(classes));
  for (int64_t row = 0; row < rows; ++row) {
    const float* x = scores.data<float>() + row * classes;
    std::iota(order.begin(), order.end(), int64_t{0});
    std::partial_sort(order.begin(), order.begin() + kk, order.end(),
                      [x](int64_t a, int64_t b) { return ranks_before(x[a], a, x[b], b); });
    for (int64_t i = 0; i < kk; ++i) {
      r.indices.data<int64_t>()[row * kk + i] = order[static_cast<size_t>(i)];
      r.scores.data<float>()[row * kk + i] = x[order[static_cast<size_t>(i)]];
    }
  }
  return r;
}

}  // namespace streamline::runtime
