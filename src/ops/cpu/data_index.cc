// Indexing kernels: Slice, Gather, GatherElements, GatherND, ScatterND, ScatterElements (with the
// add/mul/max/min reductions), the deprecated Scatter and TensorScatter (opset 24, the KV-cache
// update). Indices are int32 or int64; negative indices count from the end; an index out of range
// is an InvalidArgument from run().
//
// TensorScatter: present = past_cache with, per batch entry b, `update` written along `axis` from
// write_indices[b] (0 without it); mode "circular" wraps the position modulo the cache length.

#include <algorithm>
#include <atomic>
#include <cstring>

#include "ops/cpu/data_common.h"
#include "ops/cpu/data_kernels.h"
#include "ops/cpu/math_common.h"
#include "ops/op_params.h"

namespace streamline::ops::cpu {
namespace {

// Copies n bytes where n is usually one small element.
inline void copy_elem(uint8_t* dst, const uint8_t* src, int64_t n) {
  switch (n) {
    case 4:
      std::memcpy(dst, src, 4);
      return;
    case 8:
      std::memcpy(dst, src, 8);
      return;
    case 2:
      std::memcpy(dst, src, 2);
      return;
    case 1:
      *dst = *src;
      return;
    default:
      std::memcpy(dst, src, static_cast<size_t>(n));
  }
}

inline int64_t index_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i];
}

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

// The scatter `reduction` attribute: add/mul from opset 16, max/min from opset 18.
bool parse_reduction(const graph::Node& n, Reduction* r) {
  const std::string s = n.attr_string("reduction", "none");
  if (s == "none")
    *r = Reduction::kNone;
  else if (s == "add" && n.opset >= 16)
    *r = Reduction::kAdd;
  else if (s == "mul" && n.opset >= 16)
    *r = Reduction::kMul;
  else if (s == "max" && n.opset >= 18)
    *r = Reduction::kMax;
  else if (s == "min" && n.opset >= 18)
    *r = Reduction::kMin;
  else
    return false;
  return true;
}

template <typename T>
T combine(Reduction r, T a, T b) {
  switch (r) {
    case Reduction::kAdd:
      return static_cast<T>(a + b);
    case Reduction::kMul:
      return static_cast<T>(a * b);
    case Reduction::kMax:
      return std::max(a, b);
    case Reduction::kMin:
      return std::min(a, b);
    case Reduction::kNone:
      break;
  }
  return b;
}

template <typename T>
void combine_n(Reduction r, uint8_t* dst, const uint8_t* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T a, b;
    std::memcpy(&a, dst + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    std::memcpy(&b, src + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    a = combine(r, a, b);
    std::memcpy(dst + i * static_cast<int64_t>(sizeof(T)), &a, sizeof(T));
  }
}

template <float (*kToFloat)(uint16_t), uint16_t (*kFromFloat)(float)>
void combine_half(Reduction r, uint8_t* dst, const uint8_t* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t a, b;
    std::memcpy(&a, dst + 2 * i, 2);
    std::memcpy(&b, src + 2 * i, 2);
    a = kFromFloat(combine(r, kToFloat(a), kToFloat(b)));
    std::memcpy(dst + 2 * i, &a, 2);
  }
}

// dst[i] = reduction(dst[i], src[i]) for n elements of dtype t (plain copy for kNone).
void scatter_write(DType t, Reduction r, uint8_t* dst, const uint8_t* src, int64_t n) {
  if (r == Reduction::kNone) {
    std::memcpy(dst, src, static_cast<size_t>(n) * dtype_size(t));
    return;
  }
  switch (t) {
    case DType::kFloat32:
      combine_n<float>(r, dst, src, n);
      return;
    case DType::kFloat64:
      combine_n<double>(r, dst, src, n);
      return;
    case DType::kInt64:
      combine_n<int64_t>(r, dst, src, n);
      return;
    case DType::kInt32:
      combine_n<int32_t>(r, dst, src, n);
      return;
    case DType::kInt16:
      combine_n<int16_t>(r, dst, src, n);
      return;
    case DType::kInt8:
      combine_n<int8_t>(r, dst, src, n);
      return;
    case DType::kUInt64:
      combine_n<uint64_t>(r, dst, src, n);
      return;
    case DType::kUInt32:
      combine_n<uint32_t>(r, dst, src, n);
      return;
    case DType::kUInt16:
      combine_n<uint16_t>(r, dst, src, n);
      return;
    case DType::kUInt8:
      combine_n<uint8_t>(r, dst, src, n);
      return;
    case DType::kFloat16:
      combine_half<half_to_float, float_to_half>(r, dst, src, n);
      return;
    case DType::kBFloat16:
      combine_half<bfloat16_to_float, float_to_bfloat16>(r, dst, src, n);
      return;
    case DType::kBool:
      for (int64_t i = 0; i < n; ++i) {
        const bool a = dst[i] != 0, b = src[i] != 0;
        dst[i] = (r == Reduction::kAdd || r == Reduction::kMax) ? (a || b) : (a && b);
      }
      return;
    default:
      return;
  }
}

Status index_error(int64_t v, int64_t dim) {
  return invalid_argument("index " + std::to_string(v) + " is out of range [" + std::to_string(-dim) + ", " +
                          std::to_string(dim - 1) + "]");
}

class SliceKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<SliceKernel>(a.node);
    if (a.node.opset < 10 && (!a.node.has_attr("starts") || !a.node.has_attr("ends")))
      return k->invalid("missing 'starts' or 'ends'");
    k->attrs_ = read_slice_attrs(a.node);
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("missing input 'data'");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, desc_));
    SL_RETURN_IF_ERROR(check_rank(in[0].shape.rank()));
    SL_ASSIGN_OR_RETURN(SliceGeometry g, slice_geometry(attrs_, opset_, in, desc_));
    ReshapeResult r;
    r.outputs.push_back({in[0].dtype, g.out, Layout::kPlain});
    r.state = std::make_shared<CopyPlan>(make_copy_plan(dtype_size(in[0].dtype), g.out.dims(), g.strides, g.offset));
    return r;
  }

  Status run(const RunContext& ctx) const override {
    run_copy_plan(*static_cast<const CopyPlan*>(ctx.state), ctx.inputs[0].raw(), ctx.outputs[0].raw(), ctx.num_threads);
    return ok_status();
  }

 private:
  SliceAttrs attrs_;
};

class GatherKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<GatherKernel>(a.node);
    k->axis_ = a.node.attr_int("axis", 0);
    return std::unique_ptr<Kernel>(std::move(k));
  }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    SL_ASSIGN_OR_RETURN(GatherShapes g, gather_shape(in, axis_, desc_));
    ReshapeResult r;
    r.outputs.push_back({in[0].dtype, g.y, Layout::kPlain});
    return r;
  }
  Status run(const RunContext& ctx) const override {
    const Tensor& data = ctx.inputs[0];
    const Tensor& idx = ctx.inputs[1];
    const Shape& s = data.shape();
    int64_t axis = 0;
    if (!normalize_axis(axis_, static_cast<int64_t>(s.rank()), &axis)) return invalid("axis out of range");
    const int64_t dim = s[static_cast<size_t>(axis)];
    int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(data.dtype()));
    for (int64_t i = 0; i < axis; ++i) outer *= s[static_cast<size_t>(i)];
    for (size_t i = static_cast<size_t>(axis) + 1; i < s.rank(); ++i) inner *= s[i];
    const int64_t n = idx.numel();
    for (int64_t j = 0; j < n; ++j) {
      const int64_t v = index_at(idx, j);
      if (v < -dim || v >= dim) return index_error(v, dim);
    }
    const auto* src = data.data<uint8_t>();
    auto* dst = ctx.outputs[0].data<uint8_t>();
    const int64_t work = outer * n;
    const bool big = ctx.num_threads > 1 && work * inner >= kParallelBytes;
#pragma omp parallel for num_threads(omp_threads(ctx.num_threads)) if (big) schedule(static)
    for (int64_t w = 0; w < work; ++w) {
      const int64_t o = w / n;
      int64_t v = index_at(idx, w % n);
      if (v < 0) v += dim;
      copy_elem(dst + w * inner, src + (o * dim + v) * inner, inner);
    }
    return ok_status();
  }

 private:
  int64_t axis_ = 0;
};

// GatherElements and ScatterElements (and Scatter): one index per element along `axis`.
class ElementsKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a, bool scatter) {
    auto k = std::make_unique<ElementsKernel>(a.node);
    k->scatter_ = scatter;
    k->axis_ = a.node.attr_int("axis", 0);
    if (scatter && !parse_reduction(a.node, &k->reduction_))
      return k->invalid("unknown reduction '" + a.node.attr_string("reduction", "") + "'");
    return std::unique_ptr<Kernel>(std::move(k));
  }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const size_t need = scatter_ ? 3 : 2;
    if (in.size() < need) return invalid("missing inputs");
    for (size_t i = 0; i < need; ++i)
      if (!in[i].present()) return invalid("input " + std::to_string(i) + " is missing");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, desc_));
    SL_RETURN_IF_ERROR(check_index_dtype(in[1].dtype, "indices", desc_));
    const Shape& s = in[0].shape;
    const Shape& is = in[1].shape;
    SL_RETURN_IF_ERROR(check_rank(s.rank()));
    if (is.rank() != s.rank()) return invalid("'indices' rank differs from 'data' rank");
    int64_t axis = 0;
    if (!normalize_axis(axis_, static_cast<int64_t>(s.rank()), &axis))
      return invalid("axis " + std::to_string(axis_) + " is out of range for rank " + std::to_string(s.rank()));
    for (size_t d = 0; d < s.rank(); ++d)
      if (static_cast<int64_t>(d) != axis && is[d] > s[d])
        return invalid("'indices' shape " + is.to_string() + " exceeds 'data' shape " + s.to_string());
    if (scatter_ && (in[2].shape != is || in[2].dtype != in[0].dtype))
      return invalid("'updates' must match 'indices' in shape and 'data' in dtype");
    ReshapeResult r;
    r.outputs.push_back({in[0].dtype, scatter_ ? s : is, Layout::kPlain});
    if (scatter_) r.inplace = {0};
    return r;
  }
  Status run(const RunContext& ctx) const override {
    const Tensor& data = ctx.inputs[0];
    const Tensor& idx = ctx.inputs[1];
    Tensor& out = ctx.outputs[0];
    const Shape& s = data.shape();
    const Shape& is = idx.shape();
    const int rank = static_cast<int>(s.rank());
    int64_t axis = 0;
    if (!normalize_axis(axis_, rank, &axis)) return invalid("axis out of range");
    const int64_t esz = static_cast<int64_t>(dtype_size(data.dtype()));
    int64_t dstride[kMaxDataRank];
    int64_t acc = 1;
    for (int d = rank - 1; d >= 0; --d) {
      dstride[d] = acc;
      acc *= s[static_cast<size_t>(d)];
    }
    const int64_t dim = s[static_cast<size_t>(axis)];
    const uint8_t* upd = scatter_ ? ctx.inputs[2].data<uint8_t>() : nullptr;
    if (scatter_) copy_bytes(out.raw(), data.raw(), data.nbytes(), ctx.num_threads);
    if (reduction_ == Reduction::kNone && trailing_match(s, is, axis) && dstride[axis] >= kMinBlock)
      return run_blocks(data, idx, upd, out, axis, dstride, ctx.num_threads);
    int64_t pos[kMaxDataRank] = {};
    int64_t base = 0;  // data offset of pos without the axis term
    const int64_t n = idx.numel();
    for (int64_t p = 0; p < n; ++p) {
      int64_t v = index_at(idx, p);
      if (v < -dim || v >= dim) return index_error(v, dim);
      if (v < 0) v += dim;
      const int64_t off = (base + v * dstride[axis]) * esz;
      if (scatter_ && reduction_ != Reduction::kNone)
        scatter_write(data.dtype(), reduction_, out.data<uint8_t>() + off, upd + p * esz, 1);
      else if (scatter_)
        copy_elem(out.data<uint8_t>() + off, upd + p * esz, esz);
      else
        copy_elem(out.data<uint8_t>() + p * esz, data.data<uint8_t>() + off, esz);
      for (int d = rank - 1; d >= 0; --d) {
        const int64_t stride = d == axis ? 0 : dstride[d];
        base += stride;
        if (++pos[d] < is[static_cast<size_t>(d)]) break;
        base -= pos[d] * stride;
        pos[d] = 0;
      }
    }
    return ok_status();
  }

  // Elements after the axis below which run_blocks does not pay.
  static constexpr int64_t kMinBlock = 8;

  // Whether `indices` spans every axis after `axis` whole: each index then addresses an element at
  // the same place in a block of the data, and the block of one index row lies contiguous in
  // data, indices, updates and output alike.
  static bool trailing_match(const Shape& s, const Shape& is, int64_t axis) {
    for (size_t d = static_cast<size_t>(axis) + 1; d < s.rank(); ++d)
      if (is[d] != s[d]) return false;
    return true;
  }

  // GatherElements and ScatterElements (no reduction) by blocks of `inner` elements: a block whose
  // indices are all equal (torchvision's MultiScaleRoIAlign scatters each box's [C, 7, 7] this
  // way) moves as one copy, any other element by element. Gathers split blocks between threads;
  // scatters run in index order, so that of duplicate indices the last one wins, as serially.
  Status run_blocks(const Tensor& data, const Tensor& idx, const uint8_t* upd, Tensor& out, int64_t axis,
                    const int64_t* dstride, int threads) const {
    if (idx.numel() == 0) return ok_status();
    const Shape& s = data.shape();
    const Shape& is = idx.shape();
    const int64_t esz = static_cast<int64_t>(dtype_size(data.dtype()));
    const int64_t dim = s[static_cast<size_t>(axis)];
    const int64_t rows = is[static_cast<size_t>(axis)];
    const int64_t inner = axis + 1 < static_cast<int64_t>(s.rank()) ? dstride[axis] : 1;
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= is[static_cast<size_t>(d)];
    // Data offset (in elements) of the outer position o, axis and trailing terms zero.
    auto outer_base = [&](int64_t o) {
      int64_t base = 0;
      for (int64_t d = axis - 1; d >= 0; --d) {
        const int64_t n = is[static_cast<size_t>(d)];
        base += (o % n) * dstride[d];
        o /= n;
      }
      return base;
    };
    const bool i32 = idx.dtype() == DType::kInt32;
    const auto* i64p = i32 ? nullptr : idx.data<int64_t>();
    const auto* i32p = i32 ? idx.data<int32_t>() : nullptr;
    auto at = [&](int64_t p) -> int64_t { return i32 ? i32p[p] : i64p[p]; };
    uint8_t* dst = out.data<uint8_t>();
    const uint8_t* src = data.data<uint8_t>();
    // One index row (outer position o, row r): returns false on an index out of range.
    auto block = [&](int64_t o, int64_t r, int64_t* bad) {
      const int64_t p0 = (o * rows + r) * inner;
      const int64_t base = outer_base(o);
      const int64_t first = at(p0);
      bool same = true;
      for (int64_t e = 1; e < inner && same; ++e) same = at(p0 + e) == first;
      if (same) {
        if (first < -dim || first >= dim) {
          *bad = first;
          return false;
        }
        const int64_t v = first < 0 ? first + dim : first;
        const int64_t d_off = (base + v * dstride[axis]) * esz;
        if (scatter_) {
          std::memcpy(dst + d_off, upd + p0 * esz, static_cast<size_t>(inner * esz));
        } else {
          std::memcpy(dst + p0 * esz, src + d_off, static_cast<size_t>(inner * esz));
        }
        return true;
      }
      for (int64_t e = 0; e < inner; ++e) {
        int64_t v = at(p0 + e);
        if (v < -dim || v >= dim) {
          *bad = v;
          return false;
        }
        if (v < 0) v += dim;
        const int64_t d_off = (base + v * dstride[axis] + e) * esz;
        if (scatter_) {
          copy_elem(dst + d_off, upd + (p0 + e) * esz, esz);
        } else {
          copy_elem(dst + (p0 + e) * esz, src + d_off, esz);
        }
      }
      return true;
    };
    const int64_t blocks = outer * rows;
    if (scatter_ || threads <= 1 || blocks < 2) {
      for (int64_t b = 0; b < blocks; ++b) {
        int64_t bad = 0;
        if (!block(b / rows, b % rows, &bad)) return index_error(bad, dim);
      }
      return ok_status();
    }
    std::atomic<bool> failed{false};
    std::atomic<int64_t> bad_index{0};
    math::parallel_chunks(blocks, std::max<int64_t>(1, math::kCheapGrain / inner), threads,
                          [&](int64_t lo, int64_t hi) {
                            for (int64_t b = lo; b < hi && !failed.load(std::memory_order_relaxed); ++b) {
                              int64_t bad = 0;
                              if (!block(b / rows, b % rows, &bad)) {
                                bad_index = bad;
                                failed = true;
                              }
                            }
                          });
    return failed ? index_error(bad_index.load(), dim) : ok_status();
  }

  bool scatter_ = false;
  Reduction reduction_ = Reduction::kNone;
  int64_t axis_ = 0;
};

// GatherND (batch_dims from opset 12) and ScatterND: index tuples address slices of `data`.
class NdKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a, bool scatter) {
    auto k = std::make_unique<NdKernel>(a.node);
    k->scatter_ = scatter;
    k->batch_dims_ = scatter ? 0 : a.node.attr_int("batch_dims", 0);
    if (scatter && !parse_reduction(a.node, &k->reduction_))
      return k->invalid("unknown reduction '" + a.node.attr_string("reduction", "") + "'");
    return std::unique_ptr<Kernel>(std::move(k));
  }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const size_t need = scatter_ ? 3 : 2;
    if (in.size() < need) return invalid("missing inputs");
    for (size_t i = 0; i < need; ++i)
      if (!in[i].present()) return invalid("input " + std::to_string(i) + " is missing");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, desc_));
    if (in[1].dtype != DType::kInt64 && (scatter_ || in[1].dtype != DType::kInt32))
      return invalid(std::string("'indices' must be int64, got ") + dtype_name(in[1].dtype));
    const Shape& s = in[0].shape;
    const Shape& is = in[1].shape;
    const int64_t r = static_cast<int64_t>(s.rank()), q = static_cast<int64_t>(is.rank()), b = batch_dims_;
    if (r < 1 || q < 1) return invalid("'data' and 'indices' must have rank >= 1");
    if (b < 0 || b >= std::min(r, q)) return invalid("batch_dims " + std::to_string(b) + " is out of range");
    const int64_t k = is[is.rank() - 1];
    if (k < 1 || k > r - b) return invalid("last dim of 'indices' (" + std::to_string(k) + ") is out of range");
    for (int64_t i = 0; i < b; ++i)
      if (s[static_cast<size_t>(i)] != is[static_cast<size_t>(i)])
        return invalid("batch dims of 'data' and 'indices' differ");
    Shape slice_shape;
    for (int64_t i = 0; i < q - 1; ++i) slice_shape.push_back(is[static_cast<size_t>(i)]);
    for (int64_t i = b + k; i < r; ++i) slice_shape.push_back(s[static_cast<size_t>(i)]);
    ReshapeResult res;
    if (scatter_) {
      if (in[2].shape != slice_shape || in[2].dtype != in[0].dtype)
        return invalid("'updates' shape " + in[2].shape.to_string() + " must be " + slice_shape.to_string());
      res.outputs.push_back({in[0].dtype, s, Layout::kPlain});
      res.inplace = {0};
    } else {
      res.outputs.push_back({in[0].dtype, slice_shape, Layout::kPlain});
    }
    return res;
  }
  Status run(const RunContext& ctx) const override {
    const Tensor& data = ctx.inputs[0];
    const Tensor& idx = ctx.inputs[1];
    const Shape& s = data.shape();
    const Shape& is = idx.shape();
    const int64_t r = static_cast<int64_t>(s.rank()), q = static_cast<int64_t>(is.rank()), b = batch_dims_;
    const int64_t k = is[is.rank() - 1];
    const int64_t esz = static_cast<int64_t>(dtype_size(data.dtype()));
    int64_t slice = esz;  // bytes per addressed slice
    for (int64_t i = b + k; i < r; ++i) slice *= s[static_cast<size_t>(i)];
    int64_t batch_elems = 1;  // data elements per batch entry
    for (int64_t i = b; i < r; ++i) batch_elems *= s[static_cast<size_t>(i)];
    int64_t tuples_per_batch = 1;
    for (int64_t i = b; i < q - 1; ++i) tuples_per_batch *= is[static_cast<size_t>(i)];
    const int64_t tuples = idx.numel() / k;
    uint8_t* out = ctx.outputs[0].data<uint8_t>();
    const uint8_t* src = data.data<uint8_t>();
    if (scatter_) copy_bytes(out, src, data.nbytes(), ctx.num_threads);
    const uint8_t* upd = scatter_ ? ctx.inputs[2].data<uint8_t>() : nullptr;
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = (t / tuples_per_batch) * batch_elems;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t dim = s[static_cast<size_t>(b + j)];
        int64_t v = index_at(idx, t * k + j);
        if (v < -dim || v >= dim) return index_error(v, dim);
        if (v < 0) v += dim;
        off += v * s.stride(static_cast<size_t>(b + j));
      }
      if (scatter_)
        scatter_write(data.dtype(), reduction_, out + off * esz, upd + t * slice, slice / esz);
      else
        std::memcpy(out + t * slice, src + off * esz, static_cast<size_t>(slice));
    }
    return ok_status();
  }

 private:
  bool scatter_ = false;
  Reduction reduction_ = Reduction::kNone;
  int64_t batch_dims_ = 0;
};

template <bool kScatter>
KernelPtr make_elements(const KernelCreateArgs& a) {
  return ElementsKernel::create(a, kScatter);
}
template <bool kScatter>
KernelPtr make_nd(const KernelCreateArgs& a) {
  return NdKernel::create(a, kScatter);
}

class TensorScatterKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<TensorScatterKernel>(a.node);
    const std::string mode = a.node.attr_string("mode", "linear");
    if (mode != "linear" && mode != "circular") return k->invalid("unknown mode '" + mode + "'");
    k->circular_ = mode == "circular";
    k->axis_ = a.node.attr_int("axis", -2);
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 2 || !in[0].present() || !in[1].present()) return invalid("needs past_cache and update");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, desc_));
    const Shape &past = in[0].shape, &upd = in[1].shape;
    if (in[1].dtype != in[0].dtype) return invalid("update's dtype differs from past_cache's");
    SL_ASSIGN_OR_RETURN(int64_t axis, axis_of(past));
    if (upd.rank() != past.rank()) return invalid("update's rank differs from past_cache's");
    for (size_t d = 0; d < past.rank(); ++d)
      if (static_cast<int64_t>(d) != axis && upd[d] != past[d])
        return invalid("update " + upd.to_string() + " differs from past_cache " + past.to_string() +
                       " off the sequence axis");
    if (upd[static_cast<size_t>(axis)] > past[static_cast<size_t>(axis)])
      return invalid("update is longer than the cache along the sequence axis");
    if (in.size() > 2 && in[2].present()) {
      if (in[2].dtype != DType::kInt64 && in[2].dtype != DType::kInt32) return invalid("write_indices must be int64");
      if (in[2].shape != Shape{past[0]}) return invalid("write_indices must be [batch_size]");
    }
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, past, Layout::kPlain});
    rr.inplace = {0};
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor &past = ctx.inputs[0], &upd = ctx.inputs[1];
    const Tensor* idx = ctx.inputs.size() > 2 && ctx.inputs[2].defined() ? &ctx.inputs[2] : nullptr;
    Tensor& y = ctx.outputs[0];
    copy_bytes(y.raw(), past.raw(), past.nbytes(), ctx.num_threads);
    SL_ASSIGN_OR_RETURN(int64_t axis, axis_of(past.shape()));
    const Shape& ps = past.shape();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 1; d < axis; ++d) outer *= ps[static_cast<size_t>(d)];
    for (size_t d = static_cast<size_t>(axis) + 1; d < ps.rank(); ++d) inner *= ps[d];
    const int64_t max_len = ps[static_cast<size_t>(axis)], len = upd.shape()[static_cast<size_t>(axis)];
    const size_t row = static_cast<size_t>(inner) * dtype_size(past.dtype());
    const auto* src = static_cast<const uint8_t*>(upd.raw());
    auto* dst = static_cast<uint8_t*>(y.raw());
    for (int64_t b = 0; b < ps[0]; ++b) {
      const int64_t start =
          idx ? (idx->dtype() == DType::kInt64 ? idx->data<int64_t>()[b] : idx->data<int32_t>()[b]) : 0;
      if (start < 0 || (!circular_ && start + len > max_len))
        return invalid("write index " + std::to_string(start) + " of batch entry " + std::to_string(b) +
                       " does not fit " + std::to_string(len) + " positions in a cache of " + std::to_string(max_len));
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t s = 0; s < len; ++s) {
          const int64_t at = circular_ ? (start + s) % std::max<int64_t>(max_len, 1) : start + s;
          std::memcpy(dst + static_cast<size_t>((b * outer + o) * max_len + at) * row,
                      src + static_cast<size_t>((b * outer + o) * len + s) * row, row);
        }
    }
    return ok_status();
  }

 private:
  Result<int64_t> axis_of(const Shape& s) const {
    int64_t axis = 0;
    if (!normalize_axis(axis_, static_cast<int64_t>(s.rank()), &axis) || axis == 0)
      return invalid("axis " + std::to_string(axis_) + " must name a non-batch dimension of " + s.to_string());
    return axis;
  }

  bool circular_ = false;
  int64_t axis_ = -2;
};

Status add_def(KernelRegistry& reg, const char* op, int since, int end, KernelFactory f) {
  KernelDef def;
  def.op = op;
  def.since_version = since;
  def.end_version = end;
  def.provider = "cpu";
  def.create = std::move(f);
  return reg.add(std::move(def));
}

}  // namespace

Status register_index_ops(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_data_kernel<SliceKernel>(reg, "Slice", 1));
  SL_RETURN_IF_ERROR(add_data_kernel<GatherKernel>(reg, "Gather", 1));
  SL_RETURN_IF_ERROR(add_def(reg, "GatherElements", 11, INT_MAX, make_elements<false>));
  SL_RETURN_IF_ERROR(add_def(reg, "ScatterElements", 11, INT_MAX, make_elements<true>));
  SL_RETURN_IF_ERROR(add_def(reg, "Scatter", 9, 10, make_elements<true>));
  SL_RETURN_IF_ERROR(add_def(reg, "GatherND", 11, INT_MAX, make_nd<false>));
  SL_RETURN_IF_ERROR(add_def(reg, "ScatterND", 11, INT_MAX, make_nd<true>));
  SL_RETURN_IF_ERROR(add_data_kernel<TensorScatterKernel>(reg, "TensorScatter", 24));
  return ok_status();
}

}  // namespace streamline::ops::cpu
