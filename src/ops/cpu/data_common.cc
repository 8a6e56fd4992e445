#include "ops/cpu/data_common.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/small_types.h"

namespace streamline::ops::cpu {

Status DataKernel::check_rank(size_t rank) const {
  if (rank > static_cast<size_t>(kMaxDataRank))
    return unsupported_error("rank " + std::to_string(rank) + " exceeds the supported maximum of " +
                             std::to_string(kMaxDataRank));
  return ok_status();
}

std::vector<int64_t> tensor_ints(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = load_int(t.dtype(), t.raw(), i);
  return v;
}

Result<std::vector<double>> constant_doubles(const TensorInfo& info, std::string_view what, const std::string& desc) {
  if (!info.value) return unsupported(desc + " needs a constant input '" + std::string(what) + "'");
  if (!dtype_supported(info.value->dtype()))
    return invalid_argument(desc + ": input '" + std::string(what) + "' has a non-numeric dtype");
  std::vector<double> v(static_cast<size_t>(info.value->numel()));
  for (int64_t i = 0; i < info.value->numel(); ++i) v[static_cast<size_t>(i)] = element_as_double(*info.value, i);
  return v;
}

namespace {

template <typename T>
T saturate(double v) {
  if (std::isnan(v)) return T(0);
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

template <typename T>
void store_as(double v, void* dst) {
  const T x = saturate<T>(v);
  std::memcpy(dst, &x, sizeof(T));
}

}  // namespace

void store_scalar(DType t, double v, void* dst) {
  switch (t) {
    case DType::kFloat32: {
      const float f = static_cast<float>(v);
      std::memcpy(dst, &f, 4);
      return;
    }
    case DType::kFloat64:
      std::memcpy(dst, &v, 8);
      return;
    case DType::kFloat16: {
      const uint16_t h = float_to_half(static_cast<float>(v));
      std::memcpy(dst, &h, 2);
      return;
    }
    case DType::kBFloat16: {
      const uint16_t h = float_to_bfloat16(static_cast<float>(v));
      std::memcpy(dst, &h, 2);
      return;
    }
    case DType::kInt64:
      store_as<int64_t>(v, dst);
      return;
    case DType::kInt32:
      store_as<int32_t>(v, dst);
      return;
    case DType::kInt16:
      store_as<int16_t>(v, dst);
      return;
    case DType::kInt8:
      store_as<int8_t>(v, dst);
      return;
    case DType::kUInt64:
      store_as<uint64_t>(v, dst);
      return;
    case DType::kUInt32:
      store_as<uint32_t>(v, dst);
      return;
    case DType::kUInt16:
      store_as<uint16_t>(v, dst);
      return;
    case DType::kUInt8:
      store_as<uint8_t>(v, dst);
      return;
    case DType::kBool: {
      const uint8_t b = v != 0.0 ? 1 : 0;
      std::memcpy(dst, &b, 1);
      return;
    }
    default:
      if (is_small_int(t)) {
        // Rounded and saturated into the small range, like the wider integers.
        const double r = std::isnan(v) ? 0.0 : std::nearbyint(v);
        const double c = std::min<double>(static_cast<double>(small_int_max(t)),
                                          std::max<double>(static_cast<double>(small_int_min(t)), r));
        *static_cast<uint8_t*>(dst) = int_to_small(t, static_cast<int64_t>(c), {});
      } else if (is_small_float(t)) {
        *static_cast<uint8_t*>(dst) = float_to_small(t, static_cast<float>(v), {});
      }
      return;
  }
}

int64_t load_int(DType t, const void* base, int64_t i) {
  switch (t) {
    case DType::kInt64:
      return static_cast<const int64_t*>(base)[i];
    case DType::kInt32:
      return static_cast<const int32_t*>(base)[i];
    case DType::kInt16:
      return static_cast<const int16_t*>(base)[i];
    case DType::kInt8:
      return static_cast<const int8_t*>(base)[i];
    case DType::kUInt64:
      return static_cast<int64_t>(static_cast<const uint64_t*>(base)[i]);
    case DType::kUInt32:
      return static_cast<const uint32_t*>(base)[i];
    case DType::kUInt16:
      return static_cast<const uint16_t*>(base)[i];
    case DType::kUInt8:
    case DType::kBool:
      return static_cast<const uint8_t*>(base)[i];
    case DType::kFloat32:
      return saturate<int64_t>(static_cast<const float*>(base)[i]);
    case DType::kFloat64:
      return saturate<int64_t>(static_cast<const double*>(base)[i]);
    case DType::kFloat16:
      return saturate<int64_t>(half_to_float(static_cast<const uint16_t*>(base)[i]));
    case DType::kBFloat16:
      return saturate<int64_t>(bfloat16_to_float(static_cast<const uint16_t*>(base)[i]));
    default:
      if (is_small_int(t)) return static_cast<int64_t>(small_to_float(t, static_cast<const uint8_t*>(base)[i]));
      if (is_small_float(t)) return saturate<int64_t>(small_to_float(t, static_cast<const uint8_t*>(base)[i]));
      return 0;
  }
}

void copy_bytes(void* dst, const void* src, size_t bytes, int threads) {
  if (dst == src || bytes == 0) return;
  const int64_t n = static_cast<int64_t>(bytes);
  if (threads <= 1 || n < 4 * kParallelBytes) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const int64_t chunks = threads;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b0 = n * c / chunks, b1 = n * (c + 1) / chunks;
    std::memcpy(static_cast<char*>(dst) + b0, static_cast<const char*>(src) + b0, static_cast<size_t>(b1 - b0));
  }
}

void fill_pattern(void* dst, const void* value, size_t esz, int64_t count) {
  if (count <= 0) return;
  auto* d = static_cast<uint8_t*>(dst);
  switch (esz) {
    case 1:
      std::memset(d, *static_cast<const uint8_t*>(value), static_cast<size_t>(count));
      return;
    case 2: {
      uint16_t v;
      std::memcpy(&v, value, 2);
      std::fill_n(reinterpret_cast<uint16_t*>(d), count, v);
      return;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, value, 4);
      std::fill_n(reinterpret_cast<uint32_t*>(d), count, v);
      return;
    }
    case 8: {
      uint64_t v;
      std::memcpy(&v, value, 8);
      std::fill_n(reinterpret_cast<uint64_t*>(d), count, v);
      return;
    }
    default:
      for (int64_t i = 0; i < count; ++i) std::memcpy(d + static_cast<size_t>(i) * esz, value, esz);
  }
}

std::vector<int64_t> dense_strides(std::span<const int64_t> dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

CopyPlan make_transpose_plan(size_t esz, std::span<const int64_t> in_dims, std::span<const int64_t> perm) {
  const std::vector<int64_t> in_strides = dense_strides(in_dims);
  int64_t dims[kMaxDataRank];
  int64_t strides[kMaxDataRank];
  for (size_t k = 0; k < perm.size(); ++k) {
    dims[k] = in_dims[static_cast<size_t>(perm[k])];
    strides[k] = in_strides[static_cast<size_t>(perm[k])];
  }
  return make_copy_plan(esz, {dims, perm.size()}, {strides, perm.size()}, 0);
}

namespace {

template <typename T>
void gather_row(const uint8_t* src, int64_t stride, int64_t n, uint8_t* dst) {
  const T* s = reinterpret_cast<const T*>(src);
  T* d = reinterpret_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = s[i * stride];
}

void copy_row(const uint8_t* src, int64_t stride, int64_t n, size_t esz, uint8_t* dst) {
  if (stride == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * esz);
    return;
  }
  if (stride == 0) {
    fill_pattern(dst, src, esz, n);
    return;
  }
  switch (esz) {
    case 1:
      gather_row<uint8_t>(src, stride, n, dst);
      return;
    case 2:
      gather_row<uint16_t>(src, stride, n, dst);
      return;
    case 4:
      gather_row<uint32_t>(src, stride, n, dst);
      return;
    case 8:
      gather_row<uint64_t>(src, stride, n, dst);
      return;
    default:
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(dst + static_cast<size_t>(i) * esz,
                    src + static_cast<ptrdiff_t>(i * stride) * static_cast<ptrdiff_t>(esz), esz);
  }
}

// Rows path: every output row (last dim) is one strided gather from the source.
void run_rows(const CopyPlan& p, const uint8_t* src, uint8_t* dst, int threads) {
  const int last = p.rank - 1;
  const int64_t n = p.dims[last];
  const int64_t st = p.strides[last];
  const int64_t rows = p.numel / n;
  const size_t esz = p.esz;
  const bool big = threads > 1 && p.numel * static_cast<int64_t>(esz) >= kParallelBytes && rows > 1;
  const int64_t chunks = big ? std::min<int64_t>(rows, int64_t{threads} * 4) : 1;
#pragma omp parallel for num_threads(omp_threads(threads)) if (big) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t r0 = rows * c / chunks, r1 = rows * (c + 1) / chunks;
    int64_t idx[kMaxDataRank];
    int64_t off = 0;
    int64_t rem = r0;
    for (int k = last - 1; k >= 0; --k) {
      idx[k] = rem % p.dims[k];
      rem /= p.dims[k];
      off += idx[k] * p.strides[k];
    }
    for (int64_t r = r0; r < r1; ++r) {
      copy_row(src + off * static_cast<int64_t>(esz), st, n, esz, dst + r * n * static_cast<int64_t>(esz));
      for (int k = last - 1; k >= 0; --k) {
        off += p.strides[k];
        if (++idx[k] < p.dims[k]) break;
        off -= idx[k] * p.strides[k];
        idx[k] = 0;
      }
    }
  }
}

constexpr int64_t kTile = 32;

// dst[a * dst_stride_a + b] = src[a + b * src_stride_b] over an na x nb tile. Full tiles use
// compile-time bounds, which lets the compiler unroll and vectorise them.
template <typename T>
void transpose_tile(const T* src, int64_t src_stride_b, T* dst, int64_t dst_stride_a, int64_t na, int64_t nb) {
  if (na == kTile && nb == kTile) {
    for (int64_t a = 0; a < kTile; ++a)
      for (int64_t b = 0; b < kTile; ++b) dst[a * dst_stride_a + b] = src[a + b * src_stride_b];
    return;
  }
  for (int64_t a = 0; a < na; ++a)
    for (int64_t b = 0; b < nb; ++b) dst[a * dst_stride_a + b] = src[a + b * src_stride_b];
}

template <typename T>
void run_tiled_t(const CopyPlan& p, int j, const uint8_t* src_bytes, uint8_t* dst_bytes, int threads) {
  const T* src = reinterpret_cast<const T*>(src_bytes);
  T* dst = reinterpret_cast<T*>(dst_bytes);
  const int last = p.rank - 1;
  int64_t dst_strides[kMaxDataRank];
  dst_strides[last] = 1;
  for (int k = last; k > 0; --k) dst_strides[k - 1] = dst_strides[k] * p.dims[k];
  // Batch dims: all but j and last, in order.
  int bdims[kMaxDataRank];
  int nbd = 0;
  for (int k = 0; k < last; ++k)
    if (k != j) bdims[nbd++] = k;
  const int64_t na = p.dims[j], nb = p.dims[last];
  const int64_t batches = p.numel / (na * nb);
  const int64_t a_tiles = (na + kTile - 1) / kTile;
  const int64_t work = batches * a_tiles;
  const bool big = threads > 1 && p.numel * static_cast<int64_t>(sizeof(T)) >= kParallelBytes && work > 1;
  const int64_t sb = p.strides[last];
  const int64_t da = dst_strides[j];
#pragma omp parallel for num_threads(omp_threads(threads)) if (big) schedule(static)
  for (int64_t w = 0; w < work; ++w) {
    int64_t rem = w / a_tiles;
    const int64_t at = w % a_tiles;
    int64_t soff = 0, doff = 0;
    for (int q = nbd - 1; q >= 0; --q) {
      const int k = bdims[q];
      const int64_t i = rem % p.dims[k];
      rem /= p.dims[k];
      soff += i * p.strides[k];
      doff += i * dst_strides[k];
    }
    const int64_t a0 = at * kTile, a1 = std::min(na, a0 + kTile);
    for (int64_t b0 = 0; b0 < nb; b0 += kTile) {
      const int64_t b1 = std::min(nb, b0 + kTile);
      transpose_tile<T>(src + soff + a0 + b0 * sb, sb, dst + doff + a0 * da + b0, da, a1 - a0, b1 - b0);
    }
  }
}

// Tiled path: output dim j reads the source contiguously while the last output dim is strided, so
// copy 32x32 tiles to keep both sides in cache.
bool try_run_tiled(const CopyPlan& p, const uint8_t* src, uint8_t* dst, int threads) {
  if (p.rank < 2) return false;
  const int last = p.rank - 1;
  if (p.strides[last] == 1 || p.strides[last] == 0 || p.dims[last] < 4) return false;
  int j = -1;
  for (int k = 0; k < last; ++k)
    if (p.strides[k] == 1) j = k;
  if (j < 0 || p.dims[j] < 4) return false;
  switch (p.esz) {
    case 1:
      run_tiled_t<uint8_t>(p, j, src, dst, threads);
      return true;
    case 2:
      run_tiled_t<uint16_t>(p, j, src, dst, threads);
      return true;
    case 4:
      run_tiled_t<uint32_t>(p, j, src, dst, threads);
      return true;
    case 8:
      run_tiled_t<uint64_t>(p, j, src, dst, threads);
      return true;
    default:
      return false;
  }
}

}  // namespace

void run_copy_plan(const CopyPlan& p, const void* src_v, void* dst_v, int threads) {
  if (p.numel == 0) return;
  const auto* src = static_cast<const uint8_t*>(src_v) + p.offset * static_cast<int64_t>(p.esz);
  auto* dst = static_cast<uint8_t*>(dst_v);
  if (p.rank == 0) {
    std::memcpy(dst, src, p.esz);
    return;
  }
  if (p.rank == 1 && p.strides[0] == 1) {
    copy_bytes(dst, src, static_cast<size_t>(p.numel) * p.esz, threads);
    return;
  }
  if (try_run_tiled(p, src, dst, threads)) return;
  run_rows(p, src, dst, threads);
}

bool is_integer_dtype(DType t) {
  switch (t) {
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
    case DType::kUInt64:
      return true;
    default:
      return false;
  }
}

}  // namespace streamline::ops::cpu
