// Broadcasting binary and variadic elementwise ops: arithmetic, comparisons, logic, Where, PRelu.
// Unary ops live in math_unary.cc and register through register_elementwise() too.

#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/cpu/families.h"
#include "ops/cpu/math_broadcast.h"
#include "ops/cpu/math_common.h"
#include "ops/cpu/math_vec.h"

namespace streamline::ops::cpu::math {
namespace {

enum class BinOp {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMod,
  kMax,
  kMin,
  kSum,
  kMean,
  kEqual,
  kLess,
  kGreater,
  kLessOrEqual,
  kGreaterOrEqual,
  kAnd,
  kOr,
  kXor,
  kBitShift,
  kWhere,
  kPRelu,
};

bool is_variadic(BinOp op) {
  return op == BinOp::kMax || op == BinOp::kMin || op == BinOp::kSum || op == BinOp::kMean;
}
bool is_compare(BinOp op) {
  return op == BinOp::kEqual || op == BinOp::kLess || op == BinOp::kGreater || op == BinOp::kLessOrEqual ||
         op == BinOp::kGreaterOrEqual;
}
bool is_logic(BinOp op) {
  return op == BinOp::kAnd || op == BinOp::kOr || op == BinOp::kXor;
}

// Signed integer arithmetic wraps (two's complement) instead of being undefined on overflow.
template <typename T>
T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <typename T>
T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <typename T>
T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}
// C division (truncates toward zero); x / 0 gives 0 and MIN / -1 wraps, rather than trapping.
template <typename T>
T int_div(T a, T b) {
  if (b == 0) return 0;
  if (b == -1) return wrap_sub<T>(0, a);
  return a / b;
}
// ONNX Mod for integers: fmod=0 takes the sign of the divisor (Python %), fmod=1 of the dividend.
template <typename T>
T int_mod(T a, T b, bool c_style) {
  if (b == 0 || b == -1) return 0;
  T r = a % b;
  if (!c_style && r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
// Integer power by squaring with wrapping; negative exponents truncate 1/x^n toward zero.
template <typename T, typename E>
T int_pow(T base, E e) {
  if (e < 0) {
    if (base == 1) return 1;
    if (base == -1) return (static_cast<int64_t>(e) % 2 == 0) ? 1 : -1;
    return 0;
  }
  T result = 1;
  auto n = static_cast<uint64_t>(e);
  while (n) {
    if (n & 1u) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    n >>= 1;
  }
  return result;
}

struct BinaryState {
  std::vector<StridedPlan> plans;  // variadic: plans[0] = in0 (op) in1, plans[k-1] = out (op) in_k
};

class BinaryKernel final : public Kernel {
 public:
  BinaryKernel(const graph::Node& node, BinOp op) : node_(node), op_(op) {
    fmod_ = node.attr_int("fmod", 0) != 0;
    shift_left_ = node.attr_string("direction", "") == "LEFT";
  }

  Status validate() const {
    if (op_ == BinOp::kBitShift) {
      const std::string dir = node_.attr_string("direction", "");
      if (dir != "LEFT" && dir != "RIGHT")
        return invalid_argument(node_prefix(node_) + "direction must be LEFT or RIGHT, got '" + dir + "'");
    }
    return ok_status();
  }

  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }

  // Any layouts the broadcasting walk maps onto the output's (math_broadcast.h): blocked or
  // channels-last activations with broadcast per-channel, per-pixel or scalar operands.
  bool accepts(std::span<const TensorInfo> inputs) const override {
    std::vector<Shape> shapes;
    for (const auto& in : inputs)
      if (in.present()) shapes.push_back(in.shape);
    auto out = broadcast_all(node_, shapes);
    if (!out.ok()) return false;
    std::vector<Operand> ops;
    for (const auto& in : inputs)
      if (in.present()) ops.push_back({in.shape, in.layout});
    return strided_plan_supports(*out, output_layout(inputs, *out), ops);
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    SL_RETURN_IF_ERROR(check_inputs(inputs));
    std::vector<Shape> shapes;
    for (const auto& in : inputs) shapes.push_back(in.shape);
    SL_ASSIGN_OR_RETURN(Shape out_shape, broadcast_all(node_, shapes));
    if (op_ == BinOp::kPRelu && out_shape != inputs[0].shape) {
      return invalid_argument(node_prefix(node_) + "slope shape " + inputs[1].shape.to_string() +
                              " does not broadcast to input shape " + inputs[0].shape.to_string());
    }
    const Layout out_layout = output_layout(inputs, out_shape);
    {
      std::vector<Operand> ops;
      for (const auto& in : inputs) ops.push_back({in.shape, in.layout});
      if (!strided_plan_supports(out_shape, out_layout, ops))
        return invalid_argument(node_prefix(node_) + "cannot combine these input layouts");
    }

    auto state = std::make_shared<BinaryState>();
    if (inputs.size() == 1) {
      const Operand ops[1] = {{inputs[0].shape, inputs[0].layout}};
      state->plans.push_back(make_strided_plan(out_shape, out_layout, ops));
    } else if (op_ == BinOp::kWhere) {
      const Operand ops[3] = {{inputs[0].shape, inputs[0].layout},
                              {inputs[1].shape, inputs[1].layout},
                              {inputs[2].shape, inputs[2].layout}};
      state->plans.push_back(make_strided_plan(out_shape, out_layout, ops));
    } else {
      const Operand first[2] = {{inputs[0].shape, inputs[0].layout}, {inputs[1].shape, inputs[1].layout}};
      state->plans.push_back(make_strided_plan(out_shape, out_layout, first));
      for (size_t k = 2; k < inputs.size(); ++k) {
        const Operand step[2] = {{out_shape, out_layout}, {inputs[k].shape, inputs[k].layout}};
        state->plans.push_back(make_strided_plan(out_shape, out_layout, step));
      }
    }

    ReshapeResult rr;
    const DType out_dtype = output_dtype(inputs);
    rr.outputs.push_back(OutputInfo{out_dtype, out_shape, out_layout});
    // The output may take over an input buffer of the same shape, layout and dtype. For chains only
    // the first two inputs qualify (later steps read the output while writing it).
    int share = -1;
    const size_t first = op_ == BinOp::kWhere ? 1 : 0;
    const size_t last = is_variadic(op_) ? std::min<size_t>(inputs.size(), 2) : inputs.size();
    for (size_t k = first; k < last && share < 0; ++k) {
      if (inputs[k].shape == out_shape && inputs[k].layout == out_layout && inputs[k].dtype == out_dtype)
        share = static_cast<int>(k);
    }
    rr.inplace = {share};
    rr.state = std::move(state);
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const auto* st = static_cast<const BinaryState*>(ctx.state);
    if (!st) return internal_error(node_prefix(node_) + "run without reshape state");
    const DType dt = ctx.inputs[op_ == BinOp::kWhere ? 1 : 0].dtype();
    if (op_ == BinOp::kWhere) return run_where(ctx, *st, dt);
    if (op_ == BinOp::kBitShift) return run_shift(ctx, *st, dt);
    if (is_logic(op_) || (op_ == BinOp::kEqual && dt == DType::kBool)) return run_bool(ctx, *st);
    if (op_ == BinOp::kPow && ctx.inputs[1].dtype() != dt) return run_pow_mixed(ctx, *st, dt);
    Status status = ok_status();
    const bool handled = dispatch_numeric(dt, [&](auto tag) {
      using T = decltype(tag);
      status = run_numeric<T>(ctx, *st);
    });
    if (!handled) return internal_error(node_prefix(node_) + "unexpected dtype " + dtype_name(dt));
    return status;
  }

 private:
  // The layout of an input that has the output's shape, a non-plain one first; plain otherwise.
  static Layout output_layout(std::span<const TensorInfo> inputs, const Shape& out_shape) {
    if (out_shape.rank() != 4) return Layout::kPlain;
    Layout l = Layout::kPlain;
    for (const auto& in : inputs)
      if (in.present() && in.shape == out_shape && in.layout != Layout::kPlain) return in.layout;
    return l;
  }

  DType output_dtype(std::span<const TensorInfo> inputs) const {
    if (is_compare(op_)) return DType::kBool;
    if (op_ == BinOp::kWhere) return inputs[1].dtype;
    return inputs[0].dtype;
  }

  Status check_inputs(std::span<const TensorInfo> inputs) const {
    const size_t n = inputs.size();
    const size_t want = op_ == BinOp::kWhere ? 3 : 2;
    if (is_variadic(op_) ? n < 1 : n != want)
      return invalid_argument(node_prefix(node_) + "expected " + std::to_string(want) + " inputs, got " +
                              std::to_string(n));
    for (size_t k = 0; k < n; ++k)
      if (!inputs[k].present())
        return invalid_argument(node_prefix(node_) + "input " + std::to_string(k) + " is missing");
    const DType f32 = DType::kFloat32, i32 = DType::kInt32, i64 = DType::kInt64, b = DType::kBool;
    const DType t0 = inputs[0].dtype;
    switch (op_) {
      case BinOp::kMean:
        SL_RETURN_IF_ERROR(check_dtype(node_, t0, {f32}));
        break;
      case BinOp::kEqual:
        SL_RETURN_IF_ERROR(check_dtype(node_, t0, {f32, i32, i64, b}));
        break;
      case BinOp::kAnd:
      case BinOp::kOr:
      case BinOp::kXor:
        SL_RETURN_IF_ERROR(check_dtype(node_, t0, {b}));
        break;
      case BinOp::kBitShift:
        SL_RETURN_IF_ERROR(check_dtype(node_, t0, {DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64}));
        break;
      case BinOp::kWhere:
        SL_RETURN_IF_ERROR(check_dtype(node_, t0, {b}, "condition"));
        if (!dtype_supported(inputs[1].dtype))
          return unsupported(node_prefix(node_) + "input dtype " + dtype_name(inputs[1].dtype) + " is not supported");
        break;
      case BinOp::kMod:
        SL_RETURN_IF_ERROR(check_dtype(node_, t0, {f32, i32, i64}));
        if (t0 == f32 && !fmod_)
          return invalid_argument(node_prefix(node_) + "fmod must be 1 for floating-point inputs");
        break;
      case BinOp::kPow:
        SL_RETURN_IF_ERROR(check_dtype(node_, t0, {f32, i32, i64}));
        SL_RETURN_IF_ERROR(check_dtype(node_, inputs[1].dtype, {f32, i32, i64}, "exponent"));
        return ok_status();  // base and exponent may differ
      default:
        SL_RETURN_IF_ERROR(check_dtype(node_, t0, {f32, i32, i64}));
        break;
    }
    const size_t same_from = op_ == BinOp::kWhere ? 1 : 0;
    for (size_t k = same_from + 1; k < n; ++k) {
      if (inputs[k].dtype != inputs[same_from].dtype)
        return invalid_argument(node_prefix(node_) + "input dtypes " + dtype_name(inputs[same_from].dtype) + " and " +
                                dtype_name(inputs[k].dtype) + " differ");
    }
    return ok_status();
  }

  // Runs out = in0 op in1 (op in2 ...) over the plans.
  template <typename T, typename TO, typename Op>
  void chain(const RunContext& ctx, const BinaryState& st, Op op, int64_t grain) const {
    TO* out = ctx.outputs[0].data<TO>();
    const size_t n = ctx.inputs.size();
    if (n == 1) {
      if constexpr (std::is_same_v<T, TO>) apply_copy(st.plans[0], ctx.inputs[0].data<T>(), out, ctx.num_threads);
      return;
    }
    apply_binary(st.plans[0], ctx.inputs[0].data<T>(), ctx.inputs[1].data<T>(), out, op, ctx.num_threads, grain);
    if constexpr (std::is_same_v<T, TO>) {
      for (size_t k = 2; k < n; ++k)
        apply_binary(st.plans[k - 1], static_cast<const T*>(out), ctx.inputs[k].data<T>(), out, op, ctx.num_threads,
                     grain);
    }
  }

  template <typename T>
  Status run_numeric(const RunContext& ctx, const BinaryState& st) const {
    constexpr bool kFloat = std::is_floating_point_v<T>;
    switch (op_) {
      case BinOp::kAdd:
      case BinOp::kSum:
        chain<T, T>(
            ctx, st,
            [](T a, T b) {
              if constexpr (kFloat)
                return a + b;
              else
                return wrap_add(a, b);
            },
            kCheapGrain);
        break;
      case BinOp::kMean: {
        chain<T, T>(
            ctx, st, [](T a, T b) { return a + b; }, kCheapGrain);
        T* out = ctx.outputs[0].data<T>();
        const T count = static_cast<T>(ctx.inputs.size());
        parallel_chunks(ctx.outputs[0].numel(), kCheapGrain, ctx.num_threads, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) out[i] = out[i] / count;
        });
        break;
      }
      case BinOp::kSub:
        chain<T, T>(
            ctx, st,
            [](T a, T b) {
              if constexpr (kFloat)
                return a - b;
              else
                return wrap_sub(a, b);
            },
            kCheapGrain);
        break;
      case BinOp::kMul:
        chain<T, T>(
            ctx, st,
            [](T a, T b) {
              if constexpr (kFloat)
                return a * b;
              else
                return wrap_mul(a, b);
            },
            kCheapGrain);
        break;
      case BinOp::kDiv:
        chain<T, T>(
            ctx, st,
            [](T a, T b) {
              if constexpr (kFloat)
                return a / b;
              else
                return int_div(a, b);
            },
            kCheapGrain);
        break;
      case BinOp::kMax:
        // NaN propagates, as in NumPy's maximum.
        chain<T, T>(
            ctx, st, [](T a, T b) { return (a >= b || a != a) ? a : b; }, kCheapGrain);
        break;
      case BinOp::kMin:
        chain<T, T>(
            ctx, st, [](T a, T b) { return (a <= b || a != a) ? a : b; }, kCheapGrain);
        break;
      case BinOp::kMod: {
        const bool c_style = fmod_;
        chain<T, T>(
            ctx, st,
            [c_style](T a, T b) {
              if constexpr (kFloat)
                return std::fmod(a, b);
              else
                return int_mod(a, b, c_style);
            },
            kExpensiveGrain);
        break;
      }
      case BinOp::kPow:
        run_pow<T, T>(ctx, st);
        break;
      case BinOp::kPRelu:
        if constexpr (kFloat) {
          chain<T, T>(
              ctx, st, [](T x, T s) { return vec::select(x < 0.f, x * s, x); }, kCheapGrain);
        } else {
          chain<T, T>(
              ctx, st, [](T x, T s) { return x < 0 ? wrap_mul(x, s) : x; }, kCheapGrain);
        }
        break;
      case BinOp::kEqual:
        chain<T, uint8_t>(
            ctx, st, [](T a, T b) -> uint8_t { return a == b; }, kCheapGrain);
        break;
      case BinOp::kLess:
        chain<T, uint8_t>(
            ctx, st, [](T a, T b) -> uint8_t { return a < b; }, kCheapGrain);
        break;
      case BinOp::kGreater:
        chain<T, uint8_t>(
            ctx, st, [](T a, T b) -> uint8_t { return a > b; }, kCheapGrain);
        break;
      case BinOp::kLessOrEqual:
        chain<T, uint8_t>(
            ctx, st, [](T a, T b) -> uint8_t { return a <= b; }, kCheapGrain);
        break;
      case BinOp::kGreaterOrEqual:
        chain<T, uint8_t>(
            ctx, st, [](T a, T b) -> uint8_t { return a >= b; }, kCheapGrain);
        break;
      default:
        return internal_error(node_prefix(node_) + "op has no numeric path");
    }
    return ok_status();
  }

  // Pow with base T and exponent E. Scalar exponents 1, 2 and 3 (the common cases in exported graphs)
  // become multiplications.
  template <typename T, typename E>
  void run_pow(const RunContext& ctx, const BinaryState& st) const {
    const Tensor& e = ctx.inputs[1];
    T* out = ctx.outputs[0].data<T>();
    const T* base = ctx.inputs[0].data<T>();
    if constexpr (std::is_floating_point_v<T>) {
      if (e.numel() == 1 && st.plans[0].inner_stride(0) == 1 && st.plans[0].numel == ctx.inputs[0].numel()) {
        const double p = static_cast<double>(e.data<E>()[0]);
        if (p == 1.0 || p == 2.0 || p == 3.0) {
          parallel_chunks(st.plans[0].numel, kCheapGrain, ctx.num_threads, [&](int64_t b, int64_t end) {
            if (p == 1.0)
              for (int64_t i = b; i < end; ++i) out[i] = base[i];
            else if (p == 2.0)
              for (int64_t i = b; i < end; ++i) out[i] = base[i] * base[i];
            else
              for (int64_t i = b; i < end; ++i) out[i] = base[i] * base[i] * base[i];
          });
          return;
        }
      }
      apply_binary(
          st.plans[0], base, e.data<E>(), out, [](T a, E b) { return static_cast<T>(std::pow(a, static_cast<T>(b))); },
          ctx.num_threads, kExpensiveGrain);
    } else if constexpr (std::is_floating_point_v<E>) {
      apply_binary(
          st.plans[0], base, e.data<E>(), out,
          [](T a, E b) { return static_cast<T>(std::pow(static_cast<double>(a), static_cast<double>(b))); },
          ctx.num_threads, kExpensiveGrain);
    } else {
      apply_binary(
          st.plans[0], base, e.data<E>(), out, [](T a, E b) { return int_pow<T, E>(a, b); }, ctx.num_threads,
          kExpensiveGrain);
    }
  }

  Status run_pow_mixed(const RunContext& ctx, const BinaryState& st, DType base) const {
    const DType ex = ctx.inputs[1].dtype();
    bool handled = false;
    dispatch_numeric(base, [&](auto bt) {
      using T = decltype(bt);
      handled = dispatch_numeric(ex, [&](auto et) { run_pow<T, decltype(et)>(ctx, st); });
    });
    return handled ? ok_status() : internal_error(node_prefix(node_) + "unexpected Pow dtypes");
  }

  Status run_bool(const RunContext& ctx, const BinaryState& st) const {
    switch (op_) {
      case BinOp::kAnd:
        chain<uint8_t, uint8_t>(
            ctx, st, [](uint8_t a, uint8_t b) -> uint8_t { return (a != 0) & (b != 0); }, kCheapGrain);
        break;
      case BinOp::kOr:
        chain<uint8_t, uint8_t>(
            ctx, st, [](uint8_t a, uint8_t b) -> uint8_t { return (a != 0) | (b != 0); }, kCheapGrain);
        break;
      case BinOp::kXor:
        chain<uint8_t, uint8_t>(
            ctx, st, [](uint8_t a, uint8_t b) -> uint8_t { return (a != 0) ^ (b != 0); }, kCheapGrain);
        break;
      default:  // Equal on bool
        chain<uint8_t, uint8_t>(
            ctx, st, [](uint8_t a, uint8_t b) -> uint8_t { return (a != 0) == (b != 0); }, kCheapGrain);
        break;
    }
    return ok_status();
  }

  template <typename T>
  void shift(const RunContext& ctx, const BinaryState& st) const {
    constexpr T kBits = static_cast<T>(sizeof(T) * 8);
    if (shift_left_) {
      chain<T, T>(
          ctx, st, [](T a, T b) -> T { return b >= kBits ? T{0} : static_cast<T>(a << b); }, kCheapGrain);
    } else {
      chain<T, T>(
          ctx, st, [](T a, T b) -> T { return b >= kBits ? T{0} : static_cast<T>(a >> b); }, kCheapGrain);
    }
  }

  Status run_shift(const RunContext& ctx, const BinaryState& st, DType dt) const {
    switch (dt) {
      case DType::kUInt8:
        shift<uint8_t>(ctx, st);
        break;
      case DType::kUInt16:
        shift<uint16_t>(ctx, st);
        break;
      case DType::kUInt32:
        shift<uint32_t>(ctx, st);
        break;
      case DType::kUInt64:
        shift<uint64_t>(ctx, st);
        break;
      default:
        return internal_error(node_prefix(node_) + "unexpected BitShift dtype");
    }
    return ok_status();
  }

  Status run_where(const RunContext& ctx, const BinaryState& st, DType dt) const {
    // Where only moves elements: any dtype runs on the unsigned integer of its width.
    const auto* c = ctx.inputs[0].data<uint8_t>();
    const auto go = [&](auto tag) {
      using T = decltype(tag);
      apply_where(st.plans[0], c, static_cast<const T*>(ctx.inputs[1].raw()),
                  static_cast<const T*>(ctx.inputs[2].raw()), static_cast<T*>(ctx.outputs[0].raw()), ctx.num_threads);
    };
    switch (dtype_size(dt)) {
      case 1:
        go(uint8_t{});
        return ok_status();
      case 2:
        go(uint16_t{});
        return ok_status();
      case 4:
        go(uint32_t{});
        return ok_status();
      case 8:
        go(uint64_t{});
        return ok_status();
      default:
        return internal_error(node_prefix(node_) + "unexpected Where dtype " + dtype_name(dt));
    }
  }

  graph::Node node_;
  BinOp op_;
  bool fmod_ = false;
  bool shift_left_ = false;
};

struct BinarySpec {
  const char* name;
  BinOp op;
  int since;
};

constexpr BinarySpec kBinarySpecs[] = {
    {"Add", BinOp::kAdd, 7},
    {"Sub", BinOp::kSub, 7},
    {"Mul", BinOp::kMul, 7},
    {"Div", BinOp::kDiv, 7},
    {"Pow", BinOp::kPow, 7},
    {"Mod", BinOp::kMod, 10},
    {"Max", BinOp::kMax, 6},
    {"Min", BinOp::kMin, 6},
    {"Sum", BinOp::kSum, 6},
    {"Mean", BinOp::kMean, 6},
    {"Equal", BinOp::kEqual, 7},
    {"Less", BinOp::kLess, 7},
    {"Greater", BinOp::kGreater, 7},
    {"LessOrEqual", BinOp::kLessOrEqual, 12},
    {"GreaterOrEqual", BinOp::kGreaterOrEqual, 12},
    {"And", BinOp::kAnd, 7},
    {"Or", BinOp::kOr, 7},
    {"Xor", BinOp::kXor, 7},
    {"BitShift", BinOp::kBitShift, 11},
    {"Where", BinOp::kWhere, 9},
    {"PRelu", BinOp::kPRelu, 7},
};

}  // namespace

Status register_binary(KernelRegistry& reg) {
  for (const BinarySpec& spec : kBinarySpecs) {
    const BinOp op = spec.op;
    SL_RETURN_IF_ERROR(register_ops(reg, {spec.name}, spec.since, INT_MAX,
                                    [op](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
                                      auto k = std::make_unique<BinaryKernel>(args.node, op);
                                      SL_RETURN_IF_ERROR(k->validate());
                                      return std::unique_ptr<Kernel>(std::move(k));
                                    }));
  }
  return ok_status();
}

}  // namespace streamline::ops::cpu::math

namespace streamline::ops::cpu {

Status register_elementwise(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(math::register_binary(reg));
  return math::register_unary(reg);
}

}  // namespace streamline::ops::cpu
