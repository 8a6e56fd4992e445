// Reference elementwise kernels and Cast: one element at a time, in double (floating types) or int64
// (integer types), with broadcasting done by unravelling every output index. Softmax, reductions and
// normalisations are in ref_math_nn.cc.

#include <cfloat>
#include <climits>
#include <cmath>
#include <functional>
#include <limits>

#include "ops/reference/ref_math_util.h"
#include "ops/reference/reference.h"

namespace streamline::ops::reference {
namespace {

using math_util::input_offset;
using math_util::is_float_type;
using math_util::prefix;
using math_util::read_f;
using math_util::read_i;
using math_util::write_f;
using math_util::write_i;

int64_t wrap64(uint64_t v) {
  return static_cast<int64_t>(v);
}

// ---------------------------------------------------------------------------------------------
// Binary, variadic and ternary ops.

class RefBroadcastKernel final : public Kernel {
 public:
  RefBroadcastKernel(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    const std::string& op = node_.op_type;
    if (inputs.empty()) return invalid_argument(prefix(node_) + "no inputs");
    Shape out = inputs[0].shape;
    for (size_t k = 1; k < inputs.size(); ++k) {
      Shape next;
      if (!broadcast_shapes(out, inputs[k].shape, &next))
        return invalid_argument(prefix(node_) + "shapes " + out.to_string() + " and " + inputs[k].shape.to_string() +
                                " cannot be broadcast together");
      out = next;
    }
    DType dt = inputs[0].dtype;
    if (op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" || op == "GreaterOrEqual")
      dt = DType::kBool;
    if (op == "Where") dt = inputs[1].dtype;
    if (op == "Mod" && is_float_type(inputs[0].dtype) && node_.attr_int("fmod", 0) == 0)
      return invalid_argument(prefix(node_) + "fmod must be 1 for floating-point inputs");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{dt, out, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    Tensor& y = ctx.outputs[0];
    const Shape& out = y.shape();
    const std::string& op = node_.op_type;
    const size_t n = ctx.inputs.size();
    const bool fl = is_float_type(ctx.inputs[op == "Where" ? 1 : 0].dtype());
    for (int64_t i = 0; i < y.numel(); ++i) {
      std::vector<int64_t> off(n);
      for (size_t k = 0; k < n; ++k) off[k] = input_offset(out, i, ctx.inputs[k].shape());
      if (op == "Where") {
        const bool c = read_i(ctx.inputs[0], off[0]) != 0;
        const size_t src = c ? 1 : 2;
        if (fl)
          write_f(y, i, read_f(ctx.inputs[src], off[src]));
        else
          write_i(y, i, read_i(ctx.inputs[src], off[src]));
        continue;
      }
      if (fl) {
        double acc = read_f(ctx.inputs[0], off[0]);
        for (size_t k = 1; k < n; ++k) acc = float_op(acc, read_f(ctx.inputs[k], off[k]), ctx.inputs[k].dtype());
        if (n == 1 || !is_compare(op)) {
          if (op == "Mean") acc /= static_cast<double>(n);
          write_f(y, i, acc);
        } else {
          write_i(y, i, static_cast<int64_t>(acc));
        }
      } else {
        int64_t acc = read_i(ctx.inputs[0], off[0]);
        if (op == "Pow" && is_float_type(ctx.inputs[1].dtype())) {
          acc = static_cast<int64_t>(std::pow(static_cast<double>(acc), read_f(ctx.inputs[1], off[1])));
        } else {
          for (size_t k = 1; k < n; ++k) acc = int_op(acc, read_i(ctx.inputs[k], off[k]), ctx.inputs[0].dtype());
        }
        write_i(y, i, acc);
      }
    }
    return ok_status();
  }

 private:
  static bool is_compare(const std::string& op) {
    return op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" || op == "GreaterOrEqual";
  }

  double float_op(double a, double b, DType b_type) const {
    const std::string& op = node_.op_type;
    if (op == "Add" || op == "Sum" || op == "Mean") return a + b;
    if (op == "Sub") return a - b;
    if (op == "Mul") return a * b;
    if (op == "Div") return a / b;
    if (op == "Pow") return std::pow(a, b);
    if (op == "Mod") return std::fmod(a, b);
    if (op == "Max") return (std::isnan(a) || std::isnan(b)) ? NAN : std::max(a, b);
    if (op == "Min") return (std::isnan(a) || std::isnan(b)) ? NAN : std::min(a, b);
    if (op == "PRelu") return a < 0 ? a * b : a;
    if (op == "Equal") return a == b;
    if (op == "Less") return a < b;
    if (op == "Greater") return a > b;
    if (op == "LessOrEqual") return a <= b;
    if (op == "GreaterOrEqual") return a >= b;
    return NAN;
  }

  int64_t int_op(int64_t a, int64_t b, DType type) const {
    const std::string& op = node_.op_type;
    const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    if (op == "Add" || op == "Sum") return wrap64(ua + ub);
    if (op == "Sub") return wrap64(ua - ub);
    if (op == "Mul") return wrap64(ua * ub);
    if (op == "Div") {
      if (b == 0) return 0;
      if (b == -1) return wrap64(0 - ua);
      return a / b;
    }
    if (op == "Mod") {
      if (b == 0 || b == -1) return 0;
      int64_t r = a % b;
      if (node_.attr_int("fmod", 0) == 0 && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
    if (op == "Pow") {
      if (b < 0) return a == 1 ? 1 : (a == -1 ? (b % 2 == 0 ? 1 : -1) : 0);
      uint64_t r = 1;
      for (int64_t k = 0; k < b; ++k) r *= ua;
      return wrap64(r);
    }
    if (op == "Max") return std::max(a, b);
    if (op == "Min") return std::min(a, b);
    if (op == "PRelu") return a < 0 ? wrap64(ua * ub) : a;
    if (op == "Equal") return type == DType::kBool ? ((a != 0) == (b != 0)) : a == b;
    if (op == "Less") return a < b;
    if (op == "Greater") return a > b;
    if (op == "LessOrEqual") return a <= b;
    if (op == "GreaterOrEqual") return a >= b;
    if (op == "And") return (a != 0) && (b != 0);
    if (op == "Or") return (a != 0) || (b != 0);
    if (op == "Xor") return (a != 0) != (b != 0);
    if (op == "BitShift") {
      const int64_t bits = static_cast<int64_t>(dtype_size(type) * 8);
      if (ub >= static_cast<uint64_t>(bits)) return 0;
      const uint64_t mask = bits == 64 ? ~uint64_t{0} : ((uint64_t{1} << bits) - 1);
      return wrap64(node_.attr_string("direction", "") == "LEFT" ? ((ua << b) & mask) : ((ua & mask) >> b));
    }
    return 0;
  }

  graph::Node node_;
};

// ---------------------------------------------------------------------------------------------
// Unary ops and Clip.

double unary_value(const graph::Node& node, double x) {
  const std::string& op = node.op_type;
  if (op == "Relu") return x > 0 ? x : 0;
  if (op == "LeakyRelu") return x < 0 ? node.attr_float("alpha", 0.01f) * x : x;
  if (op == "Elu") return x < 0 ? node.attr_float("alpha", 1.f) * (std::exp(x) - 1) : x;
  if (op == "Selu") {
    const double a = node.attr_float("alpha", 1.67326319217681884765625f);
    const double g = node.attr_float("gamma", 1.05070102214813232421875f);
    return x > 0 ? g * x : g * (a * std::exp(x) - a);
  }
  if (op == "Celu") {
    const double a = node.attr_float("alpha", 1.f);
    return std::max(0.0, x) + std::min(0.0, a * (std::exp(x / a) - 1));
  }
  if (op == "ThresholdedRelu") return x > node.attr_float("alpha", 1.f) ? x : 0;
  if (op == "Sigmoid") return 1 / (1 + std::exp(-x));
  if (op == "HardSigmoid")
    return std::max(0.0, std::min(1.0, node.attr_float("alpha", 0.2f) * x + node.attr_float("beta", 0.5f)));
  if (op == "HardSwish") return x * std::max(0.0, std::min(1.0, x / 6 + 0.5));
  if (op == "Tanh") return std::tanh(x);
  if (op == "Softplus") return std::log(1 + std::exp(x));
  if (op == "Softsign") return x / (1 + std::fabs(x));
  if (op == "Mish") return x * std::tanh(std::log(1 + std::exp(x)));
  if (op == "Erf") return std::erf(x);
  if (op == "Exp") return std::exp(x);
  if (op == "Log") return std::log(x);
  if (op == "Sqrt") return std::sqrt(x);
  if (op == "Reciprocal") return 1 / x;
  if (op == "Neg") return -x;
  if (op == "Abs") return std::fabs(x);
  if (op == "Sign") return x > 0 ? 1 : (x < 0 ? -1 : x);
  if (op == "Floor") return std::floor(x);
  if (op == "Ceil") return std::ceil(x);
  if (op == "Round") return std::nearbyint(x);
  if (op == "Sin") return std::sin(x);
  if (op == "Cos") return std::cos(x);
  if (op == "Tan") return std::tan(x);
  if (op == "Asin") return std::asin(x);
  if (op == "Acos") return std::acos(x);
  if (op == "Atan") return std::atan(x);
  if (op == "Sinh") return std::sinh(x);
  if (op == "Cosh") return std::cosh(x);
  if (op == "Asinh") return std::asinh(x);
  if (op == "Acosh") return std::acosh(x);
  if (op == "Atanh") return std::atanh(x);
  return NAN;
}

class RefUnaryKernel final : public Kernel {
 public:
  explicit RefUnaryKernel(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    if (inputs.empty() || !inputs[0].present()) return invalid_argument(prefix(node_) + "missing input");
    const std::string& op = node_.op_type;
    const DType dt = (op == "IsNaN" || op == "IsInf") ? DType::kBool : inputs[0].dtype;
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{dt, inputs[0].shape, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const std::string& op = node_.op_type;
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (op == "Not") {
        write_i(y, i, read_i(x, i) == 0);
      } else if (op == "IsNaN") {
        write_i(y, i, std::isnan(read_f(x, i)));
      } else if (op == "IsInf") {
        const double v = read_f(x, i);
        const bool pos = node_.attr_int("detect_positive", 1) != 0 && v == INFINITY;
        const bool neg = node_.attr_int("detect_negative", 1) != 0 && v == -INFINITY;
        write_i(y, i, pos || neg);
      } else if (op == "Clip") {
        clip(ctx, i);
      } else if (is_float_type(x.dtype())) {
        write_f(y, i, unary_value(node_, read_f(x, i)));
      } else {
        const int64_t v = read_i(x, i);
        int64_t r = 0;
        if (op == "Relu")
          r = v > 0 ? v : 0;
        else if (op == "Neg")
          r = wrap64(0 - static_cast<uint64_t>(v));
        else if (op == "Abs")
          r = v < 0 ? wrap64(0 - static_cast<uint64_t>(v)) : v;
        else if (op == "Sign")
          r = (v > 0) - (v < 0);
        write_i(y, i, r);
      }
    }
    return ok_status();
  }

 private:
  void clip(const RunContext& ctx, int64_t i) const {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const bool fl = is_float_type(x.dtype());
    double lo = fl ? -FLT_MAX : static_cast<double>(LLONG_MIN);
    double hi = fl ? FLT_MAX : static_cast<double>(LLONG_MAX);
    if (node_.opset < 11) {
      lo = node_.attr_float("min", -FLT_MAX);
      hi = node_.attr_float("max", FLT_MAX);
    } else {
      if (ctx.inputs.size() > 1 && ctx.inputs[1].defined()) lo = read_f(ctx.inputs[1], 0);
      if (ctx.inputs.size() > 2 && ctx.inputs[2].defined()) hi = read_f(ctx.inputs[2], 0);
    }
    if (fl) {
      double v = read_f(x, i);
      if (v < lo) v = lo;
      if (v > hi) v = hi;
      write_f(y, i, v);
    } else {
      int64_t v = read_i(x, i);
      if (static_cast<double>(v) < lo) v = static_cast<int64_t>(lo);
      if (static_cast<double>(v) > hi) v = static_cast<int64_t>(hi);
      write_i(y, i, v);
    }
  }

  graph::Node node_;
};

// ---------------------------------------------------------------------------------------------
// Cast and CastLike.

class RefCastKernel final : public Kernel {
 public:
  explicit RefCastKernel(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    DType to;
    if (node_.op_type == "CastLike") {
      if (inputs.size() != 2) return invalid_argument(prefix(node_) + "expected 2 inputs");
      to = inputs[1].dtype;
    } else {
      to = static_cast<DType>(node_.attr_int("to", 0));
    }
    if (!dtype_supported(to))
      return unsupported(prefix(node_) + "cannot cast to type " + std::to_string(static_cast<int>(to)));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{to, inputs[0].shape, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const DType to = y.dtype();
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (is_float_type(x.dtype())) {
        const double v = read_f(x, i);
        if (is_float_type(to))
          write_f(y, i, v);
        else if (to == DType::kBool)
          write_i(y, i, v != 0);
        else
          write_i(y, i, math_util::saturate_to_int(v, to));
      } else if (x.dtype() == DType::kUInt64) {
        const uint64_t v = x.data<uint64_t>()[i];
        if (is_float_type(to))
          write_f(y, i, static_cast<double>(v));
        else if (to == DType::kBool)
          write_i(y, i, v != 0);
        else
          write_i(y, i, static_cast<int64_t>(v));
      } else {
        const int64_t v = read_i(x, i);
        if (is_float_type(to))
          write_f(y, i, static_cast<double>(v));
        else if (to == DType::kBool)
          write_i(y, i, v != 0);
        else
          write_i(y, i, v);
      }
    }
    return ok_status();
  }

 private:
  graph::Node node_;
};

template <typename K>
KernelFactory factory() {
  return [](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<K>(args.node));
  };
}

}  // namespace

Status register_math(KernelRegistry& reg) {
  using math_util::add_ref;
  for (const char* op : {"Add", "Sub",  "Mul",   "Div",      "Pow",     "Max",         "Min",
                         "Sum", "Mean", "Equal", "Less",     "Greater", "LessOrEqual", "GreaterOrEqual",
                         "And", "Or",   "Xor",   "BitShift", "Where",   "PRelu",       "Mod"})
    SL_RETURN_IF_ERROR(add_ref(reg, op, 1, factory<RefBroadcastKernel>()));
  for (const char* op : {"Relu",    "LeakyRelu",   "Elu",       "Selu",  "Celu",     "ThresholdedRelu",
                         "Sigmoid", "HardSigmoid", "HardSwish", "Tanh",  "Softplus", "Softsign",
                         "Mish",    "Erf",         "Exp",       "Log",   "Sqrt",     "Reciprocal",
                         "Neg",     "Abs",         "Sign",      "Floor", "Ceil",     "Round",
                         "Sin",     "Cos",         "Tan",       "Asin",  "Acos",     "Atan",
                         "Sinh",    "Cosh",        "Asinh",     "Acosh", "Atanh",    "Not",
                         "IsNaN",   "IsInf",       "Clip"})
    SL_RETURN_IF_ERROR(add_ref(reg, op, 1, factory<RefUnaryKernel>()));
  SL_RETURN_IF_ERROR(add_ref(reg, "Cast", 1, factory<RefCastKernel>()));
  SL_RETURN_IF_ERROR(add_ref(reg, "CastLike", 15, factory<RefCastKernel>()));
  return register_math_nn(reg);
}

}  // namespace streamline::ops::reference
