#include "core/layout_convert.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

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
    case Layout::kChannelsLast:
      return (b * hw + p) * c + ch;
    case Layout::kBlocked8:
      return ((b * (c / 8) + ch / 8) * hw + p) * 8 + (ch & 7);
    case Layout::kBlocked16:
      return ((b * (c / 16) + ch / 16) * hw + p) * 16 + (ch & 15);
    default:
      return (b * c + ch) * hw + p;
  }
}

// Blocked <-> anything: one pass over the blocks of the blocked side (the smaller block when
// both are blocked), which is read or written contiguously. The common pairs have their own
// loops: blocked <-> channels-last moves runs of B contiguous elements and splits the pixels
// between threads (a split by block left threads idle where there are few blocks: 48 channels
// are three 16-channel blocks, two for one thread and one for the other), blocked <-> plain
// transposes B x 8 tiles so that both sides are touched in whole cache lines.
template <typename T, int B>
void blocked_from_nhwc(const T* s, T* d, int64_t n, int64_t c, int64_t hw, int threads) {
  const int64_t cb = c / B;
#pragma omp parallel for collapse(2) num_threads(threads) if (n * c * hw > 32768) schedule(static)
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < hw; ++p) {
      const T* sp = s + (b * hw + p) * c;
      T* dp = d + b * cb * hw * B + p * B;
      for (int64_t blk = 0; blk < cb; ++blk)
        for (int j = 0; j < B; ++j) dp[blk * hw * B + j] = sp[blk * B + j];
    }
}

template <typename T, int B>
void nhwc_from_blocked(const T* s, T* d, int64_t n, int64_t c, int64_t hw, int threads) {
  const int64_t cb = c / B;
#pragma omp parallel for collapse(2) num_threads(threads) if (n * c * hw > 32768) schedule(static)
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < hw; ++p) {
      const T* sp = s + b * cb * hw * B + p * B;
      T* dp = d + (b * hw + p) * c;
      for (int64_t blk = 0; blk < cb; ++blk)
        for (int j = 0; j < B; ++j) dp[blk * B + j] = sp[blk * hw * B + j];
    }
}

template <typename T, int B>
void blocked_from_plain(const T* s, T* d, int64_t n, int64_t c, int64_t hw, int threads) {
  const int64_t cb = c / B;
  constexpr int64_t kTile = 8;
#pragma omp parallel for collapse(2) num_threads(threads) if (n * c * hw > 32768)
  for (int64_t b = 0; b < n; ++b)
    for (int64_t blk = 0; blk < cb; ++blk) {
      const T* sp = s + (b * c + blk * B) * hw;
      T* dp = d + (b * cb + blk) * hw * B;
      int64_t p = 0;
      for (; p + kTile <= hw; p += kTile)
        for (int j = 0; j < B; ++j)
          for (int64_t q = 0; q < kTile; ++q) dp[(p + q) * B + j] = sp[j * hw + p + q];
      for (; p < hw; ++p)
        for (int j = 0; j < B; ++j) dp[p * B + j] = sp[j * hw + p];
    }
}

template <typename T, int B>
void plain_from_blocked(const T* s, T* d, int64_t n, int64_t c, int64_t hw, int threads) {
  const int64_t cb = c / B;
  constexpr int64_t kTile = 8;
#pragma omp parallel for collapse(2) num_threads(threads) if (n * c * hw > 32768)
  for (int64_t b = 0; b < n; ++b)
    for (int64_t blk = 0; blk < cb; ++blk) {
      const T* sp = s + (b * cb + blk) * hw * B;
      T* dp = d + (b * c + blk * B) * hw;
      int64_t p = 0;
      for (; p + kTile <= hw; p += kTile)
        for (int j = 0; j < B; ++j)
          for (int64_t q = 0; q < kTile; ++q) dp[j * hw + p + q] = sp[(p + q) * B + j];
      for (; p < hw; ++p)
        for (int j = 0; j < B; ++j) dp[j * hw + p] = sp[p * B + j];
    }
}

template <typename T>
void blocked_convert(const T* s, Layout sl, T* d, Layout dl, int64_t n, int64_t c, int64_t hw, int threads) {
  const int bs = layout_block(sl), bd = layout_block(dl);
  auto with_block = [&](int blk, auto f) {
    if (blk == 16)
      f(std::integral_constant<int, 16>{});
    else
      f(std::integral_constant<int, 8>{});
  };
  if (bd && sl == Layout::kChannelsLast)
    return with_block(bd, [&](auto b) { blocked_from_nhwc<T, decltype(b)::value>(s, d, n, c, hw, threads); });
  if (bs && dl == Layout::kChannelsLast)
    return with_block(bs, [&](auto b) { nhwc_from_blocked<T, decltype(b)::value>(s, d, n, c, hw, threads); });
  if (bd && sl == Layout::kPlain)
    return with_block(bd, [&](auto b) { blocked_from_plain<T, decltype(b)::value>(s, d, n, c, hw, threads); });
  if (bs && dl == Layout::kPlain)
    return with_block(bs, [&](auto b) { plain_from_blocked<T, decltype(b)::value>(s, d, n, c, hw, threads); });
  const int64_t blk_c = std::min(bs, bd);  // both blocked
  const int64_t cb = c / blk_c;
#pragma omp parallel for collapse(2) num_threads(threads) if (n * c * hw > 32768)
  for (int64_t b = 0; b < n; ++b)
    for (int64_t blk = 0; blk < cb; ++blk)
      for (int64_t p = 0; p < hw; ++p)
        for (int64_t j = 0; j < blk_c; ++j) {
          const int64_t ch = blk * blk_c + j;
          d[offset_of(dl, b, ch, p, c, hw)] = s[offset_of(sl, b, ch, p, c, hw)];
        }
}

template <typename T>
void convert_typed(const Tensor& src, Tensor& dst, int threads) {
  const Shape& s = src.shape();
  const int64_t n = s[0], c = s[1], hw = s[2] * s[3];
  if (is_blocked(src.layout()) || is_blocked(dst.layout()))
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
  for (Layout l : {src.layout(), dst.layout()})
    if (is_blocked(l) && src.shape()[1] % layout_block(l) != 0)
      return invalid_argument(std::string(layout_name(l)) + " needs channels divisible by " +
                              std::to_string(layout_block(l)) + ", got " + src.describe());
  // Same-size element types move as raw bits.
  switch (dtype_size(src.dtype())) {
    case 1:
      convert_typed<uint8_t>(src, dst, num_threads);
      break;
    case 2:
      convert_typed<uint16_t>(src, dst, num_threads);
      break;
    case 4:
      convert_typed<uint32_t>(src, dst, num_threads);
      break;
    case 8:
      convert_typed<uint64_t>(src, dst, num_threads);
      break;
    default:
      return unsupported(std::string("convert_layout: dtype ") + dtype_name(src.dtype()));
  }
  return ok_status();
}

Result<Tensor> to_layout(const Tensor& src, Layout layout, int num_threads) {
  if (src.layout() == layout) return src;
  // Every layout holds exactly the elements (blocked ones need whole blocks), so the copy writes
  // all of dst.
  Tensor dst = Tensor::for_overwrite(src.dtype(), src.shape(), layout);
  if (src.numel() > 0 && !dst.raw()) return resource_exhausted("cannot allocate " + dst.describe());
  SL_RETURN_IF_ERROR(convert_layout(src, dst, num_threads));
  return dst;
}

}  // namespace streamline
