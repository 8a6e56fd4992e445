#include "ops/cpu/ew_lower.h"

#include <cfloat>
#include <cmath>
#include <functional>

#include "ops/cpu/onednn_common.h"

namespace streamline::ops::cpu {
namespace {

using dnnl::algorithm;
using graph::EwInstr;
using graph::EwOp;
using graph::EwProgram;

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// Register `reg` of `p` at r0 = x, in double (the other inputs must not be read).
double eval(const EwProgram& p, int reg, double x) {
  if (reg < p.num_inputs) return x;
  const EwInstr& in = p.code[static_cast<size_t>(reg - p.num_inputs)];
  auto arg = [&](int k) {
    const int a = in.args[static_cast<size_t>(k)];
    return a == EwInstr::kImm ? static_cast<double>(in.imm) : eval(p, a, x);
  };
  const double a = arg(0);
  const double p0 = in.p0, p1 = in.p1;
  switch (in.op) {
    case EwOp::kIdentity:
      return a;
    case EwOp::kRelu:
      return a > 0 ? a : 0;
    case EwOp::kLeakyRelu:
      return a < 0 ? p0 * a : a;
    case EwOp::kSigmoid:
      return sigmoid(a);
    case EwOp::kTanh:
      return std::tanh(a);
    case EwOp::kExp:
      return std::exp(a);
    case EwOp::kLog:
      return std::log(a);
    case EwOp::kSqrt:
      return std::sqrt(a);
    case EwOp::kReciprocal:
      return 1.0 / a;
    case EwOp::kNeg:
      return -a;
    case EwOp::kAbs:
      return std::fabs(a);
    case EwOp::kErf:
      return std::erf(a);
    case EwOp::kHardSigmoid:
      return std::min(1.0, std::max(0.0, p0 * a + p1));
    case EwOp::kHardSwish:
      return a * std::min(1.0, std::max(0.0, a / 6 + 0.5));
    case EwOp::kSoftplus:
      return std::log1p(std::exp(a));
    case EwOp::kElu:
      return a < 0 ? p0 * std::expm1(a) : a;
    case EwOp::kClip:
      return std::min<double>(std::max<double>(a, p0), p1);
    case EwOp::kFloor:
      return std::floor(a);
    case EwOp::kCeil:
      return std::ceil(a);
    case EwOp::kRound:
      return std::nearbyint(a);
    case EwOp::kSign:
      return a > 0 ? 1 : a < 0 ? -1 : 0;
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
      return a * sigmoid(p0 * a);
    case EwOp::kGeluErf:
      return 0.5 * a * (1 + std::erf(a / std::sqrt(2.0)));
    case EwOp::kGeluTanh:
      return 0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
    default:
      break;
  }
  const double b = arg(1);
  switch (in.op) {
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
      return std::max(a, b);
    case EwOp::kMin:
      return std::min(a, b);
    case EwOp::kPRelu:
      return a < 0 ? a * b : a;
    default:
      return arg(0) != 0 ? b : arg(2);  // Where
  }
}

// Bit k set when `reg` depends on input k (inputs past 63 count as 63).
uint64_t deps(const EwProgram& p, int reg) {
  if (reg < p.num_inputs) return uint64_t{1} << std::min(reg, 63);
  const EwInstr& in = p.code[static_cast<size_t>(reg - p.num_inputs)];
  uint64_t d = 0;
  for (int k = 0; k < graph::ew_arity(in.op); ++k)
    if (in.args[static_cast<size_t>(k)] != EwInstr::kImm) d |= deps(p, in.args[static_cast<size_t>(k)]);
  return d;
}

constexpr double kProbes[] = {-9,    -6,   -4,   -3,   -2.5,  -2, -1.5, -1.2, -1,  -0.8, -0.6,
                              -0.45, -0.3, -0.2, -0.1, -0.03, 0,  0.03, 0.1,  0.2, 0.3,  0.45,
                              0.6,   0.8,  1,    1.2,  1.5,   2,  2.5,  3,    4,   6,    9};

// Whether f matches g at every probe (NaN matches NaN; relative 1e-5 with a floor of 1).
bool same(const std::function<double(double)>& f, const std::function<double(double)>& g) {
  for (double x : kProbes) {
    const double a = f(x), b = g(x);
    if (std::isnan(a) || std::isnan(b)) {
      if (std::isnan(a) != std::isnan(b)) return false;
      continue;
    }
    if (std::isinf(a) || std::isinf(b)) {
      if (a != b) return false;
      continue;
    }
    if (std::fabs(a - b) > 1e-5 * std::max(1.0, std::fabs(b))) return false;
  }
  return true;
}

EwPostOp eltwise(algorithm alg, float alpha = 0.f, float beta = 0.f) {
  EwPostOp op;
  op.alg = alg;
  op.alpha = alpha;
  op.beta = beta;
  return op;
}

// The post-op of one unary instruction applied to the running value (two for HardSigmoid).
std::optional<std::vector<EwPostOp>> unary_post_ops(const EwInstr& in) {
  switch (in.op) {
    case EwOp::kIdentity:
      return std::vector<EwPostOp>{};
    case EwOp::kRelu:
      return std::vector{eltwise(algorithm::eltwise_relu)};
    case EwOp::kLeakyRelu:
      return std::vector{eltwise(algorithm::eltwise_relu, in.p0)};
    case EwOp::kSigmoid:
      return std::vector{eltwise(algorithm::eltwise_logistic)};
    case EwOp::kTanh:
      return std::vector{eltwise(algorithm::eltwise_tanh)};
    case EwOp::kExp:
      return std::vector{eltwise(algorithm::eltwise_exp)};
    case EwOp::kLog:
      return std::vector{eltwise(algorithm::eltwise_log)};
    case EwOp::kSqrt:
      return std::vector{eltwise(algorithm::eltwise_sqrt)};
    case EwOp::kAbs:
      return std::vector{eltwise(algorithm::eltwise_abs)};
    case EwOp::kNeg:
      return std::vector{eltwise(algorithm::eltwise_linear, -1.f, 0.f)};
    case EwOp::kElu:
      return std::vector{eltwise(algorithm::eltwise_elu, in.p0)};
    case EwOp::kClip:
      return std::vector{eltwise(algorithm::eltwise_clip_v2, std::max(in.p0, -FLT_MAX), std::min(in.p1, FLT_MAX))};
    case EwOp::kHardSwish:
      return std::vector{eltwise(algorithm::eltwise_hardswish)};
    case EwOp::kHardSigmoid:
      return std::vector{eltwise(algorithm::eltwise_linear, in.p0, in.p1),
                         eltwise(algorithm::eltwise_clip_v2, 0.f, 1.f)};
    case EwOp::kMish:
      return std::vector{eltwise(algorithm::eltwise_mish)};
    case EwOp::kSilu:
      return std::vector{eltwise(algorithm::eltwise_swish, in.p0)};
    case EwOp::kGeluErf:
      return std::vector{eltwise(algorithm::eltwise_gelu_erf)};
    case EwOp::kGeluTanh:
      return std::vector{eltwise(algorithm::eltwise_gelu_tanh)};
    default:
      return std::nullopt;
  }
}

// Post-ops for `reg` as a function of register 0 and the other inputs, or nullopt.
std::optional<std::vector<EwPostOp>> lower(const EwProgram& p, int reg) {
  if (reg == 0) return std::vector<EwPostOp>{};
  if (reg < p.num_inputs) return std::nullopt;
  const uint64_t d = deps(p, reg);
  if (!(d & 1)) return std::nullopt;
  if (d == 1)
    if (auto f = identify_function(p, reg)) return std::vector<EwPostOp>{*f};
  const EwInstr& in = p.code[static_cast<size_t>(reg - p.num_inputs)];
  const int arity = graph::ew_arity(in.op);
  if (arity == 1) {
    auto sub = lower(p, in.args[0]);
    auto mine = unary_post_ops(in);
    if (!sub || !mine) return std::nullopt;
    sub->insert(sub->end(), mine->begin(), mine->end());
    return sub;
  }
  if (arity != 2) return std::nullopt;
  const int a = in.args[0], b = in.args[1];
  const bool a_imm = a == EwInstr::kImm, b_imm = b == EwInstr::kImm;
  // The operand carrying register 0 and the other one.
  const bool chain_left = !a_imm && (deps(p, a) & 1);
  const int chain = chain_left ? a : b, other = chain_left ? b : a;
  const bool other_imm = chain_left ? b_imm : a_imm;
  if (chain == EwInstr::kImm || !(deps(p, chain) & 1)) return std::nullopt;
  auto sub = lower(p, chain);
  if (!sub) return std::nullopt;
  if (other_imm) {
    const float c = in.imm;
    std::optional<EwPostOp> op;
    switch (in.op) {
      case EwOp::kAdd:
        op = eltwise(algorithm::eltwise_linear, 1.f, c);
        break;
      case EwOp::kSub:
        op = chain_left ? eltwise(algorithm::eltwise_linear, 1.f, -c) : eltwise(algorithm::eltwise_linear, -1.f, c);
        break;
      case EwOp::kMul:
        op = eltwise(algorithm::eltwise_linear, c, 0.f);
        break;
      case EwOp::kDiv:
        if (chain_left && c != 0.f) op = eltwise(algorithm::eltwise_linear, 1.f / c, 0.f);
        break;
      case EwOp::kPow:
        if (chain_left) op = eltwise(algorithm::eltwise_pow, 1.f, c);
        break;
      case EwOp::kMax:
        if (c == 0.f) op = eltwise(algorithm::eltwise_relu);
        break;
      case EwOp::kMin:
        op = eltwise(algorithm::eltwise_clip_v2, -FLT_MAX, c);
        break;
      default:
        break;
    }
    if (!op) return std::nullopt;
    sub->push_back(*op);
    return sub;
  }
  // A binary post-op with another input, which must not depend on register 0.
  if (other >= p.num_inputs || other == 0) return std::nullopt;
  EwPostOp op;
  op.kind = EwPostOp::Kind::kBinary;
  op.input = other;
  switch (in.op) {
    case EwOp::kAdd:
      op.alg = algorithm::binary_add;
      break;
    case EwOp::kMul:
      op.alg = algorithm::binary_mul;
      break;
    case EwOp::kMax:
      op.alg = algorithm::binary_max;
      break;
    case EwOp::kMin:
      op.alg = algorithm::binary_min;
      break;
    case EwOp::kSub:
      if (!chain_left) return std::nullopt;
      op.alg = algorithm::binary_sub;
      break;
    case EwOp::kDiv:
      if (!chain_left) return std::nullopt;
      op.alg = algorithm::binary_div;
      break;
    default:
      return std::nullopt;
  }
  sub->push_back(op);
  return sub;
}

}  // namespace

std::optional<EwPostOp> identify_function(const EwProgram& p, int reg) {
  if (deps(p, reg) != 1) return std::nullopt;
  auto f = [&](double x) { return eval(p, reg, x); };
  // Affine first (it also covers the identity and a constant scale); its two parameters are fitted.
  const double beta = f(0), alpha = f(1) - beta;
  if (std::isfinite(alpha) && std::isfinite(beta) && same(f, [&](double x) { return alpha * x + beta; }))
    return eltwise(algorithm::eltwise_linear, static_cast<float>(alpha), static_cast<float>(beta));
  if (same(f, [](double x) { return x > 0 ? x : 0; })) return eltwise(algorithm::eltwise_relu);
  const double slope = -f(-1);
  if (std::isfinite(slope) && same(f, [&](double x) { return x > 0 ? x : slope * x; }))
    return eltwise(algorithm::eltwise_relu, static_cast<float>(slope));
  if (same(f, sigmoid)) return eltwise(algorithm::eltwise_logistic);
  if (same(f, [](double x) { return std::tanh(x); })) return eltwise(algorithm::eltwise_tanh);
  if (same(f, [](double x) { return std::exp(x); })) return eltwise(algorithm::eltwise_exp);
  if (same(f, [](double x) { return std::fabs(x); })) return eltwise(algorithm::eltwise_abs);
  if (same(f, [](double x) { return x * x; })) return eltwise(algorithm::eltwise_square);
  if (same(f, [](double x) { return std::sqrt(x); })) return eltwise(algorithm::eltwise_sqrt);
  if (same(f, [](double x) { return std::log(x); })) return eltwise(algorithm::eltwise_log);
  if (same(f, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }))
    return eltwise(algorithm::eltwise_gelu_erf);
  if (same(f, [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }))
    return eltwise(algorithm::eltwise_gelu_tanh);
  if (same(f, [](double x) { return x * std::min(1.0, std::max(0.0, x / 6 + 0.5)); }))
    return eltwise(algorithm::eltwise_hardswish);
  if (same(f, [](double x) { return x * std::tanh(std::log1p(std::exp(x))); })) return eltwise(algorithm::eltwise_mish);
  // Swish x * sigmoid(a x): a from f(1) = sigmoid(a).
  const double s1 = f(1);
  if (s1 > 0 && s1 < 1) {
    const double a = std::log(s1 / (1 - s1));
    if (same(f, [&](double x) { return x * sigmoid(a * x); }))
      return eltwise(algorithm::eltwise_swish, static_cast<float>(a));
  }
  // ELU with alpha from f(-1) = alpha (e^-1 - 1).
  const double ea = f(-1) / std::expm1(-1.0);
  if (std::isfinite(ea) && ea > 0 && same(f, [&](double x) { return x > 0 ? x : ea * std::expm1(x); }))
    return eltwise(algorithm::eltwise_elu, static_cast<float>(ea));
  // Clip between f's values far out.
  const double lo = f(-1e30), hi = f(1e30);
  if (std::isfinite(lo) && std::isfinite(hi) && lo < hi &&
      same(f, [&](double x) { return std::min(hi, std::max(lo, x)); }))
    return eltwise(algorithm::eltwise_clip_v2, static_cast<float>(lo), static_cast<float>(hi));
  return std::nullopt;
}

std::optional<std::vector<EwPostOp>> lower_to_post_ops(const EwProgram& p) {
  if (!p.validate().ok()) return std::nullopt;
  auto ops = lower(p, p.output());
  if (!ops) return ops;
  // Consecutive affine maps become one: a (b x + c) + d = ab x + (ac + d). Besides saving a pass,
  // this keeps oneDNN 2.6's blocked convolutions correct: after a binary post-op they computed two
  // consecutive eltwise_linear post-ops wrongly (EwFused.ConvEpiloguesMatchReference).
  std::vector<EwPostOp> merged;
  for (const EwPostOp& op : *ops) {
    const bool lin = op.kind == EwPostOp::Kind::kEltwise && op.alg == algorithm::eltwise_linear;
    if (lin && !merged.empty() && merged.back().kind == EwPostOp::Kind::kEltwise &&
        merged.back().alg == algorithm::eltwise_linear) {
      EwPostOp& prev = merged.back();
      prev.beta = op.alpha * prev.beta + op.beta;
      prev.alpha = op.alpha * prev.alpha;
      continue;
    }
    if (lin && op.alpha == 1.f && op.beta == 0.f) continue;  // the identity
    merged.push_back(op);
  }
  // oneDNN 2.6 also computes two eltwise_linear post-ops with different parameters wrongly when
  // another eltwise sits between them (MatMul then x/c, tanh, then *c, the soft cap of attention
  // scores: the second one ran with the first one's factor). Such a chain runs as our own loop
  // over the output instead (EwFused.MatMulEpiloguesMatchReference, the soft cap).
  int linears = 0;
  for (const EwPostOp& op : merged)
    linears += op.kind == EwPostOp::Kind::kEltwise && op.alg == algorithm::eltwise_linear;
  if (linears > 1) return std::nullopt;
  return merged;
}

Result<EwEpilogue> EwEpilogue::create(const graph::Node& node, size_t first_input) {
  EwEpilogue e;
  e.first_input_ = first_input;
  SL_ASSIGN_OR_RETURN(std::optional<graph::EwProgram> p, graph::read_program_attrs(node));
  if (!p) return e;
  if (node.inputs.size() != first_input + static_cast<size_t>(p->num_inputs - 1))
    return invalid_argument(node.describe() + ": its elementwise epilogue reads " + std::to_string(p->num_inputs - 1) +
                            " inputs after input " + std::to_string(first_input) + ", the node has " +
                            std::to_string(node.inputs.size()) + " inputs");
  SL_ASSIGN_OR_RETURN(EwExec ex, EwExec::compile(*p));
  e.exec_ = std::make_shared<const EwExec>(std::move(ex));
  e.lowered_ = lower_to_post_ops(*p);
  return e;
}

Result<EwEpilogue::ShapePlan> EwEpilogue::plan(const Shape& y, Layout layout, const dnnl::memory::desc& dst_md,
                                               std::span<const TensorInfo> node_inputs, bool allow_post_ops,
                                               bool allow_binary) const {
  ShapePlan sp;
  std::vector<EwOperand> ops{{y, layout, DType::kFloat32}};
  for (size_t k = first_input_; k < node_inputs.size(); ++k)
    ops.push_back({node_inputs[k].shape, node_inputs[k].layout, node_inputs[k].dtype});
  SL_ASSIGN_OR_RETURN(sp.walk, make_ew_walk(y, layout, ops));
  if (!allow_post_ops || !lowered_) return sp;
  // Binary operands: per-channel or scalar constants broadcast by oneDNN, or a tensor laid out as y.
  const int64_t channels = y.rank() >= 2 ? y[1] : 1;
  for (const EwPostOp& op : *lowered_) {
    if (op.kind != EwPostOp::Kind::kBinary) continue;
    if (!allow_binary) return sp;
    const TensorInfo& in = node_inputs[first_input_ + static_cast<size_t>(op.input - 1)];
    if (in.dtype != DType::kFloat32) return sp;
    dnnl::memory::dims ones(y.rank(), 1);
    if (in.shape.numel() == 1) {
      sp.src1.push_back(plain_md(ones));
    } else if (in.shape == y && (in.layout == layout || y.rank() != 4)) {
      sp.src1.push_back(dst_md);
    } else if (y.rank() == 4 && in.shape.numel() == channels &&
               (in.shape.rank() >= 3 && in.shape[in.shape.rank() - 3] == channels)) {
      ones[1] = channels;
      sp.src1.push_back(plain_md(ones));
    } else {
      return sp;
    }
  }
  sp.post_ops = true;
  sp.ops = *lowered_;
  return sp;
}

void EwEpilogue::append(dnnl::post_ops& po, const ShapePlan& sp) const {
  size_t b = 0;
  for (const EwPostOp& op : sp.ops) {
    if (op.kind == EwPostOp::Kind::kEltwise)
      po.append_eltwise(1.f, op.alg, op.alpha, op.beta);
    else
      po.append_binary(op.alg, sp.src1[b++]);
  }
}

void EwEpilogue::add_args(std::unordered_map<int, dnnl::memory>& args, const ShapePlan& sp, int index_base,
                          std::span<const Tensor> node_inputs) const {
  size_t b = 0;
  for (size_t i = 0; i < sp.ops.size(); ++i) {
    const EwPostOp& op = sp.ops[i];
    if (op.kind != EwPostOp::Kind::kBinary) continue;
    const Tensor& t = node_inputs[first_input_ + static_cast<size_t>(op.input - 1)];
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(index_base + static_cast<int>(i)) | DNNL_ARG_SRC_1,
                 wrap(sp.src1[b++], t.raw()));
  }
}

void EwEpilogue::run(const ShapePlan& sp, float* y, std::span<const Tensor> node_inputs, int threads) const {
  std::vector<const void*> ptrs{y};
  for (size_t k = first_input_; k < node_inputs.size(); ++k) ptrs.push_back(node_inputs[k].raw());
  run_ew(*exec_, sp.walk, ptrs, y, threads);
}

}  // namespace streamline::ops::cpu
