// Unary elementwise ops (activations and math functions) and Clip. All are layout-agnostic: they
// walk the raw buffer, keep the input's layout, and may run in place.

#include <cfloat>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"
#include "ops/cpu/math_vec.h"

namespace streamline::ops::cpu::math {
namespace {

enum class UnaryOp {
  kRelu,
  kLeakyRelu,
  kElu,
  kSelu,
  kCelu,
  kThresholdedRelu,
  kSigmoid,
  kHardSigmoid,
  kHardSwish,
  kTanh,
  kSoftplus,
  kSoftsign,
  kMish,
  kErf,
  kExp,
  kLog,
  kSqrt,
  kReciprocal,
  kNeg,
  kAbs,
  kSign,
  kFloor,
  kCeil,
  kRound,
  kSin,
  kCos,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  kNot,
  kIsNaN,
  kIsInf,
};

struct UnarySpec {
  const char* name;
  UnaryOp op;
  int since;
  bool ints;  // also defined for int32/int64
  bool expensive;
};

constexpr UnarySpec kUnarySpecs[] = {
    {"Relu", UnaryOp::kRelu, 6, true, false},
    {"LeakyRelu", UnaryOp::kLeakyRelu, 6, false, false},
    {"Elu", UnaryOp::kElu, 6, false, true},
    {"Selu", UnaryOp::kSelu, 6, false, true},
    {"Celu", UnaryOp::kCelu, 12, false, true},
    {"ThresholdedRelu", UnaryOp::kThresholdedRelu, 10, false, false},
    {"Sigmoid", UnaryOp::kSigmoid, 6, false, true},
    {"HardSigmoid", UnaryOp::kHardSigmoid, 6, false, false},
    {"HardSwish", UnaryOp::kHardSwish, 14, false, false},
    {"Tanh", UnaryOp::kTanh, 6, false, true},
    {"Softplus", UnaryOp::kSoftplus, 1, false, true},
    {"Softsign", UnaryOp::kSoftsign, 1, false, false},
    {"Mish", UnaryOp::kMish, 18, false, true},
    {"Erf", UnaryOp::kErf, 9, false, true},
    {"Exp", UnaryOp::kExp, 6, false, true},
    {"Log", UnaryOp::kLog, 6, false, true},
    {"Sqrt", UnaryOp::kSqrt, 6, false, false},
    {"Reciprocal", UnaryOp::kReciprocal, 6, false, false},
    {"Neg", UnaryOp::kNeg, 6, true, false},
    {"Abs", UnaryOp::kAbs, 6, true, false},
    {"Sign", UnaryOp::kSign, 9, true, false},
    {"Floor", UnaryOp::kFloor, 6, false, false},
    {"Ceil", UnaryOp::kCeil, 6, false, false},
    {"Round", UnaryOp::kRound, 11, false, false},
    {"Sin", UnaryOp::kSin, 7, false, true},
    {"Cos", UnaryOp::kCos, 7, false, true},
    {"Tan", UnaryOp::kTan, 7, false, true},
    {"Asin", UnaryOp::kAsin, 7, false, true},
    {"Acos", UnaryOp::kAcos, 7, false, true},
    {"Atan", UnaryOp::kAtan, 7, false, true},
    {"Sinh", UnaryOp::kSinh, 9, false, true},
    {"Cosh", UnaryOp::kCosh, 9, false, true},
    {"Asinh", UnaryOp::kAsinh, 9, false, true},
    {"Acosh", UnaryOp::kAcosh, 9, false, true},
    {"Atanh", UnaryOp::kAtanh, 9, false, true},
    {"Not", UnaryOp::kNot, 1, false, false},
    {"IsNaN", UnaryOp::kIsNaN, 9, false, false},
    {"IsInf", UnaryOp::kIsInf, 10, false, false},
};

struct UnaryParams {
  float alpha = 0.f;
  float beta = 0.f;
  float gamma = 0.f;
  bool detect_negative = true;
  bool detect_positive = true;
};

UnaryParams read_params(const graph::Node& node, UnaryOp op) {
  UnaryParams p;
  switch (op) {
    case UnaryOp::kLeakyRelu:
      p.alpha = node.attr_float("alpha", 0.01f);
      break;
    case UnaryOp::kElu:
      p.alpha = node.attr_float("alpha", 1.f);
      break;
    case UnaryOp::kCelu:
      p.alpha = node.attr_float("alpha", 1.f);
      break;
    case UnaryOp::kSelu:
      p.alpha = node.attr_float("alpha", 1.67326319217681884765625f);
      p.gamma = node.attr_float("gamma", 1.05070102214813232421875f);
      break;
    case UnaryOp::kThresholdedRelu:
      p.alpha = node.attr_float("alpha", 1.f);
      break;
    case UnaryOp::kHardSigmoid:
      p.alpha = node.attr_float("alpha", 0.2f);
      p.beta = node.attr_float("beta", 0.5f);
      break;
    case UnaryOp::kIsInf:
      p.detect_negative = node.attr_int("detect_negative", 1) != 0;
      p.detect_positive = node.attr_int("detect_positive", 1) != 0;
      break;
    default:
      break;
  }
  return p;
}

// y = f(x) over one chunk of float32 elements. Each case is a plain loop the compiler vectorises
// (the trigonometric ones excepted). x and y may be the same buffer.
void float_loop(UnaryOp op, const UnaryParams& p, const float* x, float* y, int64_t n) {
  const float a = p.alpha, b = p.beta, g = p.gamma;
  switch (op) {
    case UnaryOp::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
      break;
    case UnaryOp::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = vec::select(x[i] < 0.f, a * x[i], x[i]);
      break;
    case UnaryOp::kElu:
      for (int64_t i = 0; i < n; ++i) y[i] = vec::select(x[i] < 0.f, a * vec::expm1(x[i]), x[i]);
      break;
    case UnaryOp::kSelu:
      for (int64_t i = 0; i < n; ++i) y[i] = g * vec::select(x[i] > 0.f, x[i], a * vec::expm1(x[i]));
      break;
    case UnaryOp::kCelu: {
      const float inv = 1.f / a;
      for (int64_t i = 0; i < n; ++i) {
        const float neg = a * vec::expm1(x[i] * inv);
        y[i] = vec::select(x[i] > 0.f, x[i], neg);
      }
      break;
    }
    case UnaryOp::kThresholdedRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > a ? x[i] : 0.f;
      break;
    case UnaryOp::kSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = vec::sigmoid(x[i]);
      break;
    case UnaryOp::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) {
        const float v = vec::fmadd(a, x[i], b);
        y[i] = vec::select(v < 0.f, 0.f, vec::select(v > 1.f, 1.f, v));
      }
      break;
    case UnaryOp::kHardSwish:
      for (int64_t i = 0; i < n; ++i) {
        const float v = vec::fmadd(1.f / 6.f, x[i], 0.5f);
        y[i] = x[i] * vec::select(v < 0.f, 0.f, vec::select(v > 1.f, 1.f, v));
      }
      break;
    case UnaryOp::kTanh:
      for (int64_t i = 0; i < n; ++i) y[i] = vec::tanh(x[i]);
      break;
    case UnaryOp::kSoftplus:
      for (int64_t i = 0; i < n; ++i) y[i] = vec::softplus(x[i]);
      break;
    case UnaryOp::kSoftsign:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.f + std::fabs(x[i]));
      break;
    case UnaryOp::kMish:
      for (int64_t i = 0; i < n; ++i) y[i] = vec::mish(x[i]);
      break;
    case UnaryOp::kErf:
      for (int64_t i = 0; i < n; ++i) y[i] = vec::erf(x[i]);
      break;
    case UnaryOp::kExp:
      for (int64_t i = 0; i < n; ++i) y[i] = vec::exp(x[i]);
      break;
    case UnaryOp::kLog:
      for (int64_t i = 0; i < n; ++i) y[i] = vec::log(x[i]);
      break;
    case UnaryOp::kSqrt:
      vec::sqrt_array(x, y, n);
      break;
    case UnaryOp::kReciprocal:
      for (int64_t i = 0; i < n; ++i) y[i] = 1.f / x[i];
      break;
    case UnaryOp::kNeg:
      for (int64_t i = 0; i < n; ++i) y[i] = -x[i];
      break;
    case UnaryOp::kAbs:
      for (int64_t i = 0; i < n; ++i) y[i] = std::fabs(x[i]);
      break;
    case UnaryOp::kSign:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? 1.f : (x[i] < 0.f ? -1.f : x[i]);
      break;
    case UnaryOp::kFloor:
      for (int64_t i = 0; i < n; ++i) y[i] = std::floor(x[i]);
      break;
    case UnaryOp::kCeil:
      for (int64_t i = 0; i < n; ++i) y[i] = std::ceil(x[i]);
      break;
    // rint rounds half to even in the default rounding mode, as Round requires.
    case UnaryOp::kRound:
      for (int64_t i = 0; i < n; ++i) y[i] = std::rint(x[i]);
      break;
    case UnaryOp::kSin:
      for (int64_t i = 0; i < n; ++i) y[i] = std::sin(x[i]);
      break;
    case UnaryOp::kCos:
      for (int64_t i = 0; i < n; ++i) y[i] = std::cos(x[i]);
      break;
    case UnaryOp::kTan:
      for (int64_t i = 0; i < n; ++i) y[i] = std::tan(x[i]);
      break;
    case UnaryOp::kAsin:
      for (int64_t i = 0; i < n; ++i) y[i] = std::asin(x[i]);
      break;
    case UnaryOp::kAcos:
      for (int64_t i = 0; i < n; ++i) y[i] = std::acos(x[i]);
      break;
    case UnaryOp::kAtan:
      for (int64_t i = 0; i < n; ++i) y[i] = std::atan(x[i]);
      break;
    case UnaryOp::kSinh:
      for (int64_t i = 0; i < n; ++i) y[i] = std::sinh(x[i]);
      break;
    case UnaryOp::kCosh:
      for (int64_t i = 0; i < n; ++i) y[i] = std::cosh(x[i]);
      break;
    case UnaryOp::kAsinh:
      for (int64_t i = 0; i < n; ++i) y[i] = std::asinh(x[i]);
      break;
    case UnaryOp::kAcosh:
      for (int64_t i = 0; i < n; ++i) y[i] = std::acosh(x[i]);
      break;
    case UnaryOp::kAtanh:
      for (int64_t i = 0; i < n; ++i) y[i] = std::atanh(x[i]);
      break;
    default:
      break;
  }
}

template <typename T>
void int_loop(UnaryOp op, const T* x, T* y, int64_t n) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case UnaryOp::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : T{0};
      break;
    case UnaryOp::kNeg:
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(U{0} - static_cast<U>(x[i]));
      break;
    case UnaryOp::kAbs:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0 ? static_cast<T>(U{0} - static_cast<U>(x[i])) : x[i];
      break;
    case UnaryOp::kSign:
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>((x[i] > 0) - (x[i] < 0));
      break;
    default:
      break;
  }
}

class UnaryKernel final : public Kernel {
 public:
  UnaryKernel(const graph::Node& node, const UnarySpec& spec)
      : node_(node), spec_(spec), params_(read_params(node, spec.op)) {}

  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    if (inputs.size() != 1 || !inputs[0].present())
      return invalid_argument(node_prefix(node_) + "expected 1 input, got " + std::to_string(inputs.size()));
    const DType dt = inputs[0].dtype;
    DType out = dt;
    if (spec_.op == UnaryOp::kNot) {
      SL_RETURN_IF_ERROR(check_dtype(node_, dt, {DType::kBool}));
    } else if (spec_.op == UnaryOp::kIsNaN || spec_.op == UnaryOp::kIsInf) {
      SL_RETURN_IF_ERROR(check_dtype(node_, dt, {DType::kFloat32}));
      out = DType::kBool;
    } else if (spec_.ints) {
      SL_RETURN_IF_ERROR(check_dtype(node_, dt, {DType::kFloat32, DType::kInt32, DType::kInt64}));
    } else {
      SL_RETURN_IF_ERROR(check_dtype(node_, dt, {DType::kFloat32}));
    }
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{out, inputs[0].shape, inputs[0].layout});
    rr.inplace = {out == dt ? 0 : -1};
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const int64_t n = x.numel();
    const int64_t grain = spec_.expensive ? kExpensiveGrain : kCheapGrain;
    const UnaryOp op = spec_.op;
    switch (x.dtype()) {
      case DType::kFloat32: {
        const float* px = x.data<float>();
        if (op == UnaryOp::kIsNaN || op == UnaryOp::kIsInf) {
          auto* py = y.data<uint8_t>();
          const float pos = params_.detect_positive ? std::numeric_limits<float>::infinity() : 0.f;
          const float neg = params_.detect_negative ? -std::numeric_limits<float>::infinity() : 0.f;
          parallel_chunks(n, grain, ctx.num_threads, [&](int64_t b, int64_t e) {
            if (op == UnaryOp::kIsNaN) {
              for (int64_t i = b; i < e; ++i) py[i] = px[i] != px[i];
            } else {
              // pos/neg are 0 when not detected; x == 0 is then excluded by the infinity check.
              for (int64_t i = b; i < e; ++i) py[i] = std::isinf(px[i]) && (px[i] == pos || px[i] == neg);
            }
          });
          return ok_status();
        }
        float* py = y.data<float>();
        parallel_chunks(n, grain, ctx.num_threads,
                        [&](int64_t b, int64_t e) { float_loop(op, params_, px + b, py + b, e - b); });
        return ok_status();
      }
      case DType::kInt32:
        parallel_chunks(n, grain, ctx.num_threads, [&](int64_t b, int64_t e) {
          int_loop<int32_t>(op, x.data<int32_t>() + b, y.data<int32_t>() + b, e - b);
        });
        return ok_status();
      case DType::kInt64:
        parallel_chunks(n, grain, ctx.num_threads, [&](int64_t b, int64_t e) {
          int_loop<int64_t>(op, x.data<int64_t>() + b, y.data<int64_t>() + b, e - b);
        });
        return ok_status();
      case DType::kBool: {
        const auto* px = x.data<uint8_t>();
        auto* py = y.data<uint8_t>();
        parallel_chunks(n, grain, ctx.num_threads, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) py[i] = px[i] == 0;
        });
        return ok_status();
      }
      default:
        return internal_error(node_prefix(node_) + "unexpected dtype");
    }
  }

 private:
  graph::Node node_;
  UnarySpec spec_;
  UnaryParams params_;
};

// Clip: bounds from attributes before opset 11, from optional scalar inputs 1 and 2 after.
class ClipKernel final : public Kernel {
 public:
  explicit ClipKernel(const graph::Node& node) : node_(node) {
    attr_min_ = node.attr_float("min", -FLT_MAX);
    attr_max_ = node.attr_float("max", FLT_MAX);
  }

  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    if (inputs.empty() || !inputs[0].present() || inputs.size() > 3)
      return invalid_argument(node_prefix(node_) + "expected 1 to 3 inputs");
    const DType dt = inputs[0].dtype;
    SL_RETURN_IF_ERROR(check_dtype(node_, dt, {DType::kFloat32, DType::kInt32, DType::kInt64}));
    for (size_t k = 1; k < inputs.size(); ++k) {
      if (!inputs[k].present()) continue;
      if (inputs[k].dtype != dt)
        return invalid_argument(node_prefix(node_) + "bound dtype " + dtype_name(inputs[k].dtype) +
                                " differs from input dtype " + dtype_name(dt));
      if (inputs[k].shape.numel() != 1)
        return invalid_argument(node_prefix(node_) + "bounds must be scalars, got shape " +
                                inputs[k].shape.to_string());
    }
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{dt, inputs[0].shape, inputs[0].layout});
    rr.inplace = {0};
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    switch (ctx.inputs[0].dtype()) {
      case DType::kFloat32:
        clip<float>(ctx);
        break;
      case DType::kInt32:
        clip<int32_t>(ctx);
        break;
      case DType::kInt64:
        clip<int64_t>(ctx);
        break;
      default:
        return internal_error(node_prefix(node_) + "unexpected dtype");
    }
    return ok_status();
  }

 private:
  template <typename T>
  void clip(const RunContext& ctx) const {
    T lo = std::numeric_limits<T>::lowest();
    T hi = std::numeric_limits<T>::max();
    if (node_.opset < 11) {
      lo = static_cast<T>(attr_min_);
      hi = static_cast<T>(attr_max_);
    } else {
      if (ctx.inputs.size() > 1 && ctx.inputs[1].defined()) lo = ctx.inputs[1].data<T>()[0];
      if (ctx.inputs.size() > 2 && ctx.inputs[2].defined()) hi = ctx.inputs[2].data<T>()[0];
    }
    const T* x = ctx.inputs[0].data<T>();
    T* y = ctx.outputs[0].data<T>();
    // min(max(x, lo), hi), as numpy.clip: when lo > hi every element becomes hi. NaN passes through.
    parallel_chunks(ctx.inputs[0].numel(), kCheapGrain, ctx.num_threads, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T v = x[i];
        v = v < lo ? lo : v;
        y[i] = v > hi ? hi : v;
      }
    });
  }

  graph::Node node_;
  float attr_min_;
  float attr_max_;
};

}  // namespace

Status register_unary(KernelRegistry& reg) {
  for (const UnarySpec& spec : kUnarySpecs) {
    SL_RETURN_IF_ERROR(register_ops(reg, {spec.name}, spec.since, INT_MAX,
                                    [spec](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
                                      return std::unique_ptr<Kernel>(std::make_unique<UnaryKernel>(args.node, spec));
                                    }));
  }
  return register_ops(reg, {"Clip"}, 6, INT_MAX, [](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<ClipKernel>(args.node));
  });
}

}  // namespace streamline::ops::cpu::math
