// Unary math for the floating types the float32 kernels of math_unary.cc leave out: float64 (computed
// in double), float16 and bfloat16 (computed in float, rounded once per result). The activations,
// the exponential/trigonometric functions, rounding, IsNaN and IsInf (bool outputs), plus Gelu
// (opset 20, "none" or "tanh" approximation; float32 Gelu lives in transformer.cc) and Swish (opset
// 24, every floating type). Defs are keyed by exact dtype.
//
//   y[i] = f(x[i])     f from the op's scalar definition in the ONNX specification

#include <cmath>
#include <limits>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"

namespace streamline::ops::cpu {
namespace {

enum class Fn {
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
  kGelu,
  kSwish,
  kIsNaN,
  kIsInf,
};

struct Params {
  double alpha = 0, beta = 0, gamma = 0;
  bool detect_negative = true, detect_positive = true;
  bool tanh_gelu = false;
};

double softplus(double x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

double apply(Fn f, const Params& p, double x) {
  switch (f) {
    case Fn::kRelu:
      return x > 0 ? x : 0.0;
    case Fn::kLeakyRelu:
      return x < 0 ? p.alpha * x : x;
    case Fn::kElu:
      return x < 0 ? p.alpha * std::expm1(x) : x;
    case Fn::kSelu:
      return p.gamma * (x > 0 ? x : p.alpha * std::expm1(x));
    case Fn::kCelu:
      return x > 0 ? x : p.alpha * std::expm1(x / p.alpha);
    case Fn::kThresholdedRelu:
      return x > p.alpha ? x : 0.0;
    case Fn::kSigmoid:
      return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
    case Fn::kHardSigmoid:
      return std::max(0.0, std::min(1.0, p.alpha * x + p.beta));
    case Fn::kHardSwish:
      return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5));
    case Fn::kTanh:
      return std::tanh(x);
    case Fn::kSoftplus:
      return softplus(x);
    case Fn::kSoftsign:
      return x / (1.0 + std::fabs(x));
    case Fn::kMish:
      return x * std::tanh(softplus(x));
    case Fn::kErf:
      return std::erf(x);
    case Fn::kExp:
      return std::exp(x);
    case Fn::kLog:
      return std::log(x);
    case Fn::kSqrt:
      return std::sqrt(x);
    case Fn::kReciprocal:
      return 1.0 / x;
    case Fn::kNeg:
      return -x;
    case Fn::kAbs:
      return std::fabs(x);
    case Fn::kSign:
      return x > 0 ? 1.0 : (x < 0 ? -1.0 : x);
    case Fn::kFloor:
      return std::floor(x);
    case Fn::kCeil:
      return std::ceil(x);
    case Fn::kRound:
      return std::nearbyint(x);  // half to even in the default rounding mode
    case Fn::kSin:
      return std::sin(x);
    case Fn::kCos:
      return std::cos(x);
    case Fn::kTan:
      return std::tan(x);
    case Fn::kAsin:
      return std::asin(x);
    case Fn::kAcos:
      return std::acos(x);
    case Fn::kAtan:
      return std::atan(x);
    case Fn::kSinh:
      return std::sinh(x);
    case Fn::kCosh:
      return std::cosh(x);
    case Fn::kAsinh:
      return std::asinh(x);
    case Fn::kAcosh:
      return std::acosh(x);
    case Fn::kAtanh:
      return std::atanh(x);
    case Fn::kGelu:
      if (p.tanh_gelu) {
        const double k = std::sqrt(2.0 / M_PI);
        return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
      }
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Fn::kSwish: {
      const double ax = p.alpha * x;
      return x * (ax >= 0 ? 1.0 / (1.0 + std::exp(-ax)) : std::exp(ax) / (1.0 + std::exp(ax)));
    }
    case Fn::kIsNaN:
      return std::isnan(x) ? 1.0 : 0.0;
    case Fn::kIsInf:
      return (std::isinf(x) && ((x > 0 && p.detect_positive) || (x < 0 && p.detect_negative))) ? 1.0 : 0.0;
  }
  return x;
}

Params read_params(const graph::Node& n, Fn f) {
  Params p;
  switch (f) {
    case Fn::kLeakyRelu:
      p.alpha = n.attr_float("alpha", 0.01f);
      break;
    case Fn::kElu:
    case Fn::kCelu:
    case Fn::kThresholdedRelu:
      p.alpha = n.attr_float("alpha", 1.f);
      break;
    case Fn::kSelu:
      p.alpha = n.attr_float("alpha", 1.67326319217681884765625f);
      p.gamma = n.attr_float("gamma", 1.05070102214813232421875f);
      break;
    case Fn::kHardSigmoid:
      p.alpha = n.attr_float("alpha", 0.2f);
      p.beta = n.attr_float("beta", 0.5f);
      break;
    case Fn::kIsInf:
      p.detect_negative = n.attr_int("detect_negative", 1) != 0;
      p.detect_positive = n.attr_int("detect_positive", 1) != 0;
      break;
    case Fn::kGelu:
      p.tanh_gelu = n.attr_string("approximate", "none") == "tanh";
      break;
    case Fn::kSwish:
      p.alpha = n.attr_float("alpha", 1.f);
      break;
    default:
      break;
  }
  return p;
}

class TypedUnaryKernel final : public DataKernel {
 public:
  TypedUnaryKernel(const graph::Node& node, Fn f) : DataKernel(node), fn_(f), params_(read_params(node, f)) {}

  Status init(const KernelCreateArgs& a) {
    if (fn_ == Fn::kGelu) {
      const std::string approx = a.node.attr_string("approximate", "none");
      if (approx != "none" && approx != "tanh")
        return invalid("approximate must be 'none' or 'tanh', got '" + approx + "'");
    }
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 1 || !in[0].present()) return invalid("expected 1 input");
    if (!is_float_dtype(in[0].dtype)) return unsupported_error(std::string("dtype ") + dtype_name(in[0].dtype));
    const bool test = fn_ == Fn::kIsNaN || fn_ == Fn::kIsInf;
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{test ? DType::kBool : in[0].dtype, in[0].shape, Layout::kPlain});
    rr.inplace = {test ? -1 : 0};
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const DType dt = x.dtype(), ot = y.dtype();
    const int64_t n = x.numel();
#pragma omp parallel for num_threads(omp_threads(ctx.num_threads)) if (n > 65536) schedule(static)
    for (int64_t i = 0; i < n; ++i) store_f(ot, y.raw(), i, apply(fn_, params_, load_f(dt, x.raw(), i)));
    return ok_status();
  }

 private:
  Fn fn_;
  Params params_;
};

struct Spec {
  const char* name;
  Fn fn;
  int since;
};

constexpr Spec kSpecs[] = {
    {"Relu", Fn::kRelu, 6},
    {"LeakyRelu", Fn::kLeakyRelu, 6},
    {"Elu", Fn::kElu, 6},
    {"Selu", Fn::kSelu, 6},
    {"Celu", Fn::kCelu, 12},
    {"ThresholdedRelu", Fn::kThresholdedRelu, 10},
    {"Sigmoid", Fn::kSigmoid, 6},
    {"HardSigmoid", Fn::kHardSigmoid, 6},
    {"HardSwish", Fn::kHardSwish, 14},
    {"Tanh", Fn::kTanh, 6},
    {"Softplus", Fn::kSoftplus, 1},
    {"Softsign", Fn::kSoftsign, 1},
    {"Mish", Fn::kMish, 18},
    {"Erf", Fn::kErf, 9},
    {"Exp", Fn::kExp, 6},
    {"Log", Fn::kLog, 6},
    {"Sqrt", Fn::kSqrt, 6},
    {"Reciprocal", Fn::kReciprocal, 6},
    {"Neg", Fn::kNeg, 6},
    {"Abs", Fn::kAbs, 6},
    {"Sign", Fn::kSign, 9},
    {"Floor", Fn::kFloor, 6},
    {"Ceil", Fn::kCeil, 6},
    {"Round", Fn::kRound, 11},
    {"Sin", Fn::kSin, 7},
    {"Cos", Fn::kCos, 7},
    {"Tan", Fn::kTan, 7},
    {"Asin", Fn::kAsin, 7},
    {"Acos", Fn::kAcos, 7},
    {"Atan", Fn::kAtan, 7},
    {"Sinh", Fn::kSinh, 9},
    {"Cosh", Fn::kCosh, 9},
    {"Asinh", Fn::kAsinh, 9},
    {"Acosh", Fn::kAcosh, 9},
    {"Atanh", Fn::kAtanh, 9},
    {"IsNaN", Fn::kIsNaN, 9},
    {"IsInf", Fn::kIsInf, 10},
};

Status add_fn(KernelRegistry& reg, const char* name, Fn fn, int since, DType t) {
  return add_typed_def(reg, name, since, t, [fn](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    auto k = std::make_unique<TypedUnaryKernel>(a.node, fn);
    SL_RETURN_IF_ERROR(k->init(a));
    return std::unique_ptr<Kernel>(std::move(k));
  });
}

}  // namespace

Status register_unary_types(KernelRegistry& reg) {
  for (const Spec& s : kSpecs)
    for (DType t : {DType::kFloat64, DType::kFloat16, DType::kBFloat16})
      SL_RETURN_IF_ERROR(add_fn(reg, s.name, s.fn, s.since, t));
  // Gelu (opset 20); its float32 kernel is streamline.Gelu's (transformer.cc).
  for (DType t : {DType::kFloat64, DType::kFloat16, DType::kBFloat16})
    SL_RETURN_IF_ERROR(add_fn(reg, "Gelu", Fn::kGelu, 20, t));
  // Swish (opset 24): x * sigmoid(alpha * x).
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16})
    SL_RETURN_IF_ERROR(add_fn(reg, "Swish", Fn::kSwish, 24, t));
  return ok_status();
}

}  // namespace streamline::ops::cpu
