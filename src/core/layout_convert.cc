#include "core/layout_convert.h"

#include <cstring>

namespace streamline {
namespace {

template <typename T>
void nchw_to_nhwc(const T* s, T* d, int64_t n, int64_t c, int64_t hw, int threads) {
#pragma omp parallel for collapse(2) num_threads(threads) if (n * c * hw > 32768)
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < hw; ++p) {
      const T* sp = s + b * c * hw + p;
      T* dp = d + (b * hw + p) * c;
      for (int64_t ch = 0; ch < c; ++ch) dp[ch] = sp[ch * hw];
    }
}

template <typename T>
void nhwc_to_nchw(const T* s, T* d, int64_t n, int64_t c, int64_t hw, int threads) {
#pragma omp parallel for collapse(2) num_threads(threads) if (n * c * hw > 32768)
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      const T* sp = s + b * c * hw + ch;
      T* dp = d + (b * c + ch) * hw;
      for (int64_t p = 0; p < hw; ++p) dp[p] = sp[p * c];
    }
}

// Element (b, ch, p) of an n x c x hw tensor sits at offset(layout, ...) in memory.
inline int64_t offset_of(Layout l, int64_t b, int64_t ch, int64_t p, int64_t c, int64_t hw) {
  switch (l) {
    case Layout::kChannelsLast: return (b * hw + p) * c + ch;
    case Layout::kBlocked8: return ((b * (c / 8) + ch / 8) * hw + p) * 8 + (ch & 7);
    default: return (b * c + ch) * hw + p;
  }
}

// Blocked <-> anything: one pass over 8-channel blocks; the blocked side is read or written
// contiguously.
template <typename T>
void blocked_convert(const T* s, Layout sl, T* d, Layout dl, int64_t n, int64_t c, int64_t hw, int threads) {
  const int64_t cb = c / 8;
#pragma omp parallel for collapse(2) num_threads(threads) if (n * c * hw > 32768)
  for (int64_t b = 0; b < n; ++b)
    for (int64_t blk = 0; blk < cb; ++blk)
      for (int64_t p = 0; p < hw; ++p)
        for (int64_t j = 0; j < 8; ++j) {
          const int64_t ch = blk * 8 + j;
          d[offset_of(dl, b, ch, p, c, hw)] = s[offset_of(sl, b, ch, p, c, hw)];
        }
}

template <typename T>
void convert_typed(const Tensor& src, Tensor& dst, int threads) {
  const Shape& s = src.shape();
  const int64_t n = s[0], c = s[1], hw = s[2] * s[3];
  if (src.layout() == Layout::kBlocked8 || dst.layout() == Layout::kBlocked8)
    blocked_convert(src.data<T>(), src.layout(), dst.data<T>(), dst.layout(), n, c, hw, threads);
  else if (dst.layout() == Layout::kChannelsLast)
    nchw_to_nhwc(src.data<T>(), dst.data<T>(), n, c, hw, threads);
  else
    nhwc_to_nchw(src.data<T>(), dst.data<T>(), n, c, hw, threads);
}

}  // namespace

Status convert_layout(const Tensor& src, Tensor& dst, int num_threads) {
  if (src.dtype() != dst.dtype() || src.shape() != dst.shape())
    return invalid_argument("convert_layout: " + src.describe() + " vs " + dst.describe());
  if (src.layout() == dst.layout()) {
    if (src.raw() != dst.raw() && src.nbytes()) std::memcpy(dst.raw(), src.raw(), src.nbytes());
    return ok_status();
  }
  if (src.shape().rank() != 4)
    return invalid_argument(std::string(layout_name(src.layout() == Layout::kPlain ? dst.layout() : src.layout())) +
                            " needs rank 4, got " + src.describe());
  if ((src.layout() == Layout::kBlocked8 || dst.layout() == Layout::kBlocked8) && src.shape()[1] % 8 != 0)
    return invalid_argument("nChw8c needs channels divisible by 8, got " + src.describe());
  // Same-size element types move as raw bits.
  switch (dtype_size(src.dtype())) {
    case 1: convert_typed<uint8_t>(src, dst, num_threads); break;
    case 2: convert_typed<uint16_t>(src, dst, num_threads); break;
    case 4: convert_typed<uint32_t>(src, dst, num_threads); break;
    case 8: convert_typed<uint64_t>(src, dst, num_threads); break;
    default: return unsupported(std::string("convert_layout: dtype ") + dtype_name(src.dtype()));
  }
  return ok_status();
}

Result<Tensor> to_layout(const Tensor& src, Layout layout) {
  if (src.layout() == layout) return src;
  Tensor dst = Tensor::empty(src.dtype(), src.shape(), layout);
  SL_RETURN_IF_ERROR(convert_layout(src, dst));
  return dst;
}

}  // namespace streamline
