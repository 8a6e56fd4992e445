// Broadcasting arithmetic for the dtypes the main elementwise family leaves out: int8, int16,
// uint8, uint16, uint32, uint64, float16, bfloat16 and float64. Add, Sub, Mul, Div, Mod, Max, Min,
// Sum, Mean (variadic where the spec says so), Clip, and the comparisons Equal, Less, Greater,
// LessOrEqual, GreaterOrEqual (bool outputs). Each def is keyed by its exact dtype, so the
// float32/int32/int64 kernels of elementwise.cc keep serving those types.
//
// Integers wrap like NumPy on Add/Sub/Mul; Div truncates toward zero; Mod follows the divisor's sign
// unless fmod=1 (C fmod); an integer division or modulo by zero gives 0 rather than trapping.
// float16/bfloat16 compute in float and round once per result.

#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"

namespace streamline::ops::cpu {
namespace {

enum class Op { kAdd, kSub, kMul, kDiv, kMod, kMax, kMin, kSum, kMean };

// Storage type S, compute type C.
template <typename S>
struct Compute {
  using type = S;
  static type load(S v) { return v; }
  static S store(type v) { return v; }
};
struct Half {
  uint16_t bits;
};
struct BHalf {
  uint16_t bits;
};
template <>
struct Compute<Half> {
  using type = float;
  static float load(Half v) { return half_to_float(v.bits); }
  static Half store(float v) { return Half{float_to_half(v)}; }
};
template <>
struct Compute<BHalf> {
  using type = float;
  static float load(BHalf v) { return bfloat16_to_float(v.bits); }
  static BHalf store(float v) { return BHalf{float_to_bfloat16(v)}; }
};

template <typename C>
C apply(Op op, C a, C b, bool fmod) {
  if constexpr (std::is_floating_point_v<C>) {
    switch (op) {
      case Op::kAdd:
      case Op::kSum:
      case Op::kMean:
        return a + b;
      case Op::kSub:
        return a - b;
      case Op::kMul:
        return a * b;
      case Op::kDiv:
        return a / b;
      case Op::kMod: {
        C r = std::fmod(a, b);
        if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
      }
      case Op::kMax:
        return std::isnan(a) || std::isnan(b) ? std::numeric_limits<C>::quiet_NaN() : std::max(a, b);
      case Op::kMin:
        return std::isnan(a) || std::isnan(b) ? std::numeric_limits<C>::quiet_NaN() : std::min(a, b);
    }
    return a;
  } else {
    // Wrapping arithmetic in uint64 (no signed overflow, no promotion to int); the conversion back
    // to C is modular.
    using W = uint64_t;
    switch (op) {
      case Op::kAdd:
      case Op::kSum:
      case Op::kMean:
        return static_cast<C>(static_cast<W>(a) + static_cast<W>(b));
      case Op::kSub:
        return static_cast<C>(static_cast<W>(a) - static_cast<W>(b));
      case Op::kMul:
        return static_cast<C>(static_cast<W>(a) * static_cast<W>(b));
      case Op::kDiv:
        if (b == 0) return 0;
        if constexpr (std::is_signed_v<C>)
          if (b == -1) return static_cast<C>(W{0} - static_cast<W>(a));
        return static_cast<C>(a / b);
      case Op::kMod: {
        if (b == 0) return 0;
        if constexpr (std::is_signed_v<C>) {
          if (b == -1) return 0;
          C r = static_cast<C>(a % b);
          if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
          return r;
        } else {
          return static_cast<C>(a % b);
        }
      }
      case Op::kMax:
        return std::max(a, b);
      case Op::kMin:
        return std::min(a, b);
    }
    return a;
  }
}

// Element strides of `in` broadcast to `out` (0 on broadcast dimensions), right-aligned, into `st`
// (out.rank() <= kMaxDataRank entries).
void broadcast_strides(const Shape& in, const Shape& out, int64_t* st) {
  std::fill(st, st + out.rank(), int64_t{0});
  int64_t stride = 1;
  for (size_t k = 0; k < in.rank(); ++k) {
    const size_t di = in.rank() - 1 - k, dout = out.rank() - 1 - k;
    st[dout] = in[di] == 1 ? 0 : stride;
    stride *= in[di];
  }
}

class TypedBinaryKernel final : public DataKernel {
 public:
  TypedBinaryKernel(const graph::Node& node, Op op) : DataKernel(node), op_(op) {}

  Status init(const KernelCreateArgs& a) {
    fmod_ = a.node.attr_int("fmod", 0) != 0;
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty()) return invalid("expected at least one input");
    const bool variadic = op_ == Op::kMax || op_ == Op::kMin || op_ == Op::kSum || op_ == Op::kMean;
    if (!variadic && in.size() != 2) return invalid("expected 2 inputs");
    Shape out = in[0].shape;
    for (const TensorInfo& t : in) {
      if (!t.present() || t.dtype != in[0].dtype) return invalid("inputs must be present and share one dtype");
      Shape b;
      if (!broadcast_shapes(out, t.shape, &b))
        return invalid("shapes " + out.to_string() + " and " + t.shape.to_string() + " do not broadcast");
      out = b;
    }
    if (op_ == Op::kMod && is_float_dtype(in[0].dtype) && !fmod_) return invalid("fmod must be 1 for floating inputs");
    if (out.rank() > static_cast<size_t>(kMaxDataRank)) return unsupported_error("rank too large");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, out, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    switch (ctx.outputs[0].dtype()) {
      case DType::kInt8:
        return run_typed<int8_t>(ctx);
      case DType::kInt16:
        return run_typed<int16_t>(ctx);
      case DType::kUInt8:
        return run_typed<uint8_t>(ctx);
      case DType::kUInt16:
        return run_typed<uint16_t>(ctx);
      case DType::kUInt32:
        return run_typed<uint32_t>(ctx);
      case DType::kUInt64:
        return run_typed<uint64_t>(ctx);
      case DType::kFloat64:
        return run_typed<double>(ctx);
      case DType::kFloat16:
        return run_typed<Half>(ctx);
      case DType::kBFloat16:
        return run_typed<BHalf>(ctx);
      default:
        return unsupported_error(std::string("dtype ") + dtype_name(ctx.outputs[0].dtype()));
    }
  }

 private:
  template <typename S>
  Status run_typed(const RunContext& ctx) const {
    using C = typename Compute<S>::type;
    Tensor& y = ctx.outputs[0];
    const Shape& out = y.shape();
    const int64_t n = y.numel();
    const int rank = static_cast<int>(out.rank());
    S* dst = y.data<S>();
    for (size_t k = 0; k < ctx.inputs.size(); ++k) {
      const S* src = ctx.inputs[k].data<S>();
      int64_t st[kMaxDataRank];
      broadcast_strides(ctx.inputs[k].shape(), out, st);
      int64_t idx[kMaxDataRank] = {};
      int64_t off = 0;
      for (int64_t i = 0; i < n; ++i) {
        const C v = Compute<S>::load(src[off]);
        dst[i] = k == 0 ? Compute<S>::store(v) : Compute<S>::store(apply<C>(op_, Compute<S>::load(dst[i]), v, fmod_));
        for (int d = rank - 1; d >= 0; --d) {
          off += st[d];
          if (++idx[d] < out[static_cast<size_t>(d)]) break;
          off -= st[d] * idx[d];
          idx[d] = 0;
        }
      }
    }
    if (op_ == Op::kMean && ctx.inputs.size() > 1) {
      const C count = static_cast<C>(ctx.inputs.size());
      for (int64_t i = 0; i < n; ++i) dst[i] = Compute<S>::store(Compute<S>::load(dst[i]) / count);
    }
    return ok_status();
  }

  Op op_;
  bool fmod_ = false;
};

enum class Cmp { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual };

template <typename C>
bool compare(Cmp op, C a, C b) {
  switch (op) {
    case Cmp::kEqual:
      return a == b;
    case Cmp::kLess:
      return a < b;
    case Cmp::kGreater:
      return a > b;
    case Cmp::kLessOrEqual:
      return a <= b;
    case Cmp::kGreaterOrEqual:
      return a >= b;
  }
  return false;
}

// A comparison of two broadcast inputs of one dtype into bool (NaN compares false, except !=).
class TypedCompareKernel final : public DataKernel {
 public:
  TypedCompareKernel(const graph::Node& node, Cmp op) : DataKernel(node), op_(op) {}
  Status init(const KernelCreateArgs&) { return ok_status(); }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 2 || !in[0].present() || !in[1].present()) return invalid("expected 2 inputs");
    if (in[0].dtype != in[1].dtype)
      return invalid(std::string("input dtypes ") + dtype_name(in[0].dtype) + " and " + dtype_name(in[1].dtype) +
                     " differ");
    Shape out;
    if (!broadcast_shapes(in[0].shape, in[1].shape, &out))
      return invalid("shapes " + in[0].shape.to_string() + " and " + in[1].shape.to_string() + " do not broadcast");
    if (out.rank() > static_cast<size_t>(kMaxDataRank)) return unsupported_error("rank too large");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{DType::kBool, out, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    switch (ctx.inputs[0].dtype()) {
      case DType::kInt8:
        return run_typed<int8_t>(ctx);
      case DType::kInt16:
        return run_typed<int16_t>(ctx);
      case DType::kUInt8:
        return run_typed<uint8_t>(ctx);
      case DType::kUInt16:
        return run_typed<uint16_t>(ctx);
      case DType::kUInt32:
        return run_typed<uint32_t>(ctx);
      case DType::kUInt64:
        return run_typed<uint64_t>(ctx);
      case DType::kFloat64:
        return run_typed<double>(ctx);
      case DType::kFloat16:
        return run_typed<Half>(ctx);
      case DType::kBFloat16:
        return run_typed<BHalf>(ctx);
      default:
        return unsupported_error(std::string("dtype ") + dtype_name(ctx.inputs[0].dtype()));
    }
  }

 private:
  template <typename S>
  Status run_typed(const RunContext& ctx) const {
    using C = typename Compute<S>::type;
    Tensor& y = ctx.outputs[0];
    const Shape& out = y.shape();
    const int rank = static_cast<int>(out.rank());
    const S* a = ctx.inputs[0].data<S>();
    const S* b = ctx.inputs[1].data<S>();
    int64_t sa[kMaxDataRank], sb[kMaxDataRank];
    broadcast_strides(ctx.inputs[0].shape(), out, sa);
    broadcast_strides(ctx.inputs[1].shape(), out, sb);
    int64_t idx[kMaxDataRank] = {};
    int64_t oa = 0, ob = 0;
    auto* dst = y.data<uint8_t>();
    for (int64_t i = 0; i < y.numel(); ++i) {
      dst[i] = compare<C>(op_, Compute<S>::load(a[oa]), Compute<S>::load(b[ob])) ? 1 : 0;
      for (int d = rank - 1; d >= 0; --d) {
        oa += sa[d];
        ob += sb[d];
        if (++idx[d] < out[static_cast<size_t>(d)]) break;
        oa -= sa[d] * idx[d];
        ob -= sb[d] * idx[d];
        idx[d] = 0;
      }
    }
    return ok_status();
  }

  Cmp op_;
};

// Clip with bounds from inputs 1 and 2 (opset 11+); missing bounds leave that side open.
class TypedClipKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs&) { return ok_status(); }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("missing input");
    for (size_t k = 1; k < in.size() && k < 3; ++k)
      if (in[k].present() && (in[k].dtype != in[0].dtype || in[k].shape.numel() != 1))
        return invalid("min/max must be scalars of the input's dtype");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, in[0].shape, Layout::kPlain});
    rr.inplace = {0};
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const DType dt = x.dtype();
    const bool has_lo = ctx.inputs.size() > 1 && ctx.inputs[1].defined();
    const bool has_hi = ctx.inputs.size() > 2 && ctx.inputs[2].defined();
    const double lo = has_lo ? load_f(dt, ctx.inputs[1].raw(), 0) : -INFINITY;
    const double hi = has_hi ? load_f(dt, ctx.inputs[2].raw(), 0) : INFINITY;
    if (dt == DType::kUInt64 || dt == DType::kFloat64) {
      // Exact for 64-bit values that double cannot hold.
      for (int64_t i = 0; i < x.numel(); ++i) {
        if (dt == DType::kUInt64) {
          uint64_t v = x.data<uint64_t>()[i];
          if (has_lo) v = std::max(v, ctx.inputs[1].data<uint64_t>()[0]);
          if (has_hi) v = std::min(v, ctx.inputs[2].data<uint64_t>()[0]);
          y.data<uint64_t>()[i] = v;
        } else {
          double v = x.data<double>()[i];
          v = v < lo ? lo : v;
          y.data<double>()[i] = v > hi ? hi : v;
        }
      }
      return ok_status();
    }
    for (int64_t i = 0; i < x.numel(); ++i) {
      double v = load_f(dt, x.raw(), i);
      v = v < lo ? lo : v;
      store_f(dt, y.raw(), i, v > hi ? hi : v);
    }
    return ok_status();
  }
};

struct Spec {
  const char* name;
  Op op;
  int since;
};

constexpr Spec kSpecs[] = {
    {"Add", Op::kAdd, 7}, {"Sub", Op::kSub, 7}, {"Mul", Op::kMul, 7}, {"Div", Op::kDiv, 7},   {"Mod", Op::kMod, 10},
    {"Max", Op::kMax, 6}, {"Min", Op::kMin, 6}, {"Sum", Op::kSum, 6}, {"Mean", Op::kMean, 6},
};

constexpr DType kTypes[] = {DType::kInt8,   DType::kInt16,   DType::kUInt8,    DType::kUInt16, DType::kUInt32,
                            DType::kUInt64, DType::kFloat16, DType::kBFloat16, DType::kFloat64};

}  // namespace

Status register_elementwise_types(KernelRegistry& reg) {
  for (const Spec& s : kSpecs) {
    const Op op = s.op;
    for (DType t : kTypes) {
      const bool float_only = op == Op::kSum || op == Op::kMean;
      if (float_only && !is_float_dtype(t)) continue;
      SL_RETURN_IF_ERROR(
          add_typed_def(reg, s.name, s.since, t, [op](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
            auto k = std::make_unique<TypedBinaryKernel>(a.node, op);
            SL_RETURN_IF_ERROR(k->init(a));
            return std::unique_ptr<Kernel>(std::move(k));
          }));
    }
  }
  for (DType t : kTypes) SL_RETURN_IF_ERROR(add_typed_def(reg, "Clip", 11, t, make_factory<TypedClipKernel>()));
  constexpr struct {
    const char* name;
    Cmp op;
    int since;
  } kCompares[] = {{"Equal", Cmp::kEqual, 7},
                   {"Less", Cmp::kLess, 7},
                   {"Greater", Cmp::kGreater, 7},
                   {"LessOrEqual", Cmp::kLessOrEqual, 12},
                   {"GreaterOrEqual", Cmp::kGreaterOrEqual, 12}};
  for (const auto& c : kCompares) {
    const Cmp op = c.op;
    for (DType t : kTypes) {
      SL_RETURN_IF_ERROR(
          add_typed_def(reg, c.name, c.since, t, [op](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
            return std::unique_ptr<Kernel>(std::make_unique<TypedCompareKernel>(a.node, op));
          }));
    }
  }
  return ok_status();
}

}  // namespace streamline::ops::cpu
