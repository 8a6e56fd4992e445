// Reference elementwise programs and streamline.Elementwise (see ref_ew.h).

#include "ops/reference/ref_ew.h"

#include <cmath>

#include "ops/reference/ref_nn_util.h"
#include "ops/reference/reference.h"

namespace streamline::ops::reference {
namespace {

using graph::EwInstr;
using graph::EwOp;

double apply(EwOp op, double a, double b, double c, double p0, double p1) {
  switch (op) {
    case EwOp::kIdentity:
      return a;
    case EwOp::kRelu:
      return a > 0 ? a : 0;
    case EwOp::kLeakyRelu:
      return a < 0 ? p0 * a : a;
    case EwOp::kSigmoid:
      return 1 / (1 + std::exp(-a));
    case EwOp::kTanh:
      return std::tanh(a);
    case EwOp::kExp:
      return std::exp(a);
    case EwOp::kLog:
      return std::log(a);
    case EwOp::kSqrt:
      return std::sqrt(a);
    case EwOp::kReciprocal:
      return 1 / a;
    case EwOp::kNeg:
      return -a;
    case EwOp::kAbs:
      return std::fabs(a);
    case EwOp::kErf:
      return std::erf(a);
    case EwOp::kHardSigmoid:
      return std::max(0.0, std::min(1.0, p0 * a + p1));
    case EwOp::kHardSwish:
      return a * std::max(0.0, std::min(1.0, a / 6 + 0.5));
    case EwOp::kSoftplus:
      return std::log1p(std::exp(a));
    case EwOp::kElu:
      return a < 0 ? p0 * std::expm1(a) : a;
    case EwOp::kClip:
      return std::min(std::max(a, p0), p1);
    case EwOp::kFloor:
      return std::floor(a);
    case EwOp::kCeil:
      return std::ceil(a);
    case EwOp::kRound:
      return std::nearbyint(a);
    case EwOp::kSign:
      return a > 0 ? 1.0 : a < 0 ? -1.0 : a;
    case EwOp::kMish:
      return a * std::tanh(std::log1p(std::exp(a)));
    case EwOp::kSoftsign:
      return a / (1 + std::fabs(a));
    case EwOp::kSelu:
      return p1 * (a > 0 ? a : p0 * std::expm1(a));
    case EwOp::kCelu:
      return a > 0 ? a : p0 * std::expm1(a / p0);
    case EwOp::kThresholdedRelu:
      return a > p0 ? a : 0;
    case EwOp::kSin:
      return std::sin(a);
    case EwOp::kCos:
      return std::cos(a);
    case EwOp::kSilu:
      return a / (1 + std::exp(-p0 * a));
    case EwOp::kGeluErf:
      return 0.5 * a * (1 + std::erf(a / std::sqrt(2.0)));
    case EwOp::kGeluTanh:
      return 0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
    case EwOp::kAdd:
      return a + b;
    case EwOp::kSub:
      return a - b;
    case EwOp::kMul:
      return a * b;
    case EwOp::kDiv:
      return a / b;
    case EwOp::kPow:
      return std::pow(a, b);
    case EwOp::kMax:
      return std::isnan(a) || a >= b ? a : b;
    case EwOp::kMin:
      return std::isnan(a) || a <= b ? a : b;
    case EwOp::kPRelu:
      return a < 0 ? a * b : a;
    case EwOp::kWhere:
      return a != 0 ? b : c;
    default:
      return a;
  }
}

// Element `flat` of an output of `out` dims read from an input of `in` dims (broadcast).
double read(const Tensor& t, const Shape& out, int64_t flat) {
  const Shape& in = t.shape();
  int64_t off = 0, stride = 1;
  for (size_t i = in.rank(); i-- > 0;) {
    const size_t oi = out.rank() - in.rank() + i;
    int64_t rem = flat;
    for (size_t j = out.rank(); j-- > oi + 1;) rem /= out[j];
    const int64_t idx = rem % out[oi];
    off += (in[i] == 1 ? 0 : idx) * stride;
    stride *= in[i];
  }
  if (t.dtype() == DType::kBool) return t.data<uint8_t>()[off] != 0 ? 1.0 : 0.0;
  return t.data<float>()[off];
}

// One output element: registers 0 .. n-1 from `reg0` and the inputs.
double run_one(const graph::EwProgram& p, std::vector<double>& regs) {
  for (const EwInstr& in : p.code) {
    double v[3] = {0, 0, 0};
    for (int k = 0; k < graph::ew_arity(in.op); ++k) {
      const int a = in.args[static_cast<size_t>(k)];
      v[k] = a == EwInstr::kImm ? static_cast<double>(in.imm) : regs[static_cast<size_t>(a)];
    }
    regs.push_back(apply(in.op, v[0], v[1], v[2], in.p0, in.p1));
  }
  return regs.back();
}

class RefElementwise final : public Kernel {
 public:
  explicit RefElementwise(const graph::Node& node) : node_(node) {}

  Status init() {
    SL_ASSIGN_OR_RETURN(auto p, graph::read_program_attrs(node_));
    if (!p) return invalid_argument(node_.describe() + ": no elementwise program");
    p_ = *p;
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    Shape out;
    for (const auto& i : inputs) {
      Shape next;
      if (!broadcast_shapes(out, i.shape, &next))
        return invalid_argument(node_.describe() + ": shapes do not broadcast");
      out = next;
    }
    ReshapeResult r;
    r.outputs.push_back(OutputInfo{DType::kFloat32, out, Layout::kPlain});
    return r;
  }

  Status run(const RunContext& ctx) const override {
    ref_run_program(p_, ctx.inputs, ctx.outputs[0].data<float>(), ctx.outputs[0].shape());
    return ok_status();
  }

 private:
  graph::Node node_;
  graph::EwProgram p_;
};

}  // namespace

void ref_apply_program(const graph::EwProgram& p, float* y, const Shape& y_shape, std::span<const Tensor> inputs) {
  const int64_t n = y_shape.numel();
  std::vector<double> regs;
  for (int64_t i = 0; i < n; ++i) {
    regs.assign(1, y[i]);
    for (const Tensor& t : inputs) regs.push_back(read(t, y_shape, i));
    y[i] = static_cast<float>(run_one(p, regs));
  }
}

void ref_run_program(const graph::EwProgram& p, std::span<const Tensor> inputs, float* out, const Shape& out_shape) {
  const int64_t n = out_shape.numel();
  std::vector<double> regs;
  for (int64_t i = 0; i < n; ++i) {
    regs.clear();
    for (const Tensor& t : inputs) regs.push_back(read(t, out_shape, i));
    out[i] = static_cast<float>(run_one(p, regs));
  }
}

Status register_elementwise_program(KernelRegistry& reg) {
  KernelDef d = ref_def<RefElementwise>("Elementwise", "streamline", 1);
  d.dtype = DType::kUndefined;
  return reg.add(std::move(d));
}

}  // namespace streamline::ops::reference
